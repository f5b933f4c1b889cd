"""`memory-agent import` (a thread's JSON lines), `export --user` and `import-user` on the real database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from memory_agent.cli.main import app
from tests.conftest import query

LINES = [
    {"role": "user", "content": "We plan a trip to Kyoto.", "created_at": "2023-09-14T20:30:00+02:00"},
    {"role": "assistant", "content": "Kyoto, noted.", "created_at": "2023-09-14T20:31:00+02:00", "id": "a-1"},
]


def invoke(database_url: str, *args: str, stdin: str | None = None) -> Any:
    env = {"MEMORY_AGENT_DATABASE_URL": database_url, "COLUMNS": "250", "NO_COLOR": "1", "OPENAI_API_KEY": ""}
    return CliRunner().invoke(app, list(args), env=env, input=stdin)


def test_import_export_and_import_user(database_url, other_database_url, tmp_path: Path):
    thread = tmp_path / "thread.jsonl"
    thread.write_text("\n".join(json.dumps(line) for line in LINES) + "\n\n", encoding="utf-8")
    done = invoke(database_url, "import", str(thread), "--thread", "kyoto", "--user", "ana", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert (report["messages"], report["rounds"], report["first_at"]) == (2, 1, "2023-09-14T20:30:00+02:00")
    stored = query(database_url, "SELECT created_at FROM memory_agent.messages ORDER BY sequence_number")
    assert [str(row[0]) for row in stored] == ["2023-09-14 18:30:00+00:00", "2023-09-14 18:31:00+00:00"]

    # A bad line: named, exit 1, nothing written.
    bad = invoke(
        database_url, "import", "-", "--thread", "other", "--user", "ana", stdin=json.dumps(LINES[0]) + "\n{\n"
    )
    assert bad.exit_code == 2 and "stdin, line 2: not JSON" in bad.output
    assert query(database_url, "SELECT count(*) FROM memory_agent.conversations")[0][0] == 1

    exported = invoke(database_url, "export", "--user", "ana")
    assert exported.exit_code == 0, exported.output
    again = invoke(database_url, "export", "--user", "ana", "--output", str(tmp_path / "ana.json"))
    assert again.exit_code == 0 and (tmp_path / "ana.json").read_bytes() == exported.stdout_bytes
    document = json.loads(exported.stdout)
    assert [m["created_at"] for m in document["messages"]] == ["2023-09-14T18:30:00Z", "2023-09-14T18:31:00Z"]

    moved = invoke(other_database_url, "import-user", str(tmp_path / "ana.json"), "--tenant", "acme", "--json")
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.stdout)["counts"]["messages"] == 2
    twice = invoke(other_database_url, "import-user", str(tmp_path / "ana.json"), "--tenant", "acme")
    assert twice.exit_code == 2 and "holds memory already" in twice.output
    rows = query(other_database_url, "SELECT tenant_id, user_id, content FROM memory_agent.messages ORDER BY 3")
    assert rows == [("acme", "ana", "Kyoto, noted."), ("acme", "ana", "We plan a trip to Kyoto.")]


def test_a_line_holding_unicode_line_separators_is_one_line(database_url, tmp_path: Path):
    # JSON strings may hold U+2028, U+2029 and U+0085 raw (json.dumps(ensure_ascii=False) writes them so): they
    # are not line ends of a JSON lines file.
    said = {**LINES[0], "content": "Kyoto\u2028in April\u2029or May\x85maybe"}
    thread = tmp_path / "thread.jsonl"
    thread.write_text(json.dumps(said, ensure_ascii=False) + "\r\n" + json.dumps(LINES[1]) + "\n", encoding="utf-8")
    done = invoke(database_url, "import", str(thread), "--thread", "kyoto", "--user", "ana", "--json")
    assert done.exit_code == 0, done.output
    stored = query(database_url, "SELECT content FROM memory_agent.messages ORDER BY sequence_number")
    assert [row[0] for row in stored] == [said["content"], LINES[1]["content"]]


def test_an_import_without_its_user_is_refused(database_url, tmp_path: Path):
    # Without --user the thread was stored under a scope of its own ("conversation:kyoto"), which no app passing
    # the user's id recalls; importing it again under the user was then refused (another user's thread id).
    thread = tmp_path / "thread.jsonl"
    thread.write_text("\n".join(json.dumps(line) for line in LINES) + "\n", encoding="utf-8")
    missing = invoke(database_url, "import", str(thread), "--thread", "kyoto")
    assert missing.exit_code == 2
    assert "Missing option '--user'" in missing.output and "Traceback" not in missing.output
    assert query(database_url, "SELECT count(*) FROM memory_agent.conversation_owners")[0][0] == 0


def test_a_thread_check_names_the_files_line(database_url, tmp_path: Path):
    # Checks over the thread (times in order, one message an id) named "message 1", its place among the messages:
    # the file's line 3 here, after a blank one.
    early = {**LINES[1], "created_at": "2023-09-14T20:00:00+02:00"}
    thread = tmp_path / "thread.jsonl"
    thread.write_text(json.dumps(LINES[0]) + "\n\n" + json.dumps(early) + "\n", encoding="utf-8")
    done = invoke(database_url, "import", str(thread), "--thread", "kyoto", "--user", "ana")
    assert done.exit_code == 2
    assert f"{thread}, line 3: field 'created_at' (2023-09-14T20:00:00+02:00) is before the message above it" in (
        done.output
    )
    assert query(database_url, "SELECT count(*) FROM memory_agent.messages")[0][0] == 0


def test_a_taken_thread_id_names_the_option_that_imports_beside_it(database_url, tmp_path: Path):
    # A user exported and imported into another tenant of the same database: the thread ids are taken. The error
    # said "import with a conversation prefix", which names no option the command has.
    thread = tmp_path / "thread.jsonl"
    thread.write_text("\n".join(json.dumps(line) for line in LINES) + "\n", encoding="utf-8")
    assert invoke(database_url, "import", str(thread), "--thread", "kyoto", "--user", "ana").exit_code == 0
    assert invoke(database_url, "export", "--user", "ana", "--output", str(tmp_path / "ana.json")).exit_code == 0
    taken = invoke(database_url, "import-user", str(tmp_path / "ana.json"), "--tenant", "acme")
    assert taken.exit_code == 2 and "Traceback" not in taken.output
    assert "thread id 'kyoto' belongs to another user" in taken.output and "--conversation-prefix" in taken.output
    assert query(database_url, "SELECT count(*) FROM memory_agent.messages WHERE tenant_id = 'acme'") == [(0,)]
    beside = invoke(
        database_url, "import-user", str(tmp_path / "ana.json"), "--tenant", "acme", "--conversation-prefix", "acme:"
    )
    assert beside.exit_code == 0, beside.output
    assert query(database_url, "SELECT conversation_id FROM memory_agent.conversations WHERE tenant_id = 'acme'") == [
        ("acme:kyoto",)
    ]


def test_a_line_that_is_not_utf8_is_named_and_nothing_is_written(database_url, tmp_path: Path):
    # Read whole as UTF-8, such a file was refused by its byte offset, and from standard input with a traceback.
    latin1 = json.dumps({**LINES[1], "content": "Caf\u00e9, noted."}, ensure_ascii=False).encode("latin-1")
    data = json.dumps(LINES[0]).encode() + b"\n\n" + latin1 + b"\n"
    thread = tmp_path / "thread.jsonl"
    thread.write_bytes(data)
    for source, stdin in ((str(thread), None), ("-", data)):
        done = invoke(database_url, "import", source, "--thread", "kyoto", "--user", "ana", stdin=stdin)
        name = "stdin" if stdin else str(thread)
        assert done.exit_code == 2, done.output
        assert f"{name}, line 3: not UTF-8 (byte 0xe9" in done.output and "Traceback" not in done.output
    assert query(database_url, "SELECT count(*) FROM memory_agent.messages")[0][0] == 0
    # import-user reads standard input the same way.
    done = invoke(database_url, "import-user", "-", stdin=b'{"user_id": "\xe9"}')
    assert done.exit_code == 2 and "stdin: not UTF-8 (byte 0xe9" in done.output, done.output


def test_an_empty_user_message_is_named_by_its_line(database_url, tmp_path: Path):
    # It was named "message 2", its place among the messages: line 4 here, after a blank line.
    thread = tmp_path / "thread.jsonl"
    empty = {**LINES[0], "content": "  ", "created_at": "2023-09-14T20:32:00+02:00"}
    thread.write_text("\n".join(json.dumps(line) for line in [*LINES, {}][:2]) + "\n\n" + json.dumps(empty) + "\n")
    done = invoke(database_url, "import", str(thread), "--thread", "kyoto", "--user", "ana")
    assert done.exit_code == 2 and f"{thread}, line 4 (HumanMessage) is empty" in done.output, done.output
    assert query(database_url, "SELECT count(*) FROM memory_agent.messages")[0][0] == 0
