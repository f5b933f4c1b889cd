"""The embedded PostgreSQL accepts no other local user and changes no permission of a directory it did not create.

The wheel alone: `trust` authentication, a 0777 socket directory under /tmp for a long data directory path, and
(as root) every directory above the data directory made world-readable.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from memory_agent import ConfigurationError, MemorySettings
from memory_agent.db.embedded import start_embedded_postgres
from tests.integration.embedded_check import check
from tests.integration.other_user import TEST_USER, run_as, user_workspace

AS_ROOT = os.geteuid() == 0


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
    try:
        assert_closed(check(base))
    finally:
        shutil.rmtree(base)


@pytest.mark.slow
@pytest.mark.skipif(not AS_ROOT, reason="the suite already runs as a non-root user: the test above is that case")
def test_long_data_dir_path_opens_no_door_as_a_non_root_user():
    home, base, pythonpath = user_workspace()
    try:
        report = json.loads(run_as(TEST_USER, home, pythonpath, ["-m", "tests.integration.embedded_check", str(base)]))
        assert_closed(report)
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=True)


@pytest.mark.skipif(not AS_ROOT, reason="only root runs the server as another OS user")
def test_root_refuses_a_data_dir_the_server_user_cannot_reach():
    closed = Path(tempfile.mkdtemp(prefix="ma_closed_"))  # 0700, not made by memory_agent
    try:
        with pytest.raises(ConfigurationError, match="MEMORY_AGENT_DATA_DIR") as caught:
            start_embedded_postgres(closed / "pgdata")
        assert str(closed) in str(caught.value)
        assert stat.S_IMODE(closed.stat().st_mode) == 0o700
        assert not (closed / "pgdata").exists()
    finally:
        shutil.rmtree(closed)


@pytest.mark.skipif(not AS_ROOT, reason="only root runs the server as another OS user")
def test_a_refused_data_dir_leaves_no_directory_behind():
    # The missing parents of the data directory were made before the refusal: `relative/pg` under a closed
    # directory left an empty `relative/` there.
    closed = Path(tempfile.mkdtemp(prefix="ma_closed_"))
    try:
        with pytest.raises(ConfigurationError, match="MEMORY_AGENT_DATA_DIR"):
            start_embedded_postgres(closed / "app" / "data" / "pgdata")
        assert list(closed.iterdir()) == []
    finally:
        shutil.rmtree(closed)


def test_default_data_dir_needs_no_permission_change():
    import platformdirs

    data_dir = MemorySettings().database.data_dir
    if AS_ROOT:
        assert data_dir == Path("/var/lib/memory_agent/pgdata")
    else:
        assert data_dir.is_relative_to(Path(platformdirs.user_cache_dir("memory_agent")))
