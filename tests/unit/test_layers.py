"""The seams between the sub-packages: the trigger rule as one pure function, executors that run
SummaryJobs (not the service), and the RoundMemory protocol the integrations depend on."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from benchmarks.run import NoopMemory
from memory_agent import MemoryService, RoundMemory
from memory_agent.conversation.window import summary_due
from memory_agent.jobs.base import SummaryJobs
from memory_agent.jobs.inline import InlineExecutor

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
    assert sorted(members) == [
        "call_sync",
        "finish_round",
        "prepare_round",
        "record_failed_round",
        "release_round",
        "round_identity",
    ]
    for name in members:
        expected, actual = getattr(RoundMemory, name), getattr(implementation, name)
        assert _parameters(actual)[: len(_parameters(expected))] == _parameters(expected), name
        assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(expected), name
    assert issubclass(NoopMemory, RoundMemory)


# What each sub-package must not import (its __init__ docstring says the same): lower layers never reach up.
FORBIDDEN = {
    "db": ("conversation", "api", "summarize", "jobs", "integrations", "observability", "cli", "service"),
    "conversation": ("api", "summarize", "jobs", "integrations", "observability", "cli", "service"),
    "summarize": ("api", "jobs", "integrations", "observability", "cli", "service"),
    "jobs": ("api", "conversation", "summarize", "integrations", "observability", "cli", "service"),
    "integrations": ("api", "db", "summarize", "jobs", "observability", "cli", "service"),
    "observability": ("api", "summarize", "jobs", "integrations", "cli", "service"),
    "long_term": ("api", "integrations", "cli", "service"),
    "consolidation": ("api", "jobs", "conversation", "integrations", "observability", "cli", "service"),
    "api": ("cli",),
}


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
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((root / package).rglob("*.py")):
            for module in _imported_modules(path):
                if any(module == f"memory_agent.{f}" or module.startswith(f"memory_agent.{f}.") for f in forbidden):
                    broken.append(f"{path.relative_to(root)} imports {module}")
    assert broken == []
