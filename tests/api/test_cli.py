"""`memory-agent api-key create` (a key printed once, stored hashed) and `memory-agent serve` as an operator
runs them: the served app opens its own service from MEMORY_AGENT_* and answers on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

import httpx
from typer.testing import CliRunner

from memory_agent.cli.main import app
from tests.api.conftest import _free_port
from tests.conftest import query


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
    assert result.exit_code == 1 and "tenant_id" in result.output
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
        assert httpx.get(f"{url}/users/ana/items", headers=headers, timeout=5).json() == []
        assert httpx.get(f"{url}/users/ana/items", timeout=5).status_code == 401
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    # uvicorn shuts down gracefully, then re-raises the signal it caught: the exit status is SIGTERM's.
    assert server.returncode in (0, -signal.SIGTERM), err
    assert "Application shutdown complete" in err and "Traceback" not in err, err
