"""The LangGraph server's store slot, left at shutdown, closes the service and leaves the embedded PostgreSQL: a
server it started stops (`langgraph dev`'s worker ends without exit hooks, which left it running); one that
keeps running is named with how to stop it."""

from __future__ import annotations

import os
import subprocess
import sys

from memory_agent.db.embedded import remove_data_dir, scratch_data_dir, stop_embedded_postgres

# The store slot entered and left as the server does, then the end of a multiprocessing child: no exit hooks.
SERVER = """
import asyncio, logging, os
logging.basicConfig(level=logging.INFO, format="%(message)s")
from memory_agent.langgraph_server import store

async def main():
    async with store() as slot:
        await slot.aput(("memories", "maya"), "k", {"content": "hello"})

asyncio.run(main())
os._exit(0)
"""


def run_server(data_dir) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMORY_AGENT_DATABASE_URL", "LANGGRAPH_STORE")}
    env.update(MEMORY_AGENT_DATA_DIR=str(data_dir), PYTHONPATH=os.getcwd())
    return subprocess.run([sys.executable, "-c", SERVER], capture_output=True, text=True, timeout=180, env=env)


def test_the_embedded_server_a_langgraph_server_started_stops_with_it(request):
    data_dir = scratch_data_dir("ma_lg_")
    request.addfinalizer(lambda: (stop_embedded_postgres(data_dir), remove_data_dir(data_dir)))
    run = run_server(data_dir)
    assert run.returncode == 0, run.stderr
    assert f"stopped the embedded PostgreSQL of {data_dir}" in run.stderr
    assert not (data_dir / "postmaster.pid").exists()


def test_a_server_kept_running_is_named_with_how_to_stop_it(request):
    data_dir = scratch_data_dir("ma_lg_")
    request.addfinalizer(lambda: (stop_embedded_postgres(data_dir), remove_data_dir(data_dir)))
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_AGENT_DATABASE_URL"}
    env.update(MEMORY_AGENT_DATA_DIR=str(data_dir), PYTHONPATH=os.getcwd())
    started = subprocess.run(
        [sys.executable, "-m", "memory_agent", "db", "url"], capture_output=True, text=True, timeout=180, env=env
    )
    assert started.returncode == 0, started.stderr  # started for psql: kept running
    run = run_server(data_dir)
    assert run.returncode == 0, run.stderr
    assert f"the embedded PostgreSQL of {data_dir} keeps running" in run.stderr
    assert f"MEMORY_AGENT_DATA_DIR={data_dir} memory-agent db stop" in run.stderr
    assert (data_dir / "postmaster.pid").exists()
