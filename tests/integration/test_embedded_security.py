"""The embedded PostgreSQL accepts no other local user and changes no permission of a directory it did not create.

The wheel alone: `trust` authentication, a 0777 socket directory under /tmp for a long data directory path, and
(as root) every directory above the data directory made world-readable.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import site
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from memory_agent import ConfigurationError, MemorySettings
from memory_agent.db.embedded import start_embedded_postgres
from tests.integration.embedded_check import check

AS_ROOT = os.geteuid() == 0
TEST_USER = "memory_agent_tester"


def interpreter_for(user: str) -> str:
    """This Python, or another of the same version, that `user` may execute (root's own may sit under /root)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(sys.executable), shutil.which(version), f"/usr/bin/{version}"]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            ["runuser", "-u", user, "--", candidate, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if probe.returncode == 0 and probe.stdout.strip() == str(tuple(sys.version_info[:2])):
            return candidate
    pytest.fail(f"no {version} that {user} may run: install one system-wide")


def assert_closed(report: dict[str, object]) -> None:
    assert report["socket_outside_data_dir"], "the long-path case was not exercised"
    assert report["ancestor_modes_changed"] == {}
    assert report["socket_dir_mode"] == 0o700
    assert report["secret_mode"] == 0o600
    assert report["trust_rules"] == 0
    assert report["connects_without_password"] is False
    assert "password" in str(report["refusal"])
    if "other_user" in report:
        other = report["other_user"]
        assert isinstance(other, dict)
        assert other["returncode"] != 0
        assert "connection to server" in other["stderr"]  # psql ran; the server would not have it


@pytest.mark.slow
def test_long_data_dir_path_opens_no_door():
    base = Path(tempfile.mkdtemp(prefix="ma_sec_"))
    base.chmod(0o755)  # reachable by the server's OS user without memory_agent changing anything
    assert_closed(check(base))


@pytest.mark.slow
@pytest.mark.skipif(not AS_ROOT, reason="the suite already runs as a non-root user: the test above is that case")
def test_long_data_dir_path_opens_no_door_as_a_non_root_user():
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "-s", "/bin/sh", TEST_USER], check=True, capture_output=True)
    home = Path(pwd.getpwnam(TEST_USER).pw_dir)
    home.chmod(0o700)  # as a home usually is: it must stay so
    base = Path(
        subprocess.run(
            ["runuser", "-u", TEST_USER, "--", "mktemp", "-d", "-p", str(home)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    python = interpreter_for(TEST_USER)
    # The virtualenv's packages, read by an interpreter of the same version that the test user may run.
    path = os.pathsep.join([os.getcwd(), *site.getsitepackages()])
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "PYTHONPATH": path}
    run = subprocess.run(
        ["runuser", "-u", TEST_USER, "--", python, "-m", "tests.integration.embedded_check", str(base)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=os.getcwd(),
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert_closed(report)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


@pytest.mark.skipif(not AS_ROOT, reason="only root runs the server as another OS user")
def test_root_refuses_a_data_dir_the_server_user_cannot_reach():
    closed = Path(tempfile.mkdtemp(prefix="ma_closed_"))  # 0700, not made by memory_agent
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_DATA_DIR") as caught:
        start_embedded_postgres(closed / "pgdata")
    assert str(closed) in str(caught.value)
    assert stat.S_IMODE(closed.stat().st_mode) == 0o700
    assert not (closed / "pgdata").exists()


def test_default_data_dir_needs_no_permission_change():
    import platformdirs

    data_dir = MemorySettings().data_dir
    if AS_ROOT:
        assert data_dir == Path("/var/lib/memory_agent/pgdata")
    else:
        assert data_dir.is_relative_to(Path(platformdirs.user_cache_dir("memory_agent")))
