"""`memory-agent db url` / `db stop`: reach the embedded database with psql, and stop a server left running."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg

from memory_agent.db.embedded import remove_data_dir, scratch_data_dir, stop_embedded_postgres


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_db_url_starts_the_embedded_server_and_db_stop_stops_it(request):
    data_dir = scratch_data_dir("ma_db_")
    request.addfinalizer(lambda: (stop_embedded_postgres(data_dir), remove_data_dir(data_dir)))
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_AGENT_DATABASE_URL"}
    env.update(MEMORY_AGENT_DATA_DIR=str(data_dir), PYTHONPATH=os.getcwd())
    url = run("db", "url", env=env)
    assert url.returncode == 0, url.stderr
    uri = url.stdout.strip()
    assert uri.startswith("postgresql://postgres:") and "?host=" in uri, uri  # a URL, not a keyword string
    # The server outlives the command, for psql, and the next command (which joins it) leaves it running.
    with psycopg.connect(uri) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        migrated = run("migrate", env=env)
        assert migrated.returncode == 0, migrated.stderr
        assert conn.execute("SELECT count(*) FROM memory_agent.schema_migrations").fetchone()[0] > 0  # type: ignore[index]
    stopped = run("db", "stop", env=env)
    assert stopped.returncode == 0 and "stopped the embedded PostgreSQL" in stopped.stdout, stopped.stderr
    assert not (data_dir / "postmaster.pid").exists()
    again = run("db", "stop", env=env)
    assert "no embedded PostgreSQL is running" in again.stdout


def test_conninfo_url():
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from memory_agent.cli.main import conninfo_url

    keywords = make_conninfo(user="postgres", dbname="postgres", host="/tmp/pg dir", port=5432, password="a/b c@d")
    url = conninfo_url(keywords)
    assert url == "postgresql://postgres:a%2Fb%20c%40d@/postgres?host=/tmp/pg%20dir&port=5432"
    assert conninfo_to_dict(url) == conninfo_to_dict(keywords)
    assert conninfo_url("host=db.example port=6543 dbname=m user=u") == "postgresql://u@db.example:6543/m"
    assert conninfo_url("postgresql://u@h/db") == "postgresql://u@h/db"


def test_db_url_prints_a_configured_url(database_url):
    env = {**os.environ, "MEMORY_AGENT_DATABASE_URL": database_url, "PYTHONPATH": os.getcwd()}
    assert run("db", "url", env=env).stdout.strip() == database_url


def test_demo_names_its_thread_id(database_url):
    env = {**os.environ, "MEMORY_AGENT_DATABASE_URL": database_url, "PYTHONPATH": os.getcwd(), "COLUMNS": "200"}
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    demo = run("demo", "--rounds", "10", "--thread-id", "my-demo", env=env)
    assert demo.returncode == 0, demo.stderr
    assert "thread id is my-demo" in demo.stdout and "memory-agent inspect my-demo" in demo.stdout
