"""The bound role of docs/concepts/privacy.md ("Setting it up"), set up by running the page's own SQL: it holds exactly
the privileges the page lists, reads no other tenant's job arguments, cannot change the tables every tenant shares (the
embedding models' centers, the cost ledger, the migration records), and its grants are enough for the normal paths with
the procrastinate executor: rounds defer their summary jobs, the worker (the owner) runs them, recall and forgetting
work as that role. tests/integration/test_row_security.py walks the same role through rounds with inline summaries,
recall, forgetting and the HTTP API."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_agent.jobs.procrastinate_executor import SUMMARIZE_TASK
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import execute, query
from tests.integration.test_row_security import say

PRIVACY = Path(__file__).parents[2] / "docs" / "concepts" / "privacy.md"
ROUNDS = ["I live in Lisbon.", "My violin teacher is Ingrid.", "Bye."]  # the third round triggers a summary


def documented_setup() -> tuple[list[str], list[str]]:
    """The SQL block of "Setting it up" as statements, and the rows of its grants table."""
    text = PRIVACY.read_text(encoding="utf-8")
    section = text[text.index("### Setting it up") :]
    section = section[: section.index("\n### ", 1)]
    block = re.search(r"```sql\n(.*?)```", section, re.S)
    assert block is not None
    statements = [s.strip() for s in block.group(1).split(";") if s.strip()]
    rows = [line.strip() for line in section.splitlines() if line.strip().startswith("| `")]
    return statements, rows


def documented_privileges() -> dict[str, str]:
    """{table: privileges} from the page's grants table ('' for none)."""
    table: dict[str, str] = {}
    for row in documented_setup()[1]:
        tables, privileges = (cell.strip() for cell in row.strip("|").split("|")[:2])
        for name in re.findall(r"`([a-z_]+)`", tables):
            table[name] = "" if privileges == "none" else privileges.strip("`")
    return table


@pytest.fixture
def documented_role(server_url: str, database_url: str):
    """A role set up by running the page's SQL as the owner (its name and password substituted)."""
    role, password = f"memory_app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex

    def set_up() -> str:
        with psycopg.connect(database_url, autocommit=True) as conn:
            for statement in documented_setup()[0]:
                conn.execute(statement.replace("memory_app", role).replace("'...'", f"'{password}'"))
        params = conninfo_to_dict(database_url)
        params.update(user=role, password=password)
        return make_conninfo(**params)

    yield set_up
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def probe(url: str, tenant: str, table: str, column: str) -> dict[str, bool]:
    """What the role may do to `table`, statement by statement (no row is changed: WHERE false)."""
    allowed = {}
    statements = {
        "read": sql.SQL("SELECT * FROM {t} LIMIT 0"),
        "insert": sql.SQL("INSERT INTO {t} ({c}) SELECT NULL WHERE false"),
        "update": sql.SQL("UPDATE {t} SET {c} = NULL WHERE false"),
        "delete": sql.SQL("DELETE FROM {t} WHERE false"),
    }
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        conn.execute("SELECT set_config('memory_agent.tenant_id', %s, false)", (tenant,))
        for what, statement in statements.items():
            try:
                conn.execute(statement.format(t=sql.Identifier(table), c=sql.Identifier(column)))
                allowed[what] = True
            except psycopg.errors.InsufficientPrivilege:
                allowed[what] = False
    return allowed


def expected(privileges: str, column: str) -> dict[str, bool]:
    granted = {p.strip().split(" ")[0]: p.strip() for p in privileges.split(",") if p.strip()}
    whole = {name for name, spelled in granted.items() if "(" not in spelled}
    on_column = {name for name, spelled in granted.items() if f"({column})" in spelled}
    return {
        "read": "SELECT" in whole,
        "insert": "INSERT" in whole | on_column,
        "update": "UPDATE" in whole | on_column,
        "delete": "DELETE" in whole,
    }


def schema_tables(url: str) -> dict[str, str]:
    """{table: the column the probes name} for every table of the schema (the first one a statement may write, or
    the one a column grant names)."""
    rows = query(
        url,
        "SELECT c.relname, (SELECT a.attname FROM pg_attribute AS a WHERE a.attrelid = c.oid AND a.attnum > 0"
        " AND NOT a.attisdropped AND a.attidentity = '' AND a.attgenerated = '' ORDER BY (a.attname = 'job_id') DESC, a.attnum LIMIT 1)"
        " FROM pg_class AS c WHERE c.relnamespace = 'memory_agent'::regnamespace AND c.relkind IN ('r', 'p')",
    )
    return dict(rows)


async def test_the_documented_setup_is_least_privilege_and_enough(open_memory, documented_role, database_url):
    # As the page says: migrate as the owner (procrastinate's tables included), then the role.
    owner = await open_memory(model=OfflineSummaryModel(), executor="procrastinate")
    role_url = documented_role()
    execute(
        database_url,
        "INSERT INTO vector_centers (model, center) SELECT 'm', '[1,2,3]' WHERE"
        " to_regclass('vector_centers') IS NOT NULL",
    )

    # Every table of the schema has its row in the page's table and in bound_role_privileges(), the same.
    tables = schema_tables(database_url)
    documented = documented_privileges()
    shipped = dict(query(database_url, "SELECT relation, privileges FROM bound_role_privileges()"))
    assert set(tables) <= set(documented), set(tables) - set(documented)
    assert {t: documented[t] for t in tables} == {t: shipped[t] for t in tables}
    # And the role can do exactly that, statement by statement, table by table.
    actual = {t: probe(role_url, "acme", t, column) for t, column in tables.items()}
    assert actual == {t: expected(documented[t], column) for t, column in tables.items()}
    # What the old ON ALL TABLES grant allowed, refused now.
    for table in ("vector_centers", "tenant_monthly_spend", "llm_calls", "schema_migrations"):
        assert not actual[table]["update"] and not actual[table]["delete"], table
    assert not actual["procrastinate_events"]["read"] and not actual["tenant_monthly_spend"]["insert"]

    # Normal paths with the procrastinate executor, both tenants: each round defers its summary job.
    await say(owner, "globex-1", "ana", "globex", ROUNDS)
    memory = await open_memory(
        model=OfflineSummaryModel(), database_url=role_url, auto_migrate=False, executor="procrastinate"
    )
    assert memory.backend.row_security
    await say(memory, "acme-1", "ana", "acme", ROUNDS)
    job_args = "SELECT args ->> 'tenant_id', args ->> 'user_id' FROM procrastinate_jobs WHERE task_name = %s"
    assert sorted(query(database_url, job_args, (SUMMARIZE_TASK,))) == [("acme", "ana"), ("globex", "ana")]

    def as_role(tenant: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(role_url, autocommit=True) as conn:
            conn.execute("SET search_path TO memory_agent, public")
            conn.execute("SELECT set_config('memory_agent.tenant_id', %s, false)", (tenant,))
            return conn.execute(statement, params).fetchall()

    # The leak of the issue: globex's job arguments, read as acme. Now acme's job only.
    assert as_role("acme", "SELECT args ->> 'tenant_id' FROM procrastinate_jobs") == [("acme",)]
    assert as_role("", "SELECT count(*) FROM procrastinate_jobs") == [(0,)]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_role("acme", "SELECT * FROM procrastinate_events")
    # The worker (the owner) runs both jobs; the role's summary is there, and recall finds its item.
    await owner.loop.arun(owner.executor.run_worker(1, wait=False))
    assert query(database_url, "SELECT tenant_id, status FROM memory ORDER BY 1") == [
        ("acme", "completed"),
        ("globex", "completed"),
    ]
    hits = (await memory.long_term.recall("ana", "Where do I live?", tenant_id="acme")).results
    assert any(hit.kind == "item" and "Lisbon" in hit.text for hit in hits)
    assert not any("Porto" in hit.text for hit in hits)
    # The shared and ledger rows, written by now, as the role: nothing changes them.
    for statement in (
        "UPDATE vector_centers SET center = '[0,0,0]'",
        "DELETE FROM vector_centers",
        "DELETE FROM tenant_monthly_spend",
        "UPDATE tenant_monthly_spend SET cost = 0",
        "DELETE FROM llm_calls",
        "INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_x.sql')",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            as_role("acme", statement)
    assert query(database_url, "SELECT center::text FROM vector_centers WHERE model = 'm'") == [("[1,2,3]",)]

    # A round's summary job waits again; the role's forget erases it, and globex's stays.
    await say(memory, "acme-1", "ana", "acme", ROUNDS)
    await say(owner, "globex-1", "ana", "globex", ROUNDS)
    waiting = "SELECT args ->> 'tenant_id' FROM procrastinate_jobs WHERE task_name = %s AND status = 'todo' ORDER BY 1"
    assert query(database_url, waiting, (SUMMARIZE_TASK,)) == [("acme",), ("globex",)]
    spend = "SELECT tenant_id, sum(cost), sum(calls) FROM tenant_monthly_spend GROUP BY 1 ORDER BY 1"
    before = query(database_url, spend)
    assert [(t, calls) for t, _, calls in before] == [("acme", 1), ("globex", 1)]  # the first summaries' calls
    report = await memory.long_term.forget_user("ana", tenant_id="acme")
    assert report.conversations_deleted == ("acme-1",)
    assert query(database_url, waiting, (SUMMARIZE_TASK,)) == [("globex",)]
    # The ledger of the forgotten user moved to user '' (through the owner's function): the spend is whole.
    assert query(database_url, "SELECT DISTINCT user_id FROM llm_calls WHERE tenant_id = 'acme'") == [("",)]
    assert query(database_url, spend) == before


def test_the_function_refuses_a_role_the_policies_would_not_bind(database_url):
    owner = conninfo_to_dict(database_url)["user"]
    with pytest.raises(psycopg.errors.InvalidGrantOperation, match="no policy would bind it"):
        query(database_url, "SELECT grant_bound_role(%s)", (owner,))
    with pytest.raises(psycopg.errors.UndefinedObject, match="create it first"):
        query(database_url, "SELECT grant_bound_role('no_such_role_here')")


def test_the_ledgers_functions_write_for_the_named_tenant_only(documented_role, database_url):
    role_url = documented_role()
    call = '[{"purpose": "conversation_summary", "model": "m", "input_tokens": 1, "output_tokens": 1, "cost": 2, "priced": true}]'
    spend = "SELECT tenant_id, user_id, cost, calls FROM tenant_monthly_spend ORDER BY 1, 2"
    with psycopg.connect(role_url, autocommit=True) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        conn.execute("SELECT set_config('memory_agent.tenant_id', 'acme', false)")
        conn.execute("SELECT record_llm_calls('acme', 'ana', now(), %s::jsonb)", (call,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="names tenant 'acme', not 'globex'"):
            conn.execute("SELECT record_llm_calls('globex', 'bob', now(), %s::jsonb)", (call,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="names tenant"):
            conn.execute("SELECT * FROM reserve_budget('globex', now(), 10, 1, '1 minute')")
        assert conn.execute("SELECT pseudonymise_user_ledger('globex', 'bob')").fetchone() == (0,)
        # A forget's move keeps the tenant's month whole.
        assert conn.execute("SELECT pseudonymise_user_ledger('acme', 'ana')").fetchone() == (1,)
    assert [(t, u, float(c), n) for t, u, c, n in query(database_url, spend)] == [("acme", "", 2.0, 1)]
