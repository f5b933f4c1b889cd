"""`memory-agent worker` as an operator meets it: it says it runs, and a stop is quiet and clean."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def test_worker_announces_itself_and_stops_cleanly(database_url):
    env = {**os.environ, "MEMORY_AGENT_DATABASE_URL": database_url, "PYTHONPATH": os.getcwd()}
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    worker = subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "worker", "--concurrency", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        assert worker.stderr is not None
        line = ""
        while "worker running" not in line and time.monotonic() < deadline:
            line = worker.stderr.readline()
        assert "memory_agent worker running: concurrency 1" in line
        time.sleep(1)  # let it settle into waiting for jobs
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, rest
    assert "Traceback" not in rest and "AppNotOpen" not in rest, rest
    assert "memory_agent worker stopped" in rest
