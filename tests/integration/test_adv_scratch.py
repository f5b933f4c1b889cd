import json
from pathlib import Path
from tests.integration.test_transfer_cli import invoke, LINES
from tests.conftest import query


def show(tag, r):
    print(f"=== {tag}: exit {r.exit_code}\n{r.output[-1500:]}")
    if r.exception and not isinstance(r.exception, SystemExit):
        import traceback; traceback.print_exception(r.exception)


def test_cli_cases(database_url, tmp_path: Path):
    f = tmp_path / "t.jsonl"
    # non-UTF-8 in the middle
    f.write_bytes((json.dumps(LINES[0]) + "\n").encode() + b'{"role": "assistant", "content": "caf\xe9", "created_at": "2023-09-14T20:31:00+02:00"}\n')
    show("latin1 file", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    show("latin1 stdin", invoke(database_url, "import", "-", "--thread", "t1", "--user", "ana", stdin=f.read_bytes()))
    # no zone
    f.write_text(json.dumps({**LINES[0], "created_at": "2023-09-14T20:30:00"}) + "\n")
    show("nozone", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # date only
    f.write_text(json.dumps({**LINES[0], "created_at": "2023-09-14"}) + "\n")
    show("dateonly", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # future
    f.write_text(json.dumps({**LINES[0], "created_at": "2099-09-14T20:30:00Z"}) + "\n")
    show("future", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # empty content
    f.write_text(json.dumps({**LINES[0], "content": ""}) + "\n")
    show("empty", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    f.write_text(json.dumps({**LINES[0], "content": "   "}) + "\n" + json.dumps({**LINES[1], "content": ""}) + "\n")
    show("blank user", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # only assistant
    f.write_text(json.dumps(LINES[1]) + "\n")
    show("only assistant", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # tool without call
    f.write_text(json.dumps(LINES[0]) + "\n" + json.dumps({"role": "tool", "content": "x", "tool_call_id": "c", "created_at": "2023-09-14T20:31:00+02:00"}) + "\n")
    show("tool", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # top-level array
    f.write_text(json.dumps(LINES) + "\n")
    show("array", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # NUL char
    f.write_text(json.dumps({**LINES[0], "content": "a\u0000b"}) + "\n")
    show("nul", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # lone surrogate
    f.write_text('{"role": "user", "content": "a\\ud800b", "created_at": "2023-09-14T20:30:00Z"}\n')
    show("surrogate", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # nan / numbers
    f.write_text('{"role": "user", "content": "x", "created_at": 1694716200}\n')
    show("epoch", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # empty file
    f.write_text("\n\n")
    show("emptyfile", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # empty thread id
    f.write_text(json.dumps(LINES[0]) + "\n")
    show("emptythread", invoke(database_url, "import", str(f), "--thread", "", "--user", "ana"))
    show("emptyuser", invoke(database_url, "import", str(f), "--thread", "x", "--user", ""))
    show("missing file", invoke(database_url, "import", str(tmp_path / "nope"), "--thread", "x", "--user", "a"))
    show("dir", invoke(database_url, "import", str(tmp_path), "--thread", "x", "--user", "a"))
    # year 0001, year 9999
    f.write_text(json.dumps({**LINES[0], "created_at": "0001-01-01T00:30:00+01:00"}) + "\n")
    show("year1", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    # a good import, then import twice
    f.write_text("\n".join(json.dumps(l) for l in LINES) + "\n")
    show("ok", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    show("twice", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana"))
    show("other user", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "bob"))
    show("other tenant", invoke(database_url, "import", str(f), "--thread", "t1", "--user", "ana", "--tenant", "acme"))
    print(query(database_url, "SELECT tenant_id, user_id, conversation_id, count(*) FROM memory_agent.messages GROUP BY 1,2,3"))
