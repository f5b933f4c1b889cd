"""Databases built by earlier releases (0001-0003, 0001-0005, with data) upgrade to the current schema with every
message, memory version (and its chain) and metrics row intact and keyed; the migration record gains checksums."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import MemoryService, MemorySettings, with_memory
from memory_agent.db.migrate import RELEASED_CHECKSUMS, load_migrations
from memory_agent.db.schema import SchemaManager
from tests.conftest import query
from tests.migration.old_releases import RELEASES, build_release, keys, snapshot, write_old_rows
from tests.migration.sharding import sharding_violations
from tests.support import EchoChat

OLD_CONVERSATIONS = {"alpha": 8, "beta": 5, "with space and ü": 8}


def test_released_files_are_unchanged():
    by_version = {m.version: m.checksum for m in load_migrations()}
    assert {v: by_version[v] for v in RELEASED_CHECKSUMS} == RELEASED_CHECKSUMS


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_an_old_database_upgrades_with_every_row_intact(empty_database_url, release):
    url = empty_database_url
    build_release(url, RELEASES[release])
    write_old_rows(url, OLD_CONVERSATIONS)
    before = snapshot(url)
    assert len(before["messages"]) == 2 * sum(OLD_CONVERSATIONS.values())
    chain_before = [(r[0], r[5]) for r in before["memory"]]
    assert sum(base is not None for _, base in chain_before) >= 4  # a real chain to keep

    with MemoryService.from_settings(MemorySettings(database_url=url)):
        pass

    after = snapshot(url)
    assert after == before
    assert [(r[0], r[5]) for r in after["memory"]] == chain_before
    expected = {(c, "default", f"conversation:{c}") for c in OLD_CONVERSATIONS}
    for table in ("conversations", "messages", "memory"):
        assert keys(url, table) == expected, table
    assert keys(url, "round_metrics") == expected | {("never-stored", "default", "conversation:never-stored")}
    owners = query(url, "SELECT conversation_id, tenant_id, user_id FROM conversation_owners")
    assert set(owners) == expected
    versions = query(url, "SELECT version, checksum FROM schema_migrations ORDER BY version")
    assert versions == [(m.version, m.checksum) for m in load_migrations()]
    assert sharding_violations(url, "memory_agent") == []


def test_an_upgraded_conversation_continues(empty_database_url):
    url = empty_database_url
    build_release(url, 3)
    write_old_rows(url, {"alpha": 8})
    with MemoryService.from_settings(MemorySettings(database_url=url)) as memory:
        context = memory.call_sync(memory.conversations.get_context_for_workflow("alpha"))
        assert context.memory_end_sequence == 11  # the old chain's latest completed version is served
        assert context.memory_text == "summary of alpha to 11"
        assert [m.content for m in context.gap_messages][:1] == ["user 7 of alpha: üüüüüüü"]
        app = with_memory(EchoChat().graph, memory)
        app.invoke({"messages": [HumanMessage("after the upgrade")]}, {"configurable": {"thread_id": "alpha"}})
    rows = query(
        url,
        "SELECT sequence_number, round_number, user_id FROM messages WHERE conversation_id = 'alpha'"
        " ORDER BY sequence_number DESC LIMIT 2",
    )
    assert rows == [(17, 9, "conversation:alpha"), (16, 9, "conversation:alpha")]


def test_a_migrated_database_opens_with_nothing_to_apply(empty_database_url):
    build_release(empty_database_url, 5)
    with MemoryService.from_settings(MemorySettings(database_url=empty_database_url)) as memory:
        report = memory.call_sync(SchemaManager(memory.backend).migrate())
    assert report.applied == [] and report.definitions == []
