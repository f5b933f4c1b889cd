"""Links planted beside the embedded server's data directory are never followed: the lock (`<data dir>.lock`) is
refused when it is a link, and the users' record (`<data dir>.users.json`) is written through a new file of its own
(a link at the record's name, or at the name the record used to be staged under, leaves its target untouched)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from memory_agent import ConfigurationError
from memory_agent.db.embedded import lifetime as embedded
from memory_agent.db.embedded import start_embedded_postgres, stop_embedded_postgres


@pytest.fixture
def beside():
    """A directory for a data directory that is never created, and a victim file outside it."""
    base = Path(tempfile.mkdtemp(prefix="ma_links_"))
    base.chmod(0o755)  # reachable by the server's OS user when run as root
    victim = base / "victim"
    victim.write_text("precious", encoding="utf-8")
    try:
        yield base / "pgdata", victim
    finally:
        shutil.rmtree(base)


def test_a_lock_planted_as_a_link_is_refused_and_its_target_untouched(beside):
    data_dir, victim = beside
    Path(f"{data_dir}.lock").symlink_to(victim)
    with pytest.raises(ConfigurationError, match=r"pgdata\.lock is a symbolic link.*MEMORY_AGENT_DATA_DIR"):
        start_embedded_postgres(data_dir)
    assert victim.read_text(encoding="utf-8") == "precious"
    assert not data_dir.exists()  # refused before anything was made


def test_a_lock_planted_as_a_link_to_a_missing_file_creates_nothing(beside):
    data_dir, victim = beside
    target = victim.parent / "made_by_the_link"
    Path(f"{data_dir}.lock").symlink_to(target)
    data_dir.mkdir()
    with pytest.raises(ConfigurationError, match="symbolic link"):
        stop_embedded_postgres(data_dir)
    assert not target.exists()


@pytest.mark.parametrize("planted", [".users.json.new", ".users.json"])
def test_the_users_record_is_never_written_through_a_planted_link(beside, planted):
    data_dir, victim = beside
    Path(f"{data_dir}{planted}").symlink_to(victim)
    embedded._write_users(data_dir, {"when_unused": "stop", "pids": {str(os.getpid()): 1.0}})
    assert victim.read_text(encoding="utf-8") == "precious"
    record = Path(f"{data_dir}.users.json")
    assert not record.is_symlink()
    assert '"when_unused": "stop"' in record.read_text(encoding="utf-8")
    assert oct(record.stat().st_mode & 0o777) == oct(0o600)
    leftovers = [p.name for p in data_dir.parent.iterdir() if p.name.startswith(".pgdata.users.json.")]
    assert leftovers == []


def test_a_users_record_planted_as_a_link_is_read_as_no_record(beside):
    data_dir, victim = beside
    victim.write_text('{"when_unused": "delete", "pids": {}}', encoding="utf-8")
    Path(f"{data_dir}.users.json").symlink_to(victim)
    assert embedded._read_users(data_dir) is None
