"""One seam to the database: memory_agent/db/connector.py is the only code that runs SQL.

Every other module goes through its functions (fetch_one, fetch_all, execute_query, execute_many on a given
connection) or a Connector (the same on a pooled one), so every driver error is mapped in one place."""

from __future__ import annotations

import re
from pathlib import Path

import memory_agent

ROOT = Path(memory_agent.__file__).parent
SEAM = ROOT / "db" / "connector.py"
# psycopg's ways of running a statement or reading its rows, and taking a connection from the pool by hand.
DRIVER_CALL = re.compile(r"\.(execute|executemany|cursor|fetchone|fetchall|fetchmany|stream)\(|\bpool\.connection\(")


def test_only_the_connector_runs_statements():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(ROOT.rglob("*.py"))
        if path != SEAM
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if DRIVER_CALL.search(line)
    ]
    assert found == []


def test_the_pattern_sees_what_it_looks_for():
    for line in (
        "await conn.execute(q)",
        "async with conn.cursor(row_factory=dict_row) as cur:",
        "await cur.executemany(q, rows)",
        "row = await cur.fetchone()",
        "async with self.pool.connection() as conn:",
    ):
        assert DRIVER_CALL.search(line), line
    for line in ("await execute_query(conn, 'name')", "await backend.fetch_all('name')", "m.model_copy(update={})"):
        assert not DRIVER_CALL.search(line), line


# A module runs statements when it calls one of these: a Connector's, the module-level ones of db/connector.py, or
# psycopg's execute.
RUNS = {
    "fetch_all", "fetch_one", "execute_query", "execute_many", "send", "fetch_one_sync", "fetch_all_sync", "execute",
    "executemany",
}  # fmt: skip


def statement_runners() -> set[str]:
    """The modules of memory_agent that run statements, as paths relative to the package."""
    import ast

    found = set()
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name in RUNS:
                    found.add(path.relative_to(ROOT).as_posix())
                    break
    return found


def test_the_database_package_runs_statements_in_three_modules_and_each_tier_in_its_queries():
    """db/: the driver seam, the schema and the embedded server's first start; the conversation tier and the
    summary job through their query objects alone."""
    runners = statement_runners()
    assert {path for path in runners if path.startswith("db/")} == {
        "db/connector.py",
        "db/schema.py",
        "db/embedded/lifetime.py",
    }
    assert {path for path in runners if path.startswith("conversation/")} == {"conversation/queries.py"}
    assert {path for path in runners if path.startswith("summarize/")} == {"summarize/queries.py"}
