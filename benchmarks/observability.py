"""The observability stage: `stats`, `inspect` and `at` on a database of 100,000 conversations.

The data is written by SQL (memory_agent.testing.generate_conversations: generate_series) into a fresh database migrated by
memory_agent, then each command's read is timed in this process through an open MemoryService, as the CLI
runs it (`memory.call_sync(...)`, start-up excluded), and each command runs once end to end as a
subprocess for reference. The pre-health.sql reads (the 0003 views, every conversation fetched) are timed
in the same run, so the figures come with their "before".
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from memory_agent import resources
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.observability import reads as observability
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings
from memory_agent.testing import generate_conversations

SCALE_SQL = Path(__file__).parent / "scale_data.sql"
STATS_TARGET_MS = 1000.0
CONVERSATION_TARGET_MS = 50.0


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _blocks(prefix: str) -> dict[str, str]:
    return {
        name: statement
        for name, statement in resources.parse_queries(SCALE_SQL.read_text(encoding="utf-8")).items()
        if name.startswith(prefix)
    }


def _summary(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {
        "samples_ms": [round(s, 2) for s in samples],
        "p50_ms": ordered[(len(ordered) - 1) // 2],
        "max_ms": ordered[-1],
    }


def _time(memory: MemoryService, make: Any, repeats: int) -> list[float]:
    samples = []
    for n in range(repeats):
        started = time.perf_counter()
        memory.call_sync(make(n))
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _time_before(url: str, repeats: int) -> list[float]:
    """The reads `stats` made before sql/queries/health.sql: the 0003 views, every conversation fetched."""
    statements = _blocks("before_")
    samples = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        for _ in range(repeats):
            started = time.perf_counter()
            for statement in statements.values():
                conn.execute(statement, {"older_than_s": observability.DEFAULT_STUCK_AFTER_S}).fetchall()
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def _cli_ms(url: str, *args: str) -> float:
    env = {**os.environ, "MEMORY_AGENT_DATABASE_URL": url, "NO_COLOR": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args], env=env, capture_output=True, text=True, timeout=300
    )
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"memory-agent {' '.join(args)} failed: {done.stderr.strip()}")
    return elapsed


def conversation_id(index: int) -> str:
    return f"conv-{index:07d}"


def observability_stage(
    url: str, conversations: int, rounds: int, repeats: int = 7, before_repeats: int = 2, cli: bool = True
) -> dict[str, Any]:
    """Generate the data at `url` (an empty database), then time stats, inspect and at; figures in ms."""
    # A different conversation (spread over the key range) and round at every repeat: no warm single row.
    threads = [conversation_id(1 + (n * 7919 + 13) % conversations) for n in range(repeats)]
    settings = MemorySettings(database_url=url)
    with MemoryService.from_settings(settings, model=OfflineSummaryModel()) as memory:  # migrates the database
        backend = memory.backend
        _log(f"observability: generating {conversations:,} conversations x {rounds} rounds in SQL")
        result: dict[str, Any] = {
            "data": generate_conversations(url, conversations, rounds, settings.database.db_schema)
        }
        _log(f"observability: generated in {sum(result['data']['generate_s'].values()):.1f} s: {result['data']}")

        async def stats(_: int) -> observability.MemoryHealth:
            return await observability.health(backend, settings.jobs.processing_timeout_s)

        async def inspect(n: int) -> Any:
            return (
                await observability.conversation(backend, threads[n]),
                await observability.version_chain(backend, threads[n]),
            )

        async def at(n: int) -> observability.ContextAtRound:
            return await observability.context_at(backend, threads[n], 1 + (n * 3) % rounds)

        timed = {
            "stats": _time(memory, stats, repeats),
            "inspect": _time(memory, inspect, repeats),
            "at": _time(memory, at, repeats),
        }
    result["in_process"] = {name: _summary(samples) for name, samples in timed.items()}
    _log(
        "observability: in process "
        + ", ".join(f"{name} p50 {entry['p50_ms']:.1f} ms" for name, entry in result["in_process"].items())
    )
    before = _time_before(url, before_repeats)
    result["before"] = {"stats": _summary(before)}
    _log(f"observability: stats before health.sql p50 {result['before']['stats']['p50_ms']:.0f} ms")
    if cli:
        result["cli_ms"] = {
            "--help (start-up only)": _cli_ms(url, "--help"),
            "stats --json": _cli_ms(url, "stats", "--json"),
            "inspect": _cli_ms(url, "inspect", threads[0]),
            "at": _cli_ms(url, "at", threads[0], str(rounds)),
        }
    stats_p50 = result["in_process"]["stats"]["p50_ms"]
    result["targets"] = [
        {
            "target": f"stats at {conversations:,} conversations <= {STATS_TARGET_MS:.0f} ms (p50, in process)",
            "value": stats_p50,
            "limit": STATS_TARGET_MS,
            "holds": stats_p50 <= STATS_TARGET_MS,
        },
        *(
            {
                "target": f"{name} <= {CONVERSATION_TARGET_MS:.0f} ms beyond start-up (p50, in process)",
                "value": result["in_process"][name]["p50_ms"],
                "limit": CONVERSATION_TARGET_MS,
                "holds": result["in_process"][name]["p50_ms"] <= CONVERSATION_TARGET_MS,
            }
            for name in ("inspect", "at")
        ),
    ]
    return result


def render_markdown(result: dict[str, Any]) -> str:
    """The stage's figures as a markdown table, then its targets."""
    data = result["data"]
    lines = [
        f"Observability at {data['conversations']:,} conversations, {data['messages']:,} messages, "
        f"{data['round_metrics']:,} round_metrics rows, {data['memory_versions']:,} memory versions "
        f"(generated in {sum(data['generate_s'].values()):.0f} s).",
        "",
        "| Command (query work, in process) | p50 (ms) | max (ms) | runs |",
        "|---|---:|---:|---:|",
    ]
    for name, entry in result["in_process"].items():
        lines.append(f"| {name} | {entry['p50_ms']:.1f} | {entry['max_ms']:.1f} | {len(entry['samples_ms'])} |")
    before = result["before"]["stats"]
    lines.append(
        f"| stats before health.sql (0003 views, every conversation fetched) | {before['p50_ms']:.0f} | "
        f"{before['max_ms']:.0f} | {len(before['samples_ms'])} |"
    )
    if "cli_ms" in result:
        lines += [
            "",
            "End to end, once (`python -m memory_agent ...`, process start-up included): "
            + ", ".join(f"{name} {ms:.0f} ms" for name, ms in result["cli_ms"].items())
            + ".",
        ]
    lines += ["", "| Target | Value (ms) | Limit (ms) | Holds |", "|---|---:|---:|---|"]
    for target in result["targets"]:
        verdict = "holds" if target["holds"] else "does not hold"
        lines.append(f"| {target['target']} | {target['value']:.1f} | {target['limit']:.0f} | {verdict} |")
    return "\n".join(lines) + "\n"
