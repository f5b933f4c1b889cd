"""The migration runner: a database ahead of the code, an edited released file, a step that cannot run in a
transaction, definitions re-created when they change, MEMORY_AGENT_AUTO_MIGRATE off, `memory-agent migrate`."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from memory_agent import ConfigurationError, MemoryService, MemorySettings, resources
from memory_agent.db.citus import CitusDistribution
from memory_agent.db.migrate import SchemaMigrations, load_migrations
from memory_agent.db.migrations import concurrent_index
from memory_agent.db.schema import SchemaStatements
from tests.conftest import execute, query
from tests.migration.old_releases import build_release

CONCURRENT_INDEX = """-- 0099_concurrent_index: an index on a big table, built without blocking writes.
-- memory_agent: no-transaction

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_created_at ON messages (created_at);

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_round_metrics_user_created_at
    ON round_metrics (user_id, created_at);
"""


def copy_migrations(tmp_path: Path) -> Path:
    for path in resources.migrations_dir().glob("[0-9][0-9][0-9][0-9]_*.sql"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


async def run_migrator(url: str, directory: Path | None = None, apply: bool = True):
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as conn:
        migrations = load_migrations(directory) if directory else None
        part = SchemaMigrations("memory_agent", CitusDistribution("memory_agent"), migrations)
        return await part.migrate(SchemaStatements(conn, "memory_agent"), apply=apply)


def test_a_database_newer_than_the_code_is_refused_at_open(database_url):
    execute(database_url, "INSERT INTO schema_migrations (version, name, checksum) VALUES (42, 'future', 'x')")
    newest = load_migrations()[-1].version
    with pytest.raises(
        ConfigurationError,
        match=f"schema is at version 42, this memory_agent knows up to {newest}: upgrade memory_agent".replace(
            "schema is", "schema 'memory_agent' is"
        ),
    ):
        MemoryService.from_settings(MemorySettings(database_url=database_url)).open()


def test_an_edited_released_file_is_refused(database_url, tmp_path):
    directory = copy_migrations(tmp_path)
    edited = directory / "0002_round_metrics.sql"
    edited.write_text(edited.read_text() + "\n-- a later edit\n")
    with pytest.raises(ConfigurationError, match="0002_round_metrics.sql was changed after it was applied"):
        asyncio.run(run_migrator(database_url, directory))


def test_an_edited_file_is_refused_on_a_database_of_a_release_before_checksums(empty_database_url, tmp_path):
    build_release(empty_database_url, 3)
    directory = copy_migrations(tmp_path)
    edited = directory / "0003_observability.sql"
    edited.write_text(edited.read_text().replace("5 minutes", "6 minutes"))
    with pytest.raises(ConfigurationError, match="0003_observability.sql was changed"):
        asyncio.run(run_migrator(empty_database_url, directory))
    # Nothing was written: the record still has no checksum column.
    assert query(
        empty_database_url,
        "SELECT count(*) FROM information_schema.columns"
        " WHERE table_name = 'schema_migrations' AND column_name = 'checksum'",
    ) == [(0,)]


def test_a_no_transaction_step_runs_statement_by_statement(database_url, tmp_path):
    directory = copy_migrations(tmp_path)
    (directory / "0099_concurrent_index.sql").write_text(CONCURRENT_INDEX)
    migration = next(m for m in load_migrations(directory) if m.version == 99)
    assert not migration.transactional and len(migration.statements()) == 2

    report = asyncio.run(run_migrator(database_url, directory))
    assert report.applied == ["0099_concurrent_index.sql"]
    # CREATE INDEX CONCURRENTLY fails inside a transaction block: these ran in autocommit, and are valid.
    valid = query(
        database_url,
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname IN ('idx_messages_created_at', 'idx_round_metrics_user_created_at') ORDER BY 1",
    )
    assert valid == [("idx_messages_created_at", True), ("idx_round_metrics_user_created_at", True)]
    assert query(database_url, "SELECT checksum FROM schema_migrations WHERE version = 99") == [(migration.checksum,)]
    assert asyncio.run(run_migrator(database_url, directory)).applied == []


def test_an_index_a_failed_concurrent_build_left_invalid_is_built_again(database_url, tmp_path, caplog):
    # A concurrent build that fails (a crash, a cancel; here a unique index over duplicates) leaves its index
    # invalid: IF NOT EXISTS alone would skip it at every run after, and queries would never use it.
    caplog.set_level(logging.WARNING, logger="memory_agent")  # whatever an earlier test of the process set it to
    execute(database_url, "CREATE TABLE probe (v integer); INSERT INTO probe VALUES (1), (1)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        execute(database_url, "CREATE UNIQUE INDEX CONCURRENTLY idx_probe ON probe (v)")
    valid = "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'idx_probe'"
    assert query(database_url, valid) == [(False,)]
    execute(database_url, "DELETE FROM probe; INSERT INTO probe VALUES (1)")
    directory = copy_migrations(tmp_path)
    (directory / "0099_probe_index.sql").write_text(
        "-- 0099_probe_index: a unique index.\n-- memory_agent: no-transaction\n\n"
        "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS idx_probe ON probe (v);\n"
    )
    assert asyncio.run(run_migrator(database_url, directory)).applied == ["0099_probe_index.sql"]
    assert query(database_url, valid) == [(True,)]
    assert "Index idx_probe was left invalid by an earlier build; it is built again" in caplog.text


@pytest.mark.parametrize(
    ("statement", "name"),
    [
        ("CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_a ON t (v)", "idx_a"),
        ("-- why\ncreate unique index concurrently if not exists IDX_Probe on t (v)", "idx_probe"),
        ('/* why */ CREATE INDEX CONCURRENTLY IF NOT EXISTS "Idx ""B""" ON t (v)', 'Idx "B"'),
        ("CREATE INDEX CONCURRENTLY idx_a ON t (v)", None),  # without IF NOT EXISTS a rerun fails, never skips
        ("DROP INDEX CONCURRENTLY IF EXISTS idx_a", None),
    ],
)
def test_the_index_a_concurrent_build_names(statement, name):
    assert concurrent_index(statement) == name


def test_two_processes_apply_a_no_transaction_step_once(database_url, tmp_path):
    directory = copy_migrations(tmp_path)
    (directory / "0099_concurrent_index.sql").write_text(CONCURRENT_INDEX)

    async def both():
        return await asyncio.gather(run_migrator(database_url, directory), run_migrator(database_url, directory))

    reports = asyncio.run(both())
    assert sorted(len(r.applied) for r in reports) == [0, 1]
    assert query(database_url, "SELECT count(*) FROM schema_migrations WHERE version = 99") == [(1,)]


def test_definitions_are_recreated_when_they_change(database_url):
    assert asyncio.run(run_migrator(database_url)).definitions == []
    # As if views.sql had changed since it was created: its recorded checksum no longer matches.
    execute(database_url, "UPDATE schema_definitions SET checksum = 'old' WHERE name = 'views.sql'")
    execute(database_url, "DROP VIEW memory_health_totals")
    report = asyncio.run(run_migrator(database_url))
    assert report.applied == [] and report.definitions == [
        "grants.sql",
        "items.sql",
        "rules.sql",
        "schedules.sql",
        "summaries.sql",
        "tenancy.sql",
        "views.sql",
    ]
    assert query(database_url, "SELECT count(*) FROM memory_health_totals") == [(1,)]
    # One definition of each view: not in any numbered file after 0003 (which stays as released).
    for migration in load_migrations():
        if migration.version > 3:
            assert (
                "CREATE VIEW" not in migration.text.upper() and "CREATE OR REPLACE VIEW" not in migration.text.upper()
            )


def migrate_command(url: str) -> subprocess.CompletedProcess[str]:
    """`memory-agent migrate` run against `url` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", "migrate"],
        env={"MEMORY_AGENT_DATABASE_URL": url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_auto_migrate_off_refuses_a_schema_behind_the_code(empty_database_url):
    build_release(empty_database_url, 5)
    settings = MemorySettings(database_url=empty_database_url, auto_migrate=False)
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_AUTO_MIGRATE is off: run `memory-agent migrate`"):
        MemoryService.from_settings(settings).open()
    assert query(empty_database_url, "SELECT max(version) FROM schema_migrations") == [(5,)]  # nothing applied

    result = migrate_command(empty_database_url)
    assert result.returncode == 0, result.stderr
    newest = load_migrations()[-1]
    assert "0006_user_keys.sql" in result.stdout and newest.filename in result.stdout
    with MemoryService.from_settings(settings):  # up to date: opens without migrating
        pass
    again = migrate_command(empty_database_url)
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout + again.stderr
