"""memory_agent.testing's pytest plugin, as a user's own suite enables it: a fresh database per test (the schema
applied, nothing of the previous test's), the integrity checker after each (a broken store fails the test unless
it is marked), and nothing left on the server after the run. The suite runs in a pytest of its own (pytester) on
this run's server."""

from __future__ import annotations

import psycopg

CONFTEST = 'pytest_plugins = ["memory_agent.testing.plugin"]\n'

SUITE = '''
import psycopg
import pytest

# A conversation that says it holds two messages and holds none: the integrity checker's "sequences gap-free".
BROKEN = """
WITH owner AS (INSERT INTO memory_agent.conversation_owners (conversation_id, tenant_id, user_id, created_at)
               VALUES ('c', 'default', 'u', now()))
INSERT INTO memory_agent.conversations (user_id, tenant_id, conversation_id, next_sequence, round_count)
VALUES ('u', 'default', 'c', 2, 1)
"""


def conversations(url):
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM memory_agent.conversations").fetchone()[0]


def test_a_breaks_the_store_and_fails(memory_agent_database_url):
    with psycopg.connect(memory_agent_database_url, autocommit=True) as conn:
        conn.execute(BROKEN)


@pytest.mark.no_integrity_check
def test_b_breaks_the_store_on_purpose(memory_agent_database_url):
    with psycopg.connect(memory_agent_database_url, autocommit=True) as conn:
        conn.execute(BROKEN)
    assert conversations(memory_agent_database_url) == 1


def test_c_gets_a_fresh_copy_and_an_empty_database(memory_agent_database_url, memory_agent_empty_database_url):
    assert conversations(memory_agent_database_url) == 0  # test_b's row is not in this copy
    with psycopg.connect(memory_agent_empty_database_url) as conn:
        assert conn.execute("SELECT to_regclass('memory_agent.conversations')").fetchone()[0] is None
'''


def _databases(server_url: str) -> set[str]:
    with psycopg.connect(server_url) as conn:
        return {row[0] for row in conn.execute("SELECT datname FROM pg_database")}


def test_a_users_suite_gets_fresh_checked_databases(pytester, monkeypatch, server_url):
    before = _databases(server_url)
    monkeypatch.setenv("MEMORY_AGENT_TEST_DSN", server_url)  # this run's server: no second embedded one
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:asyncio")
    result.assert_outcomes(passed=3, errors=1)
    # The broken store is reported after its test, naming the rule.
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_a_breaks_the_store_and_fails*"])
    result.stdout.fnmatch_lines(["*memory_agent: sequences gap-free*"])
    assert _databases(server_url) == before  # the template and every test's copy are dropped
