"""The long-term tier on a real model's volume of items: a LoCoMo-format file loaded through `with_memory` rounds
of a service whose summarizer is the replay model (memory_agent.evaluation.replay: the file's LLM-written facts
and session summaries, answered through the summary calls a real model gets), as `eval recall` loads it.

The file is loaded three times, each in a fresh database: with the replay summarizer and the long-term tier off,
with it on, and with the offline summarizer and the tier on; items per summary are the last two's. The tier's
write cost is then measured on the first database, where every completed version holds the items its summary
answered and none was written: each version's items written as the summary job writes them (`remember` in one
transaction, then a refresh of each cluster it touched), in order, with the version's time. Timed per version on
one connection; the statements the server ran for it counted from the client's protocol trace (a second copy of
the database, so tracing costs no time in the timed pass); the rows the tier left counted over every table of the
schema. Per round: over the load's rounds. The loads' wall time differs by far more than that write on a shared
machine (their wall and CPU seconds are shown, not subtracted). No target is asserted: the figures are for
reading.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from benchmarks.systems import create_database, drop_database
from memory_agent.evaluation import load_dataset
from memory_agent.evaluation.replay import ReplaySummaryModel
from memory_agent.evaluation.rounds import ReplayClock, count_rounds, load_through_rounds, long_term_volume
from memory_agent.llm import OfflineSummaryModel
from memory_agent.long_term import (
    ClusterSummaries,
    ItemOrigin,
    ItemScope,
    offline_cluster_summarizer,
    refresh_cluster,
    remember,
    touched_clusters,
)
from memory_agent.schemas.items import ITEM_LISTS, StructuredItems
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings

LOADS = (("replay", False), ("replay", True), ("offline", True))


async def table_rows(url: str) -> dict[str, int]:
    """Rows of every table of the memory_agent schema."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        names = [
            row[0]
            for row in await (
                await conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'memory_agent' ORDER BY tablename"
                )
            ).fetchall()
        ]
        counts = {}
        for name in names:
            row = await (
                await conn.execute(
                    psycopg.sql.SQL("SELECT count(*) FROM memory_agent.{}").format(psycopg.sql.Identifier(name))
                )
            ).fetchone()
            counts[name] = int(row[0]) if row else 0
    return counts


async def load(server_url: str, path: Path, summarizer: str, long_term: bool, *, keep: bool = False) -> dict[str, Any]:
    """One load of the file, in a fresh database: rounds, wall and CPU time, rows per table, what was written;
    `keep`: the database is left for the caller (its name under "database")."""
    samples = load_dataset(path)
    model = ReplaySummaryModel.from_file(path) if summarizer == "replay" else OfflineSummaryModel()
    settings = MemorySettings().replace(executor="inline", event_loop="caller", long_term=long_term, embeddings="none")
    name, url = create_database(server_url, "ltreplay")
    try:
        clock = ReplayClock(datetime.now(UTC))
        async with MemoryService(settings, model=model, database_url=url, clock=clock, embeddings=None) as memory:
            wall, cpu = time.perf_counter(), time.process_time()
            for sample in samples:
                await load_through_rounds(memory, sample, clock)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            async with memory.backend.session() as conn:
                volume = await long_term_volume(conn)
        rows = await table_rows(url)
    finally:
        if not keep:
            drop_database(server_url, name)
    figures: dict[str, Any] = {
        "rounds": sum(count_rounds(sample) for sample in samples),
        "turns": sum(len(session.turns) for sample in samples for session in sample.sessions),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "rows": rows,
        **volume,
    }
    if isinstance(model, ReplaySummaryModel):
        figures["replay"] = dict(sorted(model.stats.items()))
    if keep:
        figures["database"] = (name, url)
    return figures


async def write_versions(url: str, trace: Path | None = None) -> list[float]:
    """Write every completed version's items as the summary job does (module docstring), in order; the ms each
    took. With `trace`, the client's protocol messages are written there."""
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row)
    try:
        await conn.execute("SET search_path TO memory_agent, public")
        versions = await (
            await conn.execute(
                "SELECT memory_id, tenant_id, user_id, conversation_id, items, finished_at FROM memory"
                " WHERE status = 'completed' ORDER BY memory_id"
            )
        ).fetchall()
        summaries = ClusterSummaries(offline_cluster_summarizer)
        spent: list[float] = []
        with open(trace or "/dev/null", "w") as traced:
            if trace is not None:
                conn.pgconn.trace(traced.fileno())
            for version in versions:
                items = StructuredItems(**{k: v for k, v in (version["items"] or {}).items() if k in ITEM_LISTS})
                if items.is_empty():
                    continue
                started = time.perf_counter()
                async with conn.transaction():
                    outcomes = await remember(
                        conn,
                        scope=ItemScope(tenant_id=version["tenant_id"], user_id=version["user_id"]),
                        source=ItemOrigin(conversation_id=version["conversation_id"], memory_id=version["memory_id"]),
                        items=items,
                        now=version["finished_at"],
                    )
                for cluster in touched_clusters(outcomes):
                    await refresh_cluster(conn, cluster, summaries, now=version["finished_at"])
                spent.append((time.perf_counter() - started) * 1000)
            if trace is not None:
                conn.pgconn.untrace()
        return spent
    finally:
        await conn.close()


async def writer_cost(server_url: str, name: str, url: str, rounds: int) -> dict[str, Any]:
    """The tier's write of a load's versions (module docstring), per version and per round."""
    copy, copy_url = create_database(server_url, "ltcopy", template=name)
    try:
        before = await table_rows(url)
        spent = await write_versions(url)
        after = await table_rows(url)
        with tempfile.TemporaryDirectory() as scratch:
            trace = Path(scratch) / "trace"
            await write_versions(copy_url, trace)
            statements = sum("\tCommandComplete\t" in line for line in trace.read_text(errors="replace").splitlines())
    finally:
        drop_database(server_url, copy)
    added = {table: after[table] - before.get(table, 0) for table in after if after[table] != before.get(table, 0)}
    ordered = sorted(spent)
    return {
        "versions_written": len(spent),
        "ms_per_version": {
            "p50": round(statistics.median(ordered), 2),
            "p95": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2),
        },
        "statements_per_version": round(statements / len(spent), 2),
        "rows_per_version": round(sum(added.values()) / len(spent), 2),
        "per_round": {
            "rounds": rounds,
            "ms": round(sum(spent) / rounds, 3),
            "statements": round(statements / rounds, 3),
            "rows": round(sum(added.values()) / rounds, 3),
        },
        "rows_by_table": added,
    }


async def replay_stage(server_url: str, path: Path) -> dict[str, Any]:
    """The three loads and the long-term tier's write cost (module docstring)."""
    loads: dict[str, dict[str, Any]] = {}
    for summarizer, on in LOADS:
        keep = summarizer == "replay" and not on
        loads[f"{summarizer}, long-term {'on' if on else 'off'}"] = await load(
            server_url, path, summarizer, on, keep=keep
        )
    off = loads["replay, long-term off"]
    name, url = off.pop("database")
    try:
        cost = await writer_cost(server_url, name, url, off["rounds"])
    finally:
        drop_database(server_url, name)
    return {
        "data": path.name,
        "loads": {name: {k: v for k, v in figures.items() if k != "rows"} for name, figures in loads.items()},
        "write_cost": cost,
        "items_per_summary": {
            "replay": loads["replay, long-term on"]["items_per_summary"],
            "offline": loads["offline, long-term on"]["items_per_summary"],
        },
    }
