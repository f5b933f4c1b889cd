"""`memory-agent api-key create` (a key printed once, stored hashed) and `memory-agent serve` as an operator
runs them: the served app opens its own service from MEMORY_AGENT_* and answers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import httpx
import psycopg
from typer.testing import CliRunner

from memory_agent.api.keys import tenant_of_key
from memory_agent.cli.main import app
from tests.api.conftest import _free_port
from tests.conftest import execute, query


def create_key(database_url: str, tenant: str):
    return CliRunner().invoke(
        app, ["api-key", "create", "--tenant", tenant], env={"MEMORY_AGENT_DATABASE_URL": database_url}
    )


def test_api_key_create_prints_the_key_once_and_stores_its_hash(database_url):
    result = create_key(database_url, "acme")
    assert result.exit_code == 0, result.output
    key = result.output.strip()
    assert key.startswith("mak_") and len(key) > 40
    rows = query(database_url, "SELECT key_hash, key_prefix, tenant_id FROM api_keys")
    assert rows == [(hashlib.sha256(key.encode()).digest(), key[:10], "acme")]
    assert create_key(database_url, "acme").output.strip() != key  # a new key each time


def test_api_key_create_refuses_a_blank_tenant(database_url):
    result = create_key(database_url, "  ")
    assert result.exit_code == 2 and "tenant_id" in result.output
    assert query(database_url, "SELECT count(*) FROM api_keys") == [(0,)]


def test_serve_answers_on_127_0_0_1(database_url):
    key = create_key(database_url, "acme").output.strip()
    port = _free_port()
    env = {**os.environ, "MEMORY_AGENT_DATABASE_URL": database_url, "PYTHONPATH": os.getcwd()}
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, server.communicate()
            try:
                if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "serve did not answer in 30 s"
                time.sleep(0.1)
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{url}/users/ana/items", headers=headers, timeout=5).status_code == 404
        assert httpx.get(f"{url}/users/ana/items", timeout=5).status_code == 401
        ready = httpx.get(f"{url}/ready", timeout=5).json()
        assert ready["status"] == "ready" and ready["last_hour"]["failed"] == 0
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    # uvicorn shuts down gracefully, then re-raises the signal it caught: the exit status is SIGTERM's.
    assert server.returncode in (0, -signal.SIGTERM), err
    assert "Application shutdown complete" in err and "Traceback" not in err, err


def keys(database_url: str, *args: str):
    return CliRunner().invoke(app, ["api-key", *args], env={"MEMORY_AGENT_DATABASE_URL": database_url})


def test_api_key_list_and_revoke(database_url):
    first = create_key(database_url, "acme").output.strip()
    second = create_key(database_url, "globex").output.strip()
    listed = json.loads(keys(database_url, "list", "--json").output)
    assert [(k["key_prefix"], k["tenant_id"], k["revoked_at"]) for k in listed] == [
        (first[:10], "acme", None),
        (second[:10], "globex", None),
    ]
    assert first not in keys(database_url, "list").output  # the key itself is never shown again
    only = json.loads(keys(database_url, "list", "--tenant", "globex", "--json").output)
    assert [k["tenant_id"] for k in only] == ["globex"]
    revoked = keys(database_url, "revoke", first[:10])
    assert revoked.exit_code == 0 and f"revoked {first[:10]} of tenant acme" in revoked.output
    assert query(database_url, "SELECT tenant_id FROM api_keys WHERE revoked_at IS NOT NULL") == [("acme",)]
    again = keys(database_url, "revoke", first)
    assert again.exit_code == 2 and "no live key" in again.output
    assert keys(database_url, "revoke", "someone").exit_code == 2
    assert query(database_url, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL") == [(1,)]


def test_a_prefix_shared_by_two_live_keys_revokes_nothing(database_url):
    for _ in range(2):
        create_key(database_url, "acme")
    execute(database_url, "UPDATE api_keys SET key_prefix = 'mak_shared'")
    shared = keys(database_url, "revoke", "mak_shared")
    assert shared.exit_code == 2 and "2 live keys" in shared.output
    assert query(database_url, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL") == [(2,)]


def test_a_revoked_key_gets_401(database_url):
    key = create_key(database_url, "acme").output.strip()
    assert keys(database_url, "revoke", key).exit_code == 0

    async def tenant() -> str | None:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.execute("SET search_path TO memory_agent, public")
            return await tenant_of_key(conn, key)

    assert asyncio.run(tenant()) is None


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", *args], capture_output=True, text=True, timeout=120, env={**env, "COLUMNS": "200"}
    )


def test_api_key_create_says_nothing_about_openai(database_url):
    env = {**os.environ, "MEMORY_AGENT_DATABASE_URL": database_url, "PYTHONPATH": os.getcwd()}
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    run = run_cli("from memory_agent.cli.main import app; app(['api-key', 'create', '--tenant', 'acme'])", env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("mak_") and "OPENAI" not in run.stderr, run.stderr


def test_serve_without_the_api_extra_says_how_to_install_it():
    # fastapi and uvicorn made unimportable, as in an installation without the extra.
    hide = "import sys; sys.modules['fastapi'] = sys.modules['uvicorn'] = None; "
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    for command in ("['serve']", "['api-key', 'list']"):
        run = run_cli(hide + f"from memory_agent.cli.main import app; app({command})", env=env)
        assert run.returncode == 2
        assert re.search(r"pip install (-e )?'[^']+\[api\]'", run.stderr) and "Traceback" not in run.stderr, run.stderr


def test_flags_show_no_type_in_help():
    for command in (["--help"], ["migrate", "--help"], ["api-key", "list", "--help"], ["stats", "--help"]):
        shown = CliRunner().invoke(app, command, env={"COLUMNS": "200"}).output
        assert "--help" in shown and "<bool>" not in shown, shown
    assert "<str>" in CliRunner().invoke(app, ["api-key", "list", "--help"], env={"COLUMNS": "200"}).output


def test_serve_with_a_setting_that_cannot_work_says_so_in_one_line(database_url):
    # Found inside uvicorn's startup, each was a traceback of 40 lines and exit 3; the service is opened first.
    port = _free_port()
    base = {**os.environ, "MEMORY_AGENT_DATABASE_URL": database_url, "PYTHONPATH": os.getcwd()}
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        base.pop(key, None)
    cases = {
        "MEMORY_AGENT_MEMORY_MODEL": {"MEMORY_AGENT_MEMORY_MODEL": "anthropic:claude"},
        "MEMORY_AGENT_EMBEDDINGS": {"MEMORY_AGENT_MEMORY_MODEL": "offline", "MEMORY_AGENT_EMBEDDINGS": "openai"},
        "MEMORY_AGENT_DATABASE_URL": {
            "MEMORY_AGENT_MEMORY_MODEL": "offline",
            "MEMORY_AGENT_DATABASE_URL": f"postgresql://nobody@127.0.0.1:{_free_port()}/none",
        },
    }
    for setting, env in cases.items():
        run = subprocess.run(
            [sys.executable, "-m", "memory_agent", "serve", "--port", str(port)],
            env={**base, **env, "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 2, (setting, run.returncode, run.stderr)
        assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) <= 2, run.stderr
        assert run.stderr.startswith("error: ") and setting in run.stderr, run.stderr


def test_a_usage_error_is_one_line_naming_the_commands_help():
    # Was click's usage block in a box: five lines or more.
    cases = {
        ("at", "demo", "abc"): ("'round_number'", "memory-agent at --help"),
        ("summaries", "demo"): ("unexpected extra argument", "memory-agent summaries --help"),
        ("serve", "--port", "0"): ("'--port'", "memory-agent serve --help"),
        ("db", "nosuch"): ("No such command 'nosuch'", "memory-agent db --help"),
        ("--bogus",): ("No such option: --bogus", "memory-agent --help"),
    }
    for args, (named, hint) in cases.items():
        result = CliRunner().invoke(app, list(args), prog_name="memory-agent", env={"COLUMNS": "80"})
        assert result.exit_code == 2, (args, result.output)
        assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
        assert result.stderr.startswith("error: ") and named in result.stderr and hint in result.stderr, result.stderr
    group_alone = CliRunner().invoke(app, ["db"], prog_name="memory-agent")
    assert group_alone.exit_code == 2 and "Usage: memory-agent db" in group_alone.output  # its help, as before
