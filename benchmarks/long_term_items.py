"""`make bench` stage for long-term items: write cost, race outcomes, reads at scale, forgetting.

Runs on its own embedded PostgreSQL (or --database-url), one fresh database. With a LoCoMo-format file (--replay,
default: the development split beside the project when it is there) the tier is also measured on a real model's
volume of items (long_term_replay.py). Prints a table of figures and writes benchmarks/results/long_term_items.json
and .md. No target is asserted here: the figures are for reading.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.long_term_replay import replay_stage
from benchmarks.recall import LOCOMO_DEV
from benchmarks.systems import create_database, drop_database
from memory_agent.db.schema import SchemaManager
from memory_agent.long_term import (
    Cluster,
    ClusterSummaries,
    ItemFilter,
    ItemOrigin,
    ItemScope,
    forget_conversation,
    list_items,
    offline_cluster_summarizer,
    refresh_cluster,
    remember,
)
from memory_agent.schemas.items import StructuredItems, SummaryItem
from memory_agent.schemas.keys import UserKey
from memory_agent.service.backend import MemoryBackend

RESULTS = Path(__file__).parent / "results" / "long_term_items.json"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
WRITERS = 24


def ten_items(tag: str) -> StructuredItems:
    return StructuredItems(
        facts=[SummaryItem(key=f"fact_{n}", content=f"Fact {n} is {tag}") for n in range(5)]
        + [
            SummaryItem(key="allergies", content=f"The user is allergic to {tag}{n}", single_valued=False)
            for n in range(3)
        ],
        decisions=[SummaryItem(key="decisions", content=f"Decided: {tag} {n}") for n in range(2)],
    )


def ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2),
    }


async def connect(url: str) -> psycopg.AsyncConnection[Any]:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute("SET search_path TO memory_agent, public")
    return conn


async def timed(calls: int, make) -> list[float]:
    spent = []
    for n in range(calls):
        started = time.perf_counter()
        await make(n)
        spent.append((time.perf_counter() - started) * 1000)
    return spent


async def measure(url: str, calls: int, users: int, items_per_user: int) -> dict[str, Any]:
    pool = MemoryBackend.create_pool(url)
    await pool.open(wait=True)
    await SchemaManager(MemoryBackend(pool)).migrate()
    await pool.close()
    conn = await connect(url)
    out: dict[str, Any] = {}

    def write(user: str, tag: str, day: float, conversation: str = "c"):
        return remember(
            conn,
            scope=ItemScope(tenant_id="t", user_id=user),
            source=ItemOrigin(conversation_id=conversation, memory_id=1),
            items=ten_items(tag),
            now=T0 + timedelta(days=day),
        )

    out["remember_10_new"] = ms(await timed(calls, lambda n: write(f"u{n}", "a", 0)))
    out["remember_10_restated"] = ms(await timed(calls, lambda n: write(f"u{n}", "a", 1)))
    out["remember_10_superseding_5"] = ms(await timed(calls, lambda n: write(f"u{n}", "b", 2)))
    for _ in range(100):
        await write("restater", "same", 0)
    rows = await (await conn.execute("SELECT count(*) FROM items WHERE user_id = 'restater'")).fetchone()
    out["same_10_items_stated_100_times_rows"] = rows[0]

    conns = [await connect(url) for _ in range(WRITERS)]
    for label, content in (
        ("same_fact", lambda n: "The user lives in Lyon"),
        ("different_values", lambda n: f"The user lives in City{n}"),
    ):
        started = time.perf_counter()
        await asyncio.gather(
            *(
                remember(
                    c,
                    scope=ItemScope(tenant_id="t", user_id=f"race_{label}"),
                    source=ItemOrigin(conversation_id=f"c{n}", memory_id=n),
                    now=T0,
                    items=StructuredItems(facts=[SummaryItem(key="home_city", content=content(n))]),
                )
                for n, c in enumerate(conns)
            )
        )
        wall = (time.perf_counter() - started) * 1000
        current, versions = await (
            await conn.execute(
                "SELECT count(*) FILTER (WHERE upper_inf(valid_during)), count(*) FROM items WHERE user_id = %s",
                [f"race_{label}"],
            )
        ).fetchone()
        out[f"race_{WRITERS}_writers_{label}"] = {
            "wall_ms": round(wall, 1),
            "current_rows": current,
            "versions": versions,
        }
    for c in conns:
        await c.close()

    # A big user among many: list_items reads through the user's rows only.
    await conn.execute(
        "INSERT INTO items (user_id, tenant_id, item_type, key, value_slot, content, content_norm, valid_during)"
        " SELECT 'bulk' || u, 't', 'fact', 'k' || i, '', 'Fact ' || i, 'fact ' || i, tstzrange(%s, NULL)"
        " FROM generate_series(1, %s) AS u, generate_series(1, %s) AS i",
        [T0, users, items_per_user],
    )
    await conn.execute("ANALYZE items")
    out[f"list_items_current_{items_per_user}_items_{users}_users"] = ms(
        await timed(50, lambda n: list_items(conn, UserKey("t", "bulk1")))
    )
    out[f"list_items_as_of_{items_per_user}_items"] = ms(
        await timed(
            50, lambda n: list_items(conn, UserKey("t", "bulk1"), where=ItemFilter(as_of=T0 + timedelta(hours=1)))
        )
    )

    allergies = Cluster("t", "u0", "", "", "fact", "allergies")
    out["refresh_cluster_create"] = ms(
        await timed(1, lambda n: refresh_cluster(conn, allergies, ClusterSummaries(offline_cluster_summarizer), now=T0))
    )
    out["refresh_cluster_unchanged"] = ms(
        await timed(
            calls, lambda n: refresh_cluster(conn, allergies, ClusterSummaries(offline_cluster_summarizer), now=T0)
        )
    )

    for day in range(10):
        await write("forgetful", f"x{day}", day, conversation="erase-me")
    started = time.perf_counter()
    report = await forget_conversation(
        conn,
        UserKey("t", "forgetful"),
        "erase-me",
        summaries=ClusterSummaries(offline_cluster_summarizer),
        now=T0 + timedelta(days=20),
    )
    out["forget_conversation"] = {
        "ms": round((time.perf_counter() - started) * 1000, 1),
        "items_deleted": len(report.items_deleted),
    }
    await conn.close()
    return out


def render(results: dict[str, Any]) -> str:
    lines = ["| long-term items | figure |", "|---|---|"]
    for name, value in results.items():
        if name == "replay":
            continue
        shown = ", ".join(f"{k} {v}" for k, v in value.items()) if isinstance(value, dict) else str(value)
        lines.append(f"| {name} | {shown} |")
    replay = results.get("replay")
    if isinstance(replay, dict) and "loads" in replay:
        cost, per_round = replay["write_cost"], replay["write_cost"]["per_round"]
        lines += [
            "",
            f"Replayed model output ({replay['data']}): the long-term tier's write of each version's items "
            f"(`remember` + its clusters' refresh), {cost['versions_written']} versions: p50 "
            f"{cost['ms_per_version']['p50']} ms ({cost.get('p50_vs_remember_10_new')}x the same run's remember_10_new "
            "p50), p95 "
            f"{cost['ms_per_version']['p95']} ms, "
            f"{cost['statements_per_version']} statements, {cost['rows_per_version']} rows {cost['rows_by_table']}; "
            f"per round ({per_round['rounds']} rounds): {per_round['ms']} ms, {per_round['statements']} statements, "
            f"{per_round['rows']} rows",
            "",
            "| load | rounds | summaries | items | items per summary | cluster summaries | wall s | CPU s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, load in replay["loads"].items():
            lines.append(
                f"| {name} | {load['rounds']} | {load['summaries']} | {load['items']} | {load['items_per_summary']} "
                f"| {load['cluster_summaries']} | {load['wall_s']} | {load['cpu_s']} |"
            )
    elif replay is not None:
        lines += ["", f"Replayed model output: skipped ({replay})"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.long_term_items", description=__doc__)
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server URL; default: embedded, temporary")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--items-per-user", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--replay",
        type=Path,
        default=LOCOMO_DEV,
        help="a LoCoMo-format file with `observation` and `session_summary` (default: ../shared/eval-data/"
        "locomo_dev.json beside the project): the tier loaded with its facts through the replay summarizer",
    )
    parser.add_argument("--no-replay", action="store_true", help="skip the replayed model output")
    args = parser.parse_args(argv)
    server_url = args.database_url
    if server_url is None:
        from memory_agent.db.embedded import scratch_data_dir, start_embedded_postgres

        print("[bench] starting the embedded PostgreSQL (fresh data directory)", file=sys.stderr, flush=True)
        server_url = start_embedded_postgres(scratch_data_dir("memory_agent_bench_"), cleanup_mode="delete")
    name, url = create_database(server_url, "ltm")
    try:
        results = asyncio.run(measure(url, args.calls, args.users, args.items_per_user))
    finally:
        drop_database(server_url, name)
    if args.no_replay:
        results["replay"] = "not asked for (--no-replay)"
    elif not args.replay.exists():
        results["replay"] = f"{args.replay.name} is absent (LoCoMo, CC BY-NC 4.0: never part of this repository)"
        print(f"[bench] replayed model output skipped: {results['replay']}", file=sys.stderr, flush=True)
    else:
        print(f"[bench] replaying {args.replay.name} through the service (3 loads)", file=sys.stderr, flush=True)
        results["replay"] = replay = asyncio.run(replay_stage(server_url, args.replay))
        # Against a baseline of the same run: a shared machine's load moves both alike.
        cost = replay["write_cost"]
        cost["p50_vs_remember_10_new"] = round(cost["ms_per_version"]["p50"] / results["remember_10_new"]["p50_ms"], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(render(results) + "\n", encoding="utf-8")
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
