"""The long-term tier on a real model's volume of items: a LoCoMo-format file loaded through `with_memory` rounds
of a service whose summarizer is the replay model (memory_agent.evaluation.replay: the file's LLM-written facts
and session summaries, answered through the summary calls a real model gets), as `eval recall` loads it.

The file is loaded three times, each in a fresh database: with the replay summarizer and the long-term tier off
(the baseline), with it on, and with the offline summarizer and the tier on (the volume it writes). The tier's
write cost per round is the difference between the first two: wall time and this process's CPU per round, and
the rows the tier left per round (every table of the schema counted, so nothing it writes is missed). Items per
summary are the replay summarizer's and the offline one's. No target is asserted: the figures are for reading.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.systems import create_database, drop_database
from memory_agent.evaluation import load_dataset
from memory_agent.evaluation.replay import ReplaySummaryModel
from memory_agent.evaluation.rounds import ReplayClock, count_rounds, load_through_rounds, long_term_volume
from memory_agent.llm import OfflineSummaryModel
from memory_agent.service.memory import MemoryService
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


async def load(server_url: str, path: Path, summarizer: str, long_term: bool) -> dict[str, Any]:
    """One load of the file, in a fresh database: rounds, wall and CPU time, rows per table, what was written."""
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
            async with memory.backend.connection() as conn:
                volume = await long_term_volume(conn)
        rows = await table_rows(url)
    finally:
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
    return figures


async def replay_stage(server_url: str, path: Path) -> dict[str, Any]:
    """The three loads (module docstring) and the long-term tier's write cost per round."""
    loads = {
        f"{summarizer}, long-term {'on' if on else 'off'}": await load(server_url, path, summarizer, on)
        for summarizer, on in LOADS
    }
    off, on = loads["replay, long-term off"], loads["replay, long-term on"]
    rounds = on["rounds"]
    added = {table: on["rows"].get(table, 0) - off["rows"].get(table, 0) for table in on["rows"]}
    added = {table: count for table, count in added.items() if count}
    return {
        "data": path.name,
        "loads": {name: {k: v for k, v in figures.items() if k != "rows"} for name, figures in loads.items()},
        "write_cost_per_round": {
            "rounds": rounds,
            "wall_ms": round((on["wall_s"] - off["wall_s"]) * 1000 / rounds, 3),
            "cpu_ms": round((on["cpu_s"] - off["cpu_s"]) * 1000 / rounds, 3),
            "rows": round(sum(added.values()) / rounds, 3),
            "rows_by_table": added,
        },
        "items_per_summary": {
            "replay": on["items_per_summary"],
            "offline": loads["offline, long-term on"]["items_per_summary"],
        },
    }
