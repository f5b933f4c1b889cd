"""A user's memory as one document: export (service, HTTP) gives the same bytes twice; import into another
database or tenant keeps every reference and time (the integrity checker runs on both databases after the test);
bad documents name the record and field and write nothing; an import never outlives a forget_user."""

from __future__ import annotations

import asyncio
import copy
import functools
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.errors import InvalidInputError
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.transfer import FORMAT, SCHEMA_VERSION, dumps
from memory_agent.transfer.document import SECTIONS
from tests.api.conftest import serve
from tests.api.test_http import client
from tests.conftest import execute, query
from tests.integration.test_recall_surfaces import old_batch
from tests.support import EchoChat

SEPT = datetime(2023, 9, 14, 18, 30, tzinfo=UTC)


async def user_with_everything(memory: Any, url: str) -> None:
    """ana: an imported thread (its own times), rounds with memory versions and items, a batch summary whose
    originals were forgotten, a daily and a weekly note naming items, versions and the daily."""
    await old_batch(memory)
    await memory.transfers.import_messages(
        "old-trip",
        [
            {"role": "user", "content": "We plan a trip to Kyoto.", "created_at": SEPT.isoformat()},
            {"role": "assistant", "content": "Kyoto, noted.", "created_at": (SEPT + timedelta(minutes=1)).isoformat()},
        ],
        user_id="ana",
        summarize=False,
    )
    app = with_memory(EchoChat().graph, memory)
    for text in ["I'm allergic to peanuts.", "I live in Lisbon.", "My sister is Maria.", "I prefer tea.", "Bye."]:
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t1", "user_id": "ana"}})
        assert await memory.drain(timeout=10)
    await memory.loop.arun(remember_again(memory))
    item_id, memory_id = query(
        url,
        "SELECT (SELECT min(item_id) FROM memory_agent.items WHERE user_id = 'ana'),"
        " (SELECT min(memory_id) FROM memory_agent.memory WHERE user_id = 'ana')",
    )[0]
    assert item_id is not None and memory_id is not None
    execute(
        url,
        "INSERT INTO memory_agent.consolidation_notes (user_id, tenant_id, period, period_start, period_end, content,"
        " consolidated, notes_consolidated, model, created_at, source_item_ids, source_memory_ids, source_note_ids,"
        " source_conversation_ids, key_insights)"
        " VALUES ('ana', 'default', 'daily', '2026-01-05', '2026-01-05', 'day', 'day', 0, 'm',"
        " '2026-01-06T01:00:00Z', ARRAY[%s::bigint], ARRAY[%s::bigint], '{}', '{t1}', '{}')",
        [item_id, memory_id],
    )
    execute(
        url,
        "INSERT INTO memory_agent.consolidation_notes (user_id, tenant_id, period, period_start, period_end, content,"
        " consolidated, notes_consolidated, model, created_at, source_item_ids, source_memory_ids, source_note_ids,"
        " source_conversation_ids, key_insights)"
        " SELECT 'ana', 'default', 'weekly', '2026-01-05', '2026-01-11', 'week', 'week', 1, 'm',"
        " '2026-01-12T01:00:00Z', '{}', '{}', ARRAY[note_id], '{t1}', '{Kyoto in April}'"
        " FROM memory_agent.consolidation_notes WHERE user_id = 'ana' AND period = 'daily'",
    )


async def remember_again(memory: Any) -> None:
    """A current item beside the rounds' (the batch's originals are forgotten)."""
    from memory_agent.long_term import ItemOrigin, ItemScope, remember
    from tests.long_term.conftest import at, items

    async with memory.backend.pool.connection() as conn:
        await remember(
            conn,
            scope=ItemScope(tenant_id="default", user_id="ana"),
            source=ItemOrigin(conversation_id=None, memory_id=None),
            items=items(facts=[("city", "Lives in Lisbon")]),
            now=at(1),
        )


def without_ids(document: dict[str, Any]) -> dict[str, Any]:
    """The document with every id replaced by what it names (ids differ between databases; references must
    name the same things)."""
    doc = copy.deepcopy(document)
    versions = {v["memory_id"]: (v["conversation_id"], v["end_sequence"]) for v in doc["memory_versions"]}
    items = {i["item_id"]: (i["key"], i["content"], i["valid_from"]) for i in doc["items"]}
    notes = {n["note_id"]: (n["period"], n["period_start"]) for n in doc["consolidation_notes"]}
    for version in doc["memory_versions"]:
        version["memory_id"] = versions[version["memory_id"]]
        version["base_memory_id"] = versions.get(version["base_memory_id"])
    for item in doc["items"]:
        item["item_id"] = items[item["item_id"]]
        item["source_item_ids"] = [items[i] for i in item["source_item_ids"]]
    for source in doc["item_sources"]:
        source["item_id"] = items[source["item_id"]]
        source["memory_id"] = versions.get(source["memory_id"], source["memory_id"] and "gone")
    for note in doc["consolidation_notes"]:
        note["note_id"] = notes[note["note_id"]]
        note["source_item_ids"] = [items.get(i, "gone") for i in note["source_item_ids"] or []]
        note["source_memory_ids"] = [versions.get(i, "gone") for i in note["source_memory_ids"] or []]
        note["source_note_ids"] = [notes[i] for i in note["source_note_ids"] or []]
    for batch in doc["batch_summaries"]:
        batch["summary_id"] = None
        batch["first_item_id"] = items.get(batch["first_item_id"], "gone")
        batch["summarized_ids"] = [items.get(i, "gone") for i in batch["summarized_ids"]]
    return doc


async def test_export_is_stable_and_imports_into_another_database_whole(open_memory, database_url, other_database_url):
    memory = await open_memory(model=OfflineSummaryModel(), memory_summarize_after_seq=3)
    await user_with_everything(memory, database_url)
    first = await memory.transfers.export_user("ana")
    assert (first["format"], first["schema_version"]) == (FORMAT, SCHEMA_VERSION)
    assert dumps(await memory.transfers.export_user("ana")) == dumps(first)  # nothing changed: the same bytes
    assert {len(first[s]) > 0 for s in ("conversations", "messages", "memory_versions", "items", "item_sources")} == {
        True
    }
    assert len(first["consolidation_notes"]) == 2 and len(first["batch_summaries"]) == 1
    assert first["messages"][0]["created_at"] == "2023-09-14T18:30:00Z"

    other = await open_memory(model=OfflineSummaryModel(), database_url=other_database_url)
    execute(other_database_url, "SELECT nextval('memory_agent.items_item_id_seq') FROM generate_series(1, 50)")
    report = await other.transfers.import_user(dumps(first))
    assert report.counts["messages"] == len(first["messages"])
    again = await other.transfers.export_user("ana")
    assert again["items"][0]["item_id"] != first["items"][0]["item_id"]  # new ids ...
    assert without_ids(again) == without_ids(first)  # ... naming the same things, with the same times
    # Recalled there under its own date.
    found = await other.long_term.recall("ana", "Kyoto trip")
    assert "14 September 2023" in found.block

    # Into another tenant of the same database: its thread ids are taken, so they get a prefix.
    with pytest.raises(InvalidInputError, match=r"conversations\[0\]: thread id 'old-trip' belongs to another user"):
        await memory.transfers.import_user(first, tenant_id="acme")
    await memory.transfers.import_user(first, tenant_id="acme", conversation_prefix="acme:")
    moved = await memory.transfers.export_user("ana", tenant_id="acme")
    assert [c["conversation_id"] for c in moved["conversations"]] == ["acme:old-trip", "acme:t1"]
    assert [m["content"] for m in moved["messages"]] == [m["content"] for m in first["messages"]]
    assert dumps(await memory.transfers.export_user("ana")) == dumps(first)  # the original is untouched


def counts(url: str) -> list[int]:
    tables = ("conversations", "messages", "memory", "items", "item_sources", "consolidation_notes", "batch_summaries")
    return [query(url, f"SELECT count(*) FROM memory_agent.{table}")[0][0] for table in tables]


def changed(document: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """A copy of `document` with `change` made to it (`document` is left as it was)."""
    copied = copy.deepcopy(document)
    change(copied)
    return copied


async def each_refused(memory: Any, cases: list[tuple[Any, str]]) -> None:
    """Each (document, error) imported as user bo raises InvalidInputError matching the error."""
    for document, error in cases:
        with pytest.raises(InvalidInputError, match=error):
            await memory.transfers.import_user(document, user_id="bo", conversation_prefix="bo:")


async def test_a_bad_document_names_the_record_and_field_and_writes_nothing(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), memory_summarize_after_seq=3)
    await user_with_everything(memory, database_url)
    good = await memory.transfers.export_user("ana")
    before = counts(database_url)

    broken = functools.partial(changed, good)

    cases = [
        (broken(lambda d: d.update(schema_version=99)), "expected 'memory_agent.user_memory' version 1"),
        (broken(lambda d: d["items"][1].pop("content")), r"items\[1\]: field 'content' is missing"),
        (broken(lambda d: d["messages"][2].update(created_at="later")), r"messages\[2\]: field 'created_at'"),
        (broken(lambda d: d["items"][0].update(valid_from="2024-01-01T00:00:00")), r"items\[0\]: field 'valid_from'"),
        (broken(lambda d: d["items"][0].update(item_type="rumour")), r"items\[0\]: the database refused it"),
        (broken(lambda d: d["messages"][0].update(conversation_id="nowhere")), r"messages\[0\]: its conversation"),
        (broken(lambda d: d.update(extra=1)), "unknown document field 'extra'"),
        (
            broken(lambda d: d["memory_versions"][0].update(status="processing")),
            r"memory_versions\[0\]: field 'status'",
        ),
        (broken(lambda d: d["messages"][1].update(message={"x": 1})), r"messages\[1\]: field 'message' is not"),
        (broken(lambda d: d["messages"][1].update(sequence_number=0)), "messages of conversation 'bo:old-trip'"),
        ("{not json", "not JSON"),
    ]
    await each_refused(memory, cases)
    # Something else, naming no user: refused as no user document, not for the user it lacks.
    with pytest.raises(InvalidInputError, match="not a user document this version reads"):
        await memory.transfers.import_user({"messages": []})
    # A user who holds memory already is not merged into.
    with pytest.raises(InvalidInputError, match="holds memory already"):
        await memory.transfers.import_user(good, conversation_prefix="x:")
    assert counts(database_url) == before


async def test_ids_of_the_wrong_type_or_defined_twice_are_refused_by_name(open_memory, database_url):
    memory = await open_memory()
    said = [{"role": "user", "content": "hi", "created_at": SEPT.isoformat()}]
    await memory.transfers.import_messages("t", said, user_id="ana", summarize=False)
    await memory.long_term.remember("ana", "likes tea", key="drink")
    await memory.long_term.remember("ana", "likes coffee", key="drink")
    good = await memory.transfers.export_user("ana")
    before = counts(database_url)

    broken = functools.partial(changed, good)

    def twin(doc: dict[str, Any]) -> None:  # another item under the first one's id: it would take its sources
        doc["items"].append({**doc["items"][0], "key": "other", "content": "not the first one"})

    cases = [
        (broken(twin), r"items\[2\]: field 'item_id' is 1, the id of an earlier record"),
        (broken(lambda d: d["items"][0].update(item_id=[1])), r"items\[0\]: field 'item_id' is \[1\], not an integer"),
        (broken(lambda d: d["items"][0].update(item_id=True)), r"items\[0\]: field 'item_id' is True, not an integer"),
        (broken(lambda d: d["item_sources"][0].update(item_id={})), r"item_sources\[0\]: field 'item_id' is \{\}"),
        (broken(lambda d: d["item_sources"][0].update(memory_id=[2])), r"item_sources\[0\]: field 'memory_id'"),
        (broken(lambda d: d["conversations"].append(d["conversations"][0])), r"conversations\[1\]: .* twice"),
        # A thread id no round could continue (rounds refuse one over 1024 bytes).
        (broken(lambda d: d["conversations"][0].update(conversation_id="t" * 1100)), r"conversations\[0\]: field"),
    ]
    await each_refused(memory, cases)
    assert counts(database_url) == before


async def test_an_import_racing_forget_user_is_erased_whole_or_written_after_it(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), memory_summarize_after_seq=3)
    await user_with_everything(memory, database_url)
    document = await memory.transfers.export_user("ana")
    await memory.long_term.forget_user("ana")
    for _ in range(6):
        # The import either commits first and the forget erases it with the rest, or waits for the forget and
        # writes the whole document after it: never a part, never a row of it left beside a forget that followed.
        report, _ = await asyncio.gather(memory.transfers.import_user(document), memory.long_term.forget_user("ana"))
        assert report.counts["messages"] == len(document["messages"])
        left = await memory.transfers.export_user("ana")
        if left["conversations"]:
            assert without_ids(left) == without_ids(document)
        else:
            assert all(left[section] == [] for section, _ in SECTIONS)
        await memory.long_term.forget_user("ana")


async def test_the_export_route_gives_the_documents_bytes_to_the_users_tenant_only(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), memory_summarize_after_seq=3)
    await user_with_everything(memory, database_url)
    async with serve(memory) as served:
        mine, theirs = await served.key("default"), await served.key("globex")
        async with client(served) as http:
            assert (await http.get("/users/ana/export")).status_code == 401
        async with client(served, theirs) as http:
            response = await http.get("/users/ana/export")
            assert response.status_code == 404 and "Kyoto" not in response.text
        async with client(served, mine) as http:
            response = await http.get("/users/ana/export")
            assert response.status_code == 200 and response.headers["content-type"] == "application/json"
            assert response.content == dumps(await memory.transfers.export_user("ana"))
            assert json.loads(response.content)["user_id"] == "ana"
            assert (await http.get("/users/nobody/export")).status_code == 404
            assert (await http.get("/users/%00/export")).status_code == 422


async def test_a_role_bound_by_row_security_exports_and_imports_its_tenants_users(open_memory, database_url, app_role):
    owner = await open_memory(model=OfflineSummaryModel(), memory_summarize_after_seq=3)
    await user_with_everything(owner, database_url)
    document = await owner.transfers.export_user("ana")
    bound = await open_memory(model=OfflineSummaryModel(), database_url=app_role)
    assert dumps(await bound.transfers.export_user("ana")) == dumps(document)
    # The same user id in another tenant is another user: nothing there yet.
    assert (await bound.transfers.export_user("ana", tenant_id="acme"))["messages"] == []
    await bound.transfers.import_user(document, tenant_id="acme", conversation_prefix="acme:")
    moved = await bound.transfers.export_user("ana", tenant_id="acme")
    assert [m["content"] for m in moved["messages"]] == [m["content"] for m in document["messages"]]
    assert len(moved["items"]) == len(document["items"]) and len(moved["consolidation_notes"]) == 2
