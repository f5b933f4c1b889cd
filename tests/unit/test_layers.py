"""The seams between the sub-packages: the trigger rule as one pure function, executors that run
SummaryJobs (not the service), and the RoundMemory protocol the integrations depend on."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from memory_agent import MemoryService, RoundMemory
from memory_agent.conversation.memory import ConversationMemory
from memory_agent.conversation.window import summary_due
from memory_agent.jobs.base import SummaryJobs
from memory_agent.jobs.inline import InlineExecutor
from memory_agent.testing import NoopMemory

RULE = dict(summarize_after_seq=5, min_new_messages=1, processing_timeout_s=300.0)


@pytest.mark.parametrize(
    ("last_saved_seq", "processing_age_s", "base_end_sequence", "outcome"),
    [
        (4, None, None, "below_threshold"),
        (4, 10.0, None, "below_threshold"),  # the threshold is checked first
        (5, None, None, None),  # due: the design's first summary
        (7, 10.0, None, "already_processing"),
        (7, 300.0, None, "already_processing"),  # at the timeout: not stuck yet (memory_is_stuck: older than)
        (7, 300.5, None, None),  # past the timeout: stale, reclaimed, so due
        (7, 10.0, 7, "already_processing"),  # in progress wins over "nothing new"
        (7, None, 7, "no_new_messages"),
        (7, 900.0, 7, "no_new_messages"),  # stale row reclaimed, but nothing new since the memory
        (8, None, 7, None),
    ],
)
def test_summary_due_is_the_whole_trigger_rule(last_saved_seq, processing_age_s, base_end_sequence, outcome):
    assert (
        summary_due(last_saved_seq, processing_age_s=processing_age_s, base_end_sequence=base_end_sequence, **RULE)
        == outcome
    )


async def test_the_inline_executor_runs_summary_jobs_and_drains():
    ran: list[int] = []
    gate = asyncio.Event()

    async def run_summary(memory_id: int, user_id: str, started=None) -> str:
        await gate.wait()
        ran.append(memory_id)
        return "completed"

    async def sweep() -> list[int]:
        return []

    executor = InlineExecutor(SummaryJobs(run_summary, sweep), sweep_interval_s=0)
    await executor.start()
    await executor.dispatch(1, "u")
    await executor.dispatch(2, "u")
    assert not await executor.drain(timeout=0.05)  # both still waiting
    gate.set()
    assert await executor.drain(timeout=5)
    assert sorted(ran) == [1, 2]
    await executor.dispatch(3, "u")  # never released: stop() cancels it
    gate.clear()
    await executor.stop()
    assert await executor.drain(timeout=0)


def _parameters(function: object) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]  # type: ignore[arg-type]


@pytest.mark.parametrize("implementation", [MemoryService, NoopMemory])
def test_round_memories_take_what_the_protocol_passes(implementation):
    members = [name for name in vars(RoundMemory) if not name.startswith("_") and callable(getattr(RoundMemory, name))]
    assert sorted(members) == ["call_sync", "round_identity"]
    for name in members:
        expected, actual = getattr(RoundMemory, name), getattr(implementation, name)
        assert _parameters(actual)[: len(_parameters(expected))] == _parameters(expected), name
        assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(expected), name
    assert isinstance(NoopMemory(), RoundMemory)
    # The round operations are the conversation tier's, written once (conversation/memory.py): both
    # implementations hand out that tier, so they take what the integrations pass by construction.
    assert isinstance(inspect.getattr_static(implementation, "conversations"), property)
    for name in ("finish_round", "prepare_round", "record_failed_round", "release_round"):
        assert inspect.iscoroutinefunction(getattr(ConversationMemory, name)), name
    assert isinstance(NoopMemory().conversations, ConversationMemory)


# Every module of memory_agent is a unit here: a top-level module, or a sub-package with all its modules. A unit
# not named below fails test_every_module_is_placed_in_a_layer, so a new module starts by choosing its layer.
UNITS = {
    "__init__", "__main__", "errors", "resources", "tracing", "settings", "schemas", "runtime", "tokens", "llm", "db",
    "conversation", "long_term", "summarize", "jobs",
    "consolidation", "evaluation", "integrations", "observability", "service", "testing", "langgraph_server",
    "transfer",
    "api", "mcp_server", "cli",
}  # fmt: skip
SETTINGS = ("settings",)
TOP = (
    "api", "mcp_server", "cli", "langgraph_server", "testing", "service", "evaluation", "__init__", "__main__",
    "transfer",
)  # fmt: skip


def only(*allowed: str) -> tuple[str, ...]:
    """Everything but `allowed`: for the base modules, which import almost nothing."""
    return tuple(sorted(UNITS - set(allowed)))


# What each unit must not import (each package's __init__ docstring says the same): lower layers never reach up.
FORBIDDEN = {
    # The base modules, below every package: errors, where the SQL and prompt files are, settings, the shared data
    # shapes, the memory loop, the token estimate.
    "errors": only(),
    "resources": only(),
    "tracing": only("errors"),  # spans through opentelemetry-api, for every tier
    **{name: only("errors", *SETTINGS) for name in SETTINGS},
    "schemas": only("errors"),
    "runtime": only("errors"),
    "tokens": only(),  # the one token estimate
    # The LLM call path (the call record, the counter, the default and offline models), under every caller.
    "llm": only("errors", "resources", "schemas", "tokens", *SETTINGS),
    # The tiers and what runs them.
    "db": ("conversation", "long_term", "summarize", "jobs", "consolidation", "integrations", "observability", *TOP),
    # The two tiers never import each other: recall reaches the round start as a RoundRecaller the service wires.
    "conversation": ("long_term", "summarize", "jobs", "consolidation", "integrations", "observability", *TOP),
    "long_term": ("conversation", "summarize", "jobs", "consolidation", "integrations", "observability", *TOP),
    "summarize": ("jobs", "consolidation", "integrations", "observability", *TOP),
    "consolidation": ("jobs", "conversation", "integrations", "observability", *TOP),
    "jobs": ("conversation", "summarize", "integrations", "observability", *TOP),
    "integrations": ("db", "summarize", "jobs", "consolidation", "observability", *TOP),
    "observability": ("summarize", "jobs", "consolidation", "integrations", *TOP),
    # A user's memory as one document (export, import): the rows of both tiers, under the service.
    "transfer": ("summarize", "jobs", "consolidation", "integrations", "observability", *TOP),
    # The top: the service, the evaluation harness, the fakes, and the entry points.
    "evaluation": ("summarize", "jobs", "observability", *TOP[:3], "langgraph_server", "__main__"),
    "service": ("testing", "evaluation", "langgraph_server", "api", "mcp_server", "cli", "__init__", "__main__"),
    # The fakes, the test databases and rows written straight into the tables: under the evaluation and the CLI.
    "testing": (
        *("summarize", "jobs", "consolidation", "observability", "transfer", "service", "evaluation"),
        *("langgraph_server", "api", "mcp_server", "cli", "__init__", "__main__"),
    ),
    "langgraph_server": ("testing", "api", "mcp_server", "cli", "__main__"),
    "__init__": ("testing", "evaluation", "langgraph_server", "api", "mcp_server", "cli", "__main__"),
    "api": ("testing", "mcp_server", "cli", "__main__"),
    "mcp_server": ("testing", "cli", "__main__"),
    "cli": ("__main__",),
    "__main__": (),
}


def _units(root) -> dict[str, list]:
    """{unit: its module files}: a top-level module is its own unit, a sub-package one unit with all its modules."""
    units: dict[str, list] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        units.setdefault(parts[0].removesuffix(".py"), []).append(path)
    return units


def test_every_module_is_placed_in_a_layer():
    from pathlib import Path

    import memory_agent

    units = _units(Path(memory_agent.__file__).parent)
    assert set(units) - set(FORBIDDEN) == set(), "a module no layer names: add it to FORBIDDEN"
    assert set(FORBIDDEN) - set(units) == set(), "a layer names a module that no longer exists"
    assert set(FORBIDDEN) == UNITS
    assert all(set(forbidden) <= UNITS for forbidden in FORBIDDEN.values())


def _imported_modules(path) -> set[str]:
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_lower_layers_never_import_higher_ones():
    from pathlib import Path

    import memory_agent

    root = Path(memory_agent.__file__).parent
    broken = []
    for unit, paths in _units(root).items():
        forbidden = [f for f in FORBIDDEN[unit] if f != unit]
        for path in paths:
            for module in _imported_modules(path):
                if any(module == f"memory_agent.{f}" or module.startswith(f"memory_agent.{f}.") for f in forbidden):
                    broken.append(f"{path.relative_to(root)} imports {module}")
    assert broken == []


def test_no_two_units_import_each_other():
    from pathlib import Path

    import memory_agent

    root = Path(memory_agent.__file__).parent
    imports: dict[str, set[str]] = {}
    for unit, paths in _units(root).items():
        for path in paths:
            for module in _imported_modules(path):
                if module.startswith("memory_agent."):
                    imports.setdefault(unit, set()).add(module.split(".")[1])
    both = sorted((a, b) for a in imports for b in imports[a] if a < b and a in imports.get(b, set()))
    assert both == []


def test_no_two_units_may_import_each_other():
    # The rules themselves, not only today's imports: a pair both may import would let a cycle in unnoticed, and
    # docs/reference/modules.md (generated from FORBIDDEN) would show it as allowed.
    both = sorted((a, b) for a in UNITS for b in UNITS if a < b and b not in FORBIDDEN[a] and a not in FORBIDDEN[b])
    assert both == []
