"""The layout measures of tools/layout.py that hold today (issue "one seam per concern"): a small service surface,
a short README, short modules, one statement-running module per package outside db/, no package cycles. The
others (the number of statement-running modules in all, mixins) join as they hold."""

from __future__ import annotations

import pytest

from tools import layout


def test_memory_service_has_at_most_25_public_members():
    members = layout.service_members()
    assert len(members) <= layout.MOST_MEMBERS, members
    # Each tier's operations live on its facade, once: none is repeated on the service.
    assert {"conversations", "long_term", "transfers"} <= set(members)
    assert not {"prepare_round", "recall", "list_items", "export_user", "should_trigger_summary"} & set(members)


def test_an_operation_asked_of_the_service_names_the_facade_it_lives_on():
    from memory_agent import MemoryService

    memory = MemoryService()  # not opened: the pointer needs no database
    with pytest.raises(AttributeError, match=r"use memory\.conversations\.prepare_round$"):
        memory.prepare_round  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match=r"use memory\.long_term\.recall \(its \.results are the hits\)"):
        memory.recall  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        memory.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(memory, "export_user")


def test_the_readme_stays_short():
    assert layout.readme_lines() <= layout.MOST_README_LINES


def test_no_module_is_over_320_lines():
    assert layout.long_modules() == {}


def test_at_most_one_module_per_package_outside_db_runs_statements():
    crowded = {
        unit: modules for unit, modules in layout.statement_modules().items() if unit != "db" and len(modules) > 1
    }
    assert crowded == {}


def test_at_most_12_modules_run_statements():
    modules = [module for group in layout.statement_modules().values() for module in group]
    assert len(modules) <= layout.MOST_STATEMENT_MODULES, modules


def test_no_class_has_two_of_the_packages_own_bases():
    assert layout.mixin_classes() == []


def test_no_two_packages_import_each_other():
    assert layout.import_cycles() == []


def test_the_checker_sees_what_it_measures(tmp_path):
    # A module that calls a statement function under the name it imported it as runs statements, and so does one
    # that calls a connector's method or the driver's execute; one that only names a Row type does not.
    sources = {
        "aliased.py": "from memory_agent.db.connector import fetch_all as fetch\nasync def f(c):\n    await fetch(c, 'q')\n",
        "method.py": "async def f(queries):\n    return await queries.connector.fetch_one('q')\n",
        "driver.py": "async def f(cur):\n    await cur.execute('SELECT 1')\n",
        "typed.py": "from memory_agent.db.connector import Row\nrows: list[Row] = []\n",
    }
    for name, source in sources.items():
        (tmp_path / name).write_text(source, encoding="utf-8")
    assert [name for name in sources if layout.runs_statements(tmp_path / name)] == [
        "aliased.py",
        "method.py",
        "driver.py",
    ]
    assert "db" in layout.statement_modules()
