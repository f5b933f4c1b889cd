"""Setup paths: migrations (twice, from two processes at once), own schema, embedded default, external URL,
sync use from a plain script, and sql/ + prompts/ inside an installed wheel."""

from __future__ import annotations

import logging
import subprocess
import sys
import zipfile
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from memory_agent import ConfigurationError, MemoryService, MemorySettings, with_memory
from memory_agent.db.embedded import remove_data_dir, scratch_data_dir, stop_embedded_postgres
from memory_agent.db.migrations import load_migrations
from memory_agent.db.schema import SchemaManager
from tests.support import EchoChat, GatedSummaryModel

ROOT = Path(__file__).resolve().parents[2]


def applied(url: str, schema: str = "memory_agent") -> list[int]:
    with psycopg.connect(url) as conn:
        return [v for (v,) in conn.execute(f'SELECT version FROM "{schema}".schema_migrations ORDER BY 1')]


def test_migrations_apply_once_and_again_is_a_no_op(empty_database_url):
    all_versions = [m.version for m in load_migrations()]
    with MemoryService.from_settings(MemorySettings(database_url=empty_database_url)) as memory:
        assert memory.call_sync(SchemaManager(memory.backend).migrate()).versions == []  # already applied by open()
    with MemoryService.from_settings(MemorySettings(database_url=empty_database_url)):
        pass
    assert applied(empty_database_url) == all_versions


def test_two_processes_set_up_at_once(empty_database_url):
    script = (
        "import sys; from memory_agent import MemoryService, MemorySettings\n"
        "with MemoryService.from_settings(MemorySettings(database_url=sys.argv[1])): pass\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, empty_database_url], stderr=subprocess.PIPE) for _ in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()[-2000:]
    assert applied(empty_database_url) == [m.version for m in load_migrations()]


def test_tables_live_in_their_own_schema(empty_database_url):
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.messages (id int, body text)")  # the app's own table
        conn.execute("INSERT INTO public.messages VALUES (1, 'app data')")
    settings = MemorySettings(database_url=empty_database_url, db_schema="chat_memory")
    with MemoryService.from_settings(settings) as memory:
        app = with_memory(EchoChat().graph, memory)
        app.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "s"}})
    with psycopg.connect(empty_database_url) as conn:
        assert conn.execute("SELECT * FROM public.messages").fetchall() == [(1, "app data")]
        assert conn.execute("SELECT count(*) FROM chat_memory.messages").fetchone() == (2,)
        assert conn.execute("SELECT to_regclass('memory_agent.messages')").fetchone() == (None,)


def test_bad_schema_name_is_refused():
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_DB_SCHEMA"):
        MemorySettings(db_schema='x"; DROP SCHEMA public; --')


def test_unreachable_database_names_the_setting():
    settings = MemorySettings(database_url="postgresql://nobody@127.0.0.1:1/none", connect_timeout_s=1)
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_DATABASE_URL"):
        MemoryService.from_settings(settings).open()


def test_sync_invoke_from_a_plain_script(database_url):
    """No event loop anywhere: `with` + `invoke`, the way a script uses it."""
    model = GatedSummaryModel()
    chat = EchoChat()
    with MemoryService.from_settings(MemorySettings(database_url=database_url), model=model) as memory:
        app = with_memory(chat.graph, memory)
        for n in range(1, 5):
            result = app.invoke({"messages": [HumanMessage(f"m{n}")]}, {"configurable": {"thread_id": "sync"}})
            assert result["messages"][-1].text == f"reply {n}"
            if n == 3:
                model.release(2)  # memory 1 now, memory 2 when round 4 ends
                assert memory.call_sync(memory.drain(timeout=10))
        assert memory.call_sync(memory.drain(timeout=10))
        records = memory.call_sync(memory.conversations.get_memory_history("sync"))
    assert next((r.memory_id, r.status, r.start_sequence, r.end_sequence) for r in records) == (1, "completed", 0, 5)
    assert chat.seen[-1][0].text.startswith("[Previous context:")


def test_embedded_database_is_the_default_and_keeps_its_data(monkeypatch, request):
    monkeypatch.delenv("MEMORY_AGENT_DATABASE_URL", raising=False)
    data_dir = scratch_data_dir("memory_agent_embedded_")
    request.addfinalizer(lambda: (stop_embedded_postgres(data_dir), remove_data_dir(data_dir)))
    settings = MemorySettings(data_dir=data_dir)
    assert settings.database.database_url is None
    with MemoryService.from_settings(settings) as memory:
        assert str(data_dir) in memory.database_url  # a unix socket inside the data dir
        app = with_memory(EchoChat().graph, memory)
        app.invoke({"messages": [HumanMessage("remember me")]}, {"configurable": {"thread_id": "kept"}})
    with MemoryService.from_settings(settings) as memory:  # a second run reuses the data dir
        context = memory.call_sync(memory.conversations.get_context_for_workflow("kept"))
        assert [m.text for m in context.gap_messages] == ["remember me", "reply 1"]
    assert (data_dir / "PG_VERSION").exists()


@pytest.mark.slow
def test_wheel_carries_sql_and_prompts(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("memory_agent-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for expected in (
        "memory_agent/sql/migrations/0001_init.sql",
        "memory_agent/sql/queries/conversation.sql",
        "memory_agent/sql/definitions/rules.sql",
        "memory_agent/prompts/summarize_system.txt",
        "memory_agent/prompts/summarize_user.txt",
    ):
        assert expected in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); from memory_agent import resources; "
            "print(resources.sql_dir()); print(len(list(resources.migrations_dir().glob('0*.sql')))); print(len(resources.queries()));"
            "print(resources.prompt('summarize_system')[:20])",
            str(site),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    sql_dir, n_migrations, n_queries, prompt = probe.stdout.splitlines()
    assert Path(sql_dir).is_relative_to(site)
    assert int(n_migrations) == len(load_migrations()) and int(n_queries) > 10 and prompt.startswith("You maintain")


async def test_design_log_lines(open_memory, caplog):
    caplog.set_level(logging.DEBUG, logger="memory_agent")
    model = GatedSummaryModel()
    memory = await open_memory(model=model, memory_rolling_window_size=4, memory_summarize_after_seq=3)
    app = with_memory(EchoChat().graph, memory)
    config = {"configurable": {"thread_id": "logs"}}
    for n in range(2):
        await app.ainvoke({"messages": [HumanMessage(f"m{n}")]}, config)
    await app.ainvoke({"messages": [HumanMessage("m2")]}, config)  # seq 5 while memory 1 (0-3) processes
    model.release()
    assert await memory.drain(timeout=10)
    await app.ainvoke({"messages": [HumanMessage("m3")]}, config)  # seq 7: memory 2 (4-7), drops 0-3
    model.release()
    assert await memory.drain(timeout=10)
    text = caplog.text
    assert "Summarization already in progress for logs" in text
    assert "Summarized messages 0-3 for logs in " in text
    assert "Sliding window: dropping seq 0-3 for logs" in text
    assert "Memory 1 status updated to completed" in text
    await memory.conversations.trigger_summarization_if_needed("logs", 7)
    assert "No new messages to summarize for logs" in caplog.text
