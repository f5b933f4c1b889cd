"""Settings and errors that must be clear: bad values name their environment variable, a database that
cannot be reached names the cause, a schema that is not ours is refused, and closing never strands a call."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from memory_agent import (
    ConfigurationError,
    MemoryService,
    MemorySettings,
    ServiceClosedError,
    with_memory,
)
from memory_agent.observability import reads as obs
from tests.conftest import query, with_dbname
from tests.support import EchoChat, GatedSummaryModel


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


# ---------------------------------------------------------------- 13. a schema name with capitals


async def test_mixed_case_schema_with_the_inline_executor(open_memory, database_url):
    memory = await open_memory(db_schema="MixedCase")
    app = with_memory(EchoChat().graph, memory)
    for n in range(3):
        await app.ainvoke({"messages": [HumanMessage(f"m{n}")]}, config("mc"))
    assert await memory.drain(timeout=10)
    assert query(database_url, 'SELECT status FROM "MixedCase".memory') == [("completed",)]


async def test_mixed_case_schema_with_the_procrastinate_executor(open_memory, database_url):
    memory = await open_memory(db_schema="MixedCase", executor="procrastinate")
    app = with_memory(EchoChat().graph, memory)
    for n in range(3):
        await app.ainvoke({"messages": [HumanMessage(f"m{n}")]}, config("mcp"))
    # The job was deferred into the quoted schema; a worker (here in-process, until the queue is empty) runs it.
    await memory.loop.arun(memory.executor.run_worker(1, wait=False))
    assert query(database_url, 'SELECT status FROM "MixedCase".memory') == [("completed",)]
    jobs = query(database_url, 'SELECT task_name, status FROM "MixedCase".procrastinate_jobs')
    assert ("memory_agent.summarize", "succeeded") in jobs and {status for _, status in jobs} == {"succeeded"}


# ---------------------------------------------------------------- 14. a schema that is not ours


async def test_public_schema_beside_an_apps_own_messages_table_is_refused(database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.messages (id int PRIMARY KEY, body text)")
    settings = MemorySettings(database_url=database_url, db_schema="public")
    with pytest.raises(ConfigurationError, match=r"public\.messages.*MEMORY_AGENT_DB_SCHEMA"):
        await MemoryService.from_settings(settings).aopen()
    with psycopg.connect(database_url, autocommit=True) as conn:  # nothing was created there
        assert conn.execute("SELECT to_regclass('public.memory')").fetchone() == (None,)


@pytest.mark.parametrize("schema", ["pg_catalog", "pg_toast", "information_schema", "PG_CATALOG"])
def test_system_schemas_are_refused(schema):
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_DB_SCHEMA.*system schema"):
        MemorySettings(db_schema=schema)


# ---------------------------------------------------------------- 15-17. values, ranges, combinations


def test_durations_beyond_a_year_are_refused():
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_PROCESSING_TIMEOUT_S.*3000000000"):
        MemorySettings(processing_timeout_s=3e9)


def test_window_smaller_than_the_threshold_is_refused():
    with pytest.raises(
        ConfigurationError, match="MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE.*MEMORY_AGENT_MEMORY_SUMMARIZE_AFTER_SEQ"
    ):
        MemorySettings(memory_rolling_window_size=4)
    MemorySettings(memory_rolling_window_size=6)  # seq 0-5: the first summary covers round 1


async def test_odd_window_is_announced(open_memory, caplog):
    with caplog.at_level(logging.WARNING, logger="memory_agent"):
        await open_memory(memory_rolling_window_size=15)
    assert any("ROLLING_WINDOW_SIZE=15 is odd" in r.getMessage() for r in caplog.records)


def test_enum_settings_are_case_insensitive_and_errors_name_the_variable(monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_INJECTION_MODE", "System")
    assert MemorySettings().rounds.injection_mode == "system"
    monkeypatch.setenv("MEMORY_AGENT_INJECTION_MODE", "sideways")
    with pytest.raises(ConfigurationError) as raised:
        MemorySettings()
    message = str(raised.value)
    assert "MEMORY_AGENT_INJECTION_MODE" in message and "'prefix' or 'system'" in message and "sideways" in message
    assert len(message.splitlines()) <= 3  # one line per bad setting, not a traceback's worth


# ---------------------------------------------------------------- 18. a database that cannot be reached


def open_fails(url: str, timeout: float = 2.0) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as raised:
        MemoryService.from_settings(MemorySettings(database_url=url, connect_timeout_s=timeout)).open()
    return str(raised.value), time.monotonic() - started


def test_refused_connection_names_the_cause():
    message, _ = open_fails("postgresql://nobody@127.0.0.1:1/none")
    assert "Connection refused" in message and "MEMORY_AGENT_DATABASE_URL" in message


def test_missing_database_names_the_cause(server_url):
    message, _ = open_fails(with_dbname(server_url, "no_such_database"))
    assert 'database "no_such_database" does not exist' in message


def test_malformed_url_fails_at_once():
    message, elapsed = open_fails("postgresql://[::1", timeout=5)
    assert "not a valid PostgreSQL URL" in message and elapsed < 1
    # Another database's URL: libpq's cause alone ('missing "=" after ...') said nothing of what to give.
    message, _ = open_fails("mysql://app@db/app", timeout=5)
    assert "postgresql://user:password@host:5432/dbname, or unset it" in message, message


def test_a_server_that_never_answers_takes_the_timeout_once():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel does), never says a word
    try:
        port = silent.getsockname()[1]
        message, elapsed = open_fails(f"postgresql://u@127.0.0.1:{port}/db", timeout=1.0)
    finally:
        silent.close()
    assert "did not answer within 1.0s" in message and "MEMORY_AGENT_CONNECT_TIMEOUT_S" in message
    assert elapsed < 1.9  # the timeout once, not twice


# ---------------------------------------------------------------- 9. close() while other threads run rounds


def test_close_while_threads_run_sync_rounds_strands_nobody(database_url):
    model = GatedSummaryModel()
    memory = MemoryService.from_settings(MemorySettings(database_url=database_url, drain_timeout_s=0.2), model=model)
    memory.open()
    app = with_memory(EchoChat().graph, memory)
    outcomes: list[str] = []
    closed = threading.Event()

    def chat(n: int) -> None:
        # Each thread chats until a round fails; a round may still finish while close() drains, so a thread
        # stops only on an error, or records a round that started after close() returned and still ran.
        while True:
            started_after_close = closed.is_set()
            try:
                app.invoke({"messages": [HumanMessage("hi")]}, config(f"thread-{n}"))
            except (ServiceClosedError, RuntimeError) as exc:
                outcomes.append(type(exc).__name__)
                return
            except Exception as exc:  # a round cut off by the pool closing under it
                outcomes.append(f"other: {type(exc).__name__}")
                return
            if started_after_close:
                outcomes.append("a round ran after close()")
                return

    threads = [threading.Thread(target=chat, args=(n,), daemon=True) for n in range(6)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    memory.close()
    closed.set()
    for thread in threads:
        thread.join(timeout=15)
    assert not any(thread.is_alive() for thread in threads), "a thread is blocked forever after close()"
    assert len(outcomes) == 6 and "a round ran after close()" not in outcomes, outcomes


# ---------------------------------------------------------------- 20. deleting a conversation deletes its metrics


async def test_delete_conversation_removes_everything_derived(open_memory, database_url):
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    for n in range(4):
        await app.ainvoke({"messages": [HumanMessage(f"old {n}")]}, config("reused"))
    assert await memory.drain(timeout=10)
    assert await memory.delete_conversation("reused")
    assert query(database_url, "SELECT count(*) FROM round_metrics WHERE conversation_id = 'reused'") == [(0,)]
    await app.ainvoke({"messages": [HumanMessage("new life")]}, config("reused"))
    assert query(database_url, "SELECT round_number FROM round_context WHERE conversation_id = 'reused'") == [(1,)]
    visibility = await memory.loop.arun(obs.message_visibility(memory.backend, "reused", 0))
    assert [row["round_number"] for row in visibility] == [1]
    assert query(database_url, "SELECT content FROM messages WHERE conversation_id = 'reused'") == [
        ("new life",),
        ("reply 5",),
    ]
