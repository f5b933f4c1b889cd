"""A real `langgraph dev` process for tests: the repository's graphs/ (and a store probe), on 127.0.0.1 and a
free port, over the test's database and the local OpenAI-compatible server; stopped at the end."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
START_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(directory: Path, *, auth: bool) -> Path:
    """langgraph.json as the repository's (graphs/chat.py, the store slot of graphs/store.py) plus the store probe,
    and the test's auth handler when `auth`."""
    shipped = json.loads((ROOT / "langgraph.json").read_text())
    config = {
        "dependencies": ["."],
        "graphs": {
            "chat": str(ROOT / shipped["graphs"]["chat"]),
            "store_probe": f"{HERE / 'graphs.py'}:store_probe",
        },
        "store": {"path": str(ROOT / shipped["store"]["path"])},
    }
    if auth:
        config["auth"] = {"path": f"{HERE / 'auth.py'}:auth"}
    path = directory / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


@contextlib.contextmanager
def langgraph_dev(directory: Path, env: dict[str, str], *, auth: bool = False) -> Iterator[str]:
    """The server's URL while it runs; its output is in `directory/server.log`."""
    port = free_port()
    config = write_config(directory, auth=auth)
    command = [str(Path(sys.executable).parent / "langgraph"), "dev", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--no-browser", "--no-reload", "--config", str(config), "--n-jobs-per-worker", "4"]
    environment = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false", **env}
    log = (directory / "server.log").open("wb")
    process = subprocess.Popen(
        command, cwd=directory, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited: {(directory / 'server.log').read_text()[-4000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"langgraph dev did not start: {(directory / 'server.log').read_text()[-4000:]}")
            time.sleep(0.3)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # its own session: the server and the workers it started
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


def server_log(directory: Path) -> str:
    return (directory / "server.log").read_text(errors="replace")
