"""The embedded server's lifetime: one server for processes starting at once on a fresh data directory, stopped
by the last process out (dead ones pruned), never by a process that joined a server kept by `db url`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memory_agent.db.embedded import remove_data_dir, scratch_data_dir, stop_embedded_postgres
from memory_agent.db.embedded.install import as_root, server_bin_dir, server_os_user
from memory_agent.db.embedded.server import init_cluster, running_server, secret_path, start_server

pytestmark = pytest.mark.slow


class User:
    """A process of tests/integration/embedded_user.py."""

    def __init__(self, data_dir: Path, mode: str = "stop", go: Path | None = None) -> None:
        args = [sys.executable, "-m", "tests.integration.embedded_user", str(data_dir), mode]
        self.process = subprocess.Popen(
            [*args, *([str(go)] if go else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )

    def report(self) -> dict[str, object]:
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            self.process.wait(timeout=30)
            pytest.fail(f"exit {self.process.returncode}: {self.process.stderr.read()}")  # type: ignore[union-attr]
        return json.loads(line)

    def exit(self) -> None:
        self.process.stdin.close()  # type: ignore[union-attr]
        assert self.process.wait(timeout=60) == 0, self.process.stderr.read()  # type: ignore[union-attr]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Path]:
    """One initialised data directory (never started), copied for each test: initdb once."""
    path = scratch_data_dir("memory_agent_lifetime_")
    init_cluster(server_bin_dir(), path, server_os_user() if as_root() else None)
    yield path
    remove_data_dir(path)


def new_data_dir() -> Iterator[Path]:
    path = scratch_data_dir("memory_agent_lifetime_")
    yield path
    stop_embedded_postgres(path)
    remove_data_dir(path)


@pytest.fixture
def fresh_data_dir() -> Iterator[Path]:
    yield from new_data_dir()


@pytest.fixture
def data_dir(cluster: Path) -> Iterator[Path]:
    for path in new_data_dir():
        subprocess.run(["cp", "-a", str(cluster), str(path)], check=True)  # owner and modes kept
        shutil.copy2(secret_path(cluster), secret_path(path))
        yield path


def test_four_processes_starting_a_fresh_data_dir_share_one_server(fresh_data_dir, tmp_path):
    data_dir = fresh_data_dir
    go = tmp_path / "go"
    users = [User(data_dir, go=go) for _ in range(4)]
    time.sleep(1.0)  # let them import: they all wait for the same moment
    go.touch()
    reports = [user.report() for user in users]
    assert len({r["postmaster"] for r in reports}) == 1
    assert len({r["started"] for r in reports}) == 1
    for user in users[:3]:
        user.exit()
        assert running_server(data_dir) is not None  # still in use
    users[3].exit()
    assert running_server(data_dir) is None  # the last one out stopped it
    assert (data_dir / "PG_VERSION").exists()  # its data stays


def test_after_a_crash_the_dead_user_is_pruned_and_the_last_live_one_cleans_up(data_dir):
    crashed = User(data_dir)
    postmaster = int(crashed.report()["postmaster"])  # type: ignore[call-overload]
    crashed.kill()  # no exit hook ran: its pid stays recorded
    os.kill(postmaster, signal.SIGKILL)  # and the server dies too: its postmaster.pid and socket file stay
    scratch = User(data_dir, mode="delete")
    assert scratch.report()["postmaster"] != postmaster  # started again
    scratch.exit()
    # The dead user no longer counts: the server is stopped and, a scratch one, deleted with everything beside it.
    assert not data_dir.parent.exists()


def test_a_server_kept_by_db_url_outlives_every_user(data_dir):
    kept = User(data_dir, mode="keep")
    uri = str(kept.report()["uri"])
    kept.exit()
    with psycopg.connect(uri) as session:  # as psql would hold it
        joined = User(data_dir)
        joined.report()
        joined.exit()
        assert session.execute("SELECT 1").fetchone() == (1,)
    assert stop_embedded_postgres(data_dir)
    assert running_server(data_dir) is None


def test_a_server_started_by_other_means_is_never_stopped(data_dir):
    user = server_os_user() if as_root() else None
    start_server(server_bin_dir(), data_dir, user)  # as pg_ctl would: memory_agent keeps no record of it
    joined = User(data_dir)
    joined.report()
    joined.exit()
    assert running_server(data_dir) is not None
