"""`make bench`: memory_agent against (a) full history + PostgresSaver and (b) SummarizationMiddleware.

Everything runs in this one process on one embedded PostgreSQL (a fresh data directory, deleted at exit),
each system on its own database, with the same scripted conversation and the same fake chat model.
Stages: steady (many rounds, zero-latency model), slow model, round-start load at several conversation
lengths, many concurrent conversations; then observability (`stats`, `inspect`, `at` on 100,000 generated
conversations, benchmarks/observability.py). Results go to benchmarks/results/latest.{json,md,png};
`--only observability` runs that stage alone and writes benchmarks/results/observability.{json,md};
`--only model_side` the model-side stage (what each system sends its models, and its price: benchmarks/model_side.py),
written to benchmarks/results/model_side.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import platform
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks.fakes import FakeChatModel, user_message
from benchmarks.model_side import model_side_stage
from benchmarks.model_side_report import render_model_side
from benchmarks.observability import observability_stage
from benchmarks.observability import render_markdown as render_observability
from benchmarks.recall import recall_stage
from benchmarks.recall import render as render_recall
from benchmarks.report import ratio_table, readme_with_results, render_markdown, render_plot
from benchmarks.systems import MemoryAgentSystem, System, all_systems, chat_graph, create_database, drop_database
from memory_agent.testing import NoopMemory

RESULTS_DIR = Path(__file__).parent / "results"


@dataclass
class BenchConfig:
    rounds: int = 1000  # steady stage, zero-latency model
    block_rounds: int = 50  # steady stage: systems take turns in blocks of this many rounds
    warmup_rounds: int = 5  # on a separate conversation, before any stage, for every system
    token_round: int = 200  # the round whose prompt tokens the target compares
    slow_rounds: int = 60
    slow_latency_s: float = 0.3
    load_lengths: tuple[int, ...] = (10, 100, 1000, 10000)
    load_repeats: int = 30
    conversations: int = 1000
    concurrent_rounds: int = 20
    # Concurrent stage for the baselines: AsyncPostgresSaver serializes every statement behind one lock, so
    # their throughput is flat beyond a few conversations and 1,000 × 20 rounds would take over 10 minutes.
    baseline_conversations: int | None = 50
    database_url: str | None = None  # a server URL (databases are created on it); default: embedded
    out_dir: Path = field(default_factory=lambda: RESULTS_DIR)
    plot: bool = True
    floor_repeats: int = 300  # floors: rounds of the bare and no-op graphs; statements and summaries use fewer
    # Observability stage: generated conversations (2 messages and 1 round_metrics row a round), timed runs.
    obs_conversations: int = 100_000
    obs_rounds: int = 10
    obs_repeats: int = 7
    only: str | None = None  # "observability", "recall" or "model_side": that stage alone
    model_side_rounds: int = 1000  # model-side stage: rounds of one conversation per system
    # memory_agent's settings beyond its defaults (MemorySettings fields), e.g. {"event_loop": "caller"}
    memory_settings: dict[str, str] = field(default_factory=dict)
    # recall stage: per user, conversations x turns turns and items items; recall_repeats passes over its queries
    recall_conversations: int = 50
    recall_turns: int = 100
    recall_items: int = 10_000
    recall_repeats: int = 40
    # the LoCoMo development split in the recall stage's quality figures, when its file is present: "e5" one app-path
    # evaluation (e5, or no embedder without the extra), "all" also no embedder and the replay summarizer (each
    # evaluation loads the split again: ~20 minutes more on 2 cores), "off" none
    locomo: str = "e5"


def checkpoint(server_url: str) -> None:
    """Flush the server's dirty pages now, so that one stage's writes (the full-history baseline writes
    hundreds of MB of checkpoints) are not flushed while the next stage is being timed."""
    try:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.Error as exc:  # not a superuser on an external server: measure without it
        log(f"CHECKPOINT skipped: {exc}")


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


# ---------------------------------------------------------------------------- stages


async def warm_up(system: System, config: BenchConfig) -> None:
    for n in range(1, config.warmup_rounds + 1):
        await system.round("warmup", n)
    if isinstance(system, MemoryAgentSystem):
        await system.drain()


class SteadyRun:
    """One system's share of the steady stage: its rounds, timings, prompt tokens and CPU time."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.overhead_ms: list[float] = []
        self.prompt_tokens: list[int] = []
        self.cpu_s = 0.0
        self.calls_before = system.summarizer_stats.calls
        self.tokens_before = system.summarizer_stats.input_tokens

    async def block(self, first: int, last: int) -> None:
        system = self.system
        cpu_started = time.process_time()
        for n in range(first, last + 1):
            started = time.perf_counter()
            await system.round("steady", n)
            self.overhead_ms.append((time.perf_counter() - started) * 1000)
            self.prompt_tokens.append(count_tokens_approximately(system.chat.last_input))  # outside the timing
        if isinstance(system, MemoryAgentSystem):
            # Background summaries are part of this system's cost, and must not run into the next block.
            await system.drain()
        self.cpu_s += time.process_time() - cpu_started

    def result(self, config: BenchConfig) -> dict[str, Any]:
        overhead_ms, prompt_tokens = self.overhead_ms, self.prompt_tokens
        token_round = min(config.token_round, config.rounds)
        return {
            "rounds": config.rounds,
            "overhead_ms": overhead_ms,
            "prompt_tokens": prompt_tokens,
            "overhead_median_ms": median(overhead_ms),
            "overhead_first20_median_ms": median(overhead_ms[:20]),
            "overhead_last20_median_ms": median(overhead_ms[-20:]),
            "overhead_last20_over_first20": median(overhead_ms[-20:]) / median(overhead_ms[:20]),
            "overhead_p99_ms": percentile(overhead_ms, 99),
            "cpu_ms_per_round": self.cpu_s * 1000 / config.rounds,
            "token_round": token_round,
            "prompt_tokens_at_token_round": prompt_tokens[token_round - 1],
            "prompt_tokens_last": prompt_tokens[-1],
            "prompt_tokens_mean": statistics.fmean(prompt_tokens),
            "summarizer_calls": self.system.summarizer_stats.calls - self.calls_before,
            "summarizer_input_tokens": self.system.summarizer_stats.input_tokens - self.tokens_before,
        }


async def steady_stage(systems: list[System], config: BenchConfig) -> dict[str, dict[str, Any]]:
    """`rounds` back-to-back rounds of one conversation per system, zero-latency model.

    The systems take turns in blocks of `block_rounds` rounds, so a change in the machine's load (other
    processes) lands on all of them rather than on whichever ran at the time.
    """
    runs = [SteadyRun(system) for system in systems]
    for system in systems:
        system.set_latency(0.0)
    gc.collect()
    for first in range(1, config.rounds + 1, config.block_rounds):
        last = min(config.rounds, first + config.block_rounds - 1)
        for run in runs:
            await run.block(first, last)
        if last % 200 == 0 or last == config.rounds:
            log(
                "  steady: round "
                + str(last)
                + ": "
                + ", ".join(
                    f"{run.system.name} {median(run.overhead_ms[-config.block_rounds :]):.1f} ms" for run in runs
                )
            )
    return {run.system.name: run.result(config) for run in runs}


async def slow_stage(system: System, config: BenchConfig) -> dict[str, Any]:
    """`slow_rounds` rounds with a chat model (and summarizer) that answer after `slow_latency_s`."""
    system.set_latency(config.slow_latency_s)
    round_ms: list[float] = []
    try:
        for n in range(1, config.slow_rounds + 1):
            started = time.perf_counter()
            await system.round("slow", n)
            round_ms.append((time.perf_counter() - started) * 1000)
        if isinstance(system, MemoryAgentSystem):
            await system.drain()
    finally:
        system.set_latency(0.0)
    latency_ms = config.slow_latency_s * 1000
    return {
        "rounds": config.slow_rounds,
        "round_ms": round_ms,
        "model_latency_ms": latency_ms,
        "round_median_ms": median(round_ms),
        "round_p99_ms": percentile(round_ms, 99),
        "p99_over_latency": percentile(round_ms, 99) / latency_ms,
        "median_over_latency": median(round_ms) / latency_ms,
    }


async def load_stage(system: System, config: BenchConfig, server_url: str | None = None) -> dict[str, Any]:
    """Round-start load latency at several conversation lengths.

    Every length is seeded first; then the lengths are read in turn, `load_repeats` times each, so that
    background work after a large seed (autovacuum, a checkpoint) lands on every length alike.
    """
    for length in config.load_lengths:
        await system.seed(f"load-{length}", length)
    if server_url:
        checkpoint(server_url)  # the seeding's writes are flushed before the reads are timed
    samples: dict[int, list[float]] = {length: [] for length in config.load_lengths}
    for _ in range(config.load_repeats):
        for length in config.load_lengths:
            started = time.perf_counter()
            await system.load(f"load-{length}")
            samples[length].append((time.perf_counter() - started) * 1000)
    result: dict[str, Any] = {
        str(length): {"median_ms": median(values), "p99_ms": percentile(values, 99)}
        for length, values in samples.items()
    }
    first, last = str(config.load_lengths[0]), str(config.load_lengths[-1])
    result["longest_over_shortest"] = result[last]["median_ms"] / result[first]["median_ms"]
    return result


class ConnectionSampler:
    """Samples pg_stat_activity for one database from its own thread; `peak` is the largest count seen."""

    def __init__(self, server_url: str, dbname: str, interval_s: float = 0.02) -> None:
        self.server_url, self.dbname, self.interval_s = server_url, dbname, interval_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            while not self._stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    [self.dbname],
                ).fetchone()
                self.peak = max(self.peak, int(row[0]))
                self._stop.wait(self.interval_s)

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


async def _conversations(system: System, prefix: str, conversations: int, rounds: int) -> dict[str, Any]:
    """`conversations` conversations at once, `rounds` rounds each: rounds/s, round latency, failed rounds."""
    round_ms: list[float] = []
    errors: dict[str, int] = {}

    async def conversation(index: int) -> None:
        for n in range(1, rounds + 1):
            started = time.perf_counter()
            try:
                await system.round(f"{prefix}{index}", n)
            except Exception as exc:  # counted and reported; the conversation goes on
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                continue
            round_ms.append((time.perf_counter() - started) * 1000)

    gc.collect()
    started = time.perf_counter()
    await asyncio.gather(*(conversation(i) for i in range(conversations)))
    elapsed = time.perf_counter() - started
    return {
        "conversations": conversations,
        "rounds_per_s": len(round_ms) / elapsed,
        "elapsed_s": elapsed,
        "round_median_ms": median(round_ms),
        "round_p99_ms": percentile(round_ms, 99),
        "failed_rounds": sum(errors.values()),
        "errors": errors,
    }


async def concurrent_stage(system: System, config: BenchConfig, server_url: str) -> dict[str, Any]:
    """`conversations` conversations at once, `concurrent_rounds` rounds each, zero-latency model.

    A round's latency under load is its wait for a pooled connection: rounds in flight over rounds per second
    (Little's law), so latencies compare only at the same number of conversations. The baselines run
    `baseline_conversations`; memory_agent runs that many too (`same_concurrency`, the latency rows' figures),
    then `conversations`.
    """
    system.set_latency(0.0)
    conversations = config.conversations
    same = config.baseline_conversations if config.baseline_conversations is not None else conversations
    if not isinstance(system, MemoryAgentSystem):
        conversations = same
    prefix = "conc-"
    same_concurrency = None
    if conversations != same:
        same_concurrency = await _conversations(system, "same-", same, config.concurrent_rounds)
        if isinstance(system, MemoryAgentSystem):
            await system.drain()  # its summaries do not run into the next pass
    with ConnectionSampler(server_url, system.dbname) as sampler:
        result: dict[str, Any] = {
            **await _conversations(system, prefix, conversations, config.concurrent_rounds),
            "rounds_each": config.concurrent_rounds,
        }
        if isinstance(system, MemoryAgentSystem):
            result["summary_lag_before_drain"] = await system.summary_lag(prefix)
            drain_started = time.perf_counter()
            result["drained"] = await system.drain()
            result["drain_s"] = time.perf_counter() - drain_started
            result["summary_lag_after_drain"] = await system.summary_lag(prefix)
            result["versions"] = await system.version_check(prefix)
            result["duplicate_versions"] = result["versions"]["duplicates"]
    result["peak_connections"] = sampler.peak
    keys = ("conversations", "rounds_per_s", "round_median_ms", "round_p99_ms", "failed_rounds")
    result["same_concurrency"] = {k: (same_concurrency or result)[k] for k in keys}
    return result


async def _median_round_ms(app: Any, rounds: int, config: dict[str, Any] | None = None) -> float:
    samples = []
    for n in range(1, rounds + 1):
        started = time.perf_counter()
        await app.ainvoke({"messages": [HumanMessage(user_message(n))]}, config)
        samples.append((time.perf_counter() - started) * 1000)
    return median(samples[rounds // 10 :])


async def _database_floors(server_url: str, repeats: int = 200) -> dict[str, float]:
    """One round trip (SELECT 1) and one committed single-row INSERT (a WAL flush), medians in ms."""
    dbname, url = create_database(server_url, "floor")
    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("CREATE TABLE commit_probe (n integer)")
            trips, commits = [], []
            for n in range(repeats):
                started = time.perf_counter()
                await conn.execute("SELECT 1")
                trips.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await conn.execute("INSERT INTO commit_probe VALUES (%s)", [n])
                commits.append((time.perf_counter() - started) * 1000)
        return {"round_trip_ms": median(trips), "commit_ms": median(commits)}
    finally:
        drop_database(server_url, dbname)


async def measure_floors(server_url: str, rounds: int = 300) -> dict[str, Any]:
    """What no system can go below on this machine: LangGraph itself, a round trip, a commit."""
    from memory_agent import with_memory

    floors: dict[str, Any] = {"bare_graph_round_ms": await _median_round_ms(chat_graph(FakeChatModel()), rounds)}
    try:
        wrapped = with_memory(chat_graph(FakeChatModel()), NoopMemory())
        floors["with_memory_noop_round_ms"] = await _median_round_ms(
            wrapped, rounds, {"configurable": {"thread_id": "floor"}}
        )
    except Exception as exc:  # the wrapper's contract changed: report, do not fail the run
        log(f"with_memory floor not measured: {type(exc).__name__}: {exc}")
        floors["with_memory_noop_round_ms"] = None
    floors.update(await _database_floors(server_url, max(10, rounds * 2 // 3)))
    floors["summary_call_ms"] = await _summary_call_floor(max(10, rounds // 3))
    floors["tracing_spans_no_sdk_us"] = _tracing_floor()
    return floors


def _tracing_floor(repeats: int = 2000) -> float:
    """What a round's spans cost with opentelemetry-api alone (no SDK: non-recording spans), in µs: a round
    start, its recall and a round end, with their attributes set, as memory_agent/tracing.py makes them."""
    import time

    from memory_agent.tracing import memory_span, record

    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for name in ("memory_agent.round_start", "memory_agent.recall", "memory_agent.round_end"):
            with memory_span(name, "search_memory", tenant_id="t", user_id="u", conversation_id="c") as span:
                record(span, **{"memory_agent.gap.size": 4, "gen_ai.memory.record.count": 3})
        samples.append((time.perf_counter() - started) * 1e6)
    return median(samples)


async def _summary_call_floor(repeats: int = 100) -> float:
    """One MemoryAgent.summarize call on the zero-latency offline summarizer: the client-side CPU of a
    summary (prompt, structured-output chain, parsing), without the database."""
    from benchmarks.fakes import BenchOfflineSummaryModel
    from benchmarks.systems import scripted_history
    from memory_agent.summarize.agent import MemoryAgent, SequencedMessage

    agent = MemoryAgent(BenchOfflineSummaryModel())
    window = [SequencedMessage(n, m) for n, m in enumerate(scripted_history(14))]
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await agent.summarize(
            previous_summary="- [seq 0] user: earlier",
            base_end_sequence=9,
            new_messages=window[10:],
            window_start_seq=0,
            window_end_seq=13,
        )
        samples.append((time.perf_counter() - started) * 1000)
    return median(samples[repeats // 10 :])


# ---------------------------------------------------------------------------- orchestration


def library_versions() -> dict[str, str]:
    from importlib.metadata import version

    names = ["langgraph", "langchain", "langchain-core", "langgraph-checkpoint-postgres", "psycopg", "memory-agent"]
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except Exception:  # pragma: no cover - a missing optional package
            found[name] = "missing"
    return found


async def run_all(config: BenchConfig, server_url: str) -> dict[str, Any]:
    systems = all_systems(config.memory_settings)
    results: dict[str, Any] = {
        "meta": {
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "libraries": library_versions(),
            "config": {k: v for k, v in asdict(config).items() if k not in ("database_url", "out_dir")},
            "chat_model": "fake chat model: answers the last user message; zero latency (steady, load, concurrent) "
            f"or {config.slow_latency_s * 1000:.0f} ms (slow stage)",
            "summarizers": {
                "memory_agent": "OfflineSummaryModel (extractive, through MemoryAgent's structured-output call), "
                "with the chat model's latency",
                "summarization_middleware": "fake chat model returning one 90-character line for each of the last 14 "
                "messages, with the chat model's latency",
            },
            "labels": {s.name: s.label for s in systems},
        },
        "systems": {},
    }
    log("floors: bare graph, with_memory around a no-op memory, round trip, commit")
    results["meta"]["floors"] = await measure_floors(server_url, config.floor_repeats)
    try:
        for system in systems:
            log(f"{system.name}: opening")
            await system.open(server_url)
            await warm_up(system, config)
            results["systems"][system.name] = {"label": system.label}
        checkpoint(server_url)
        log(f"steady stage: {config.rounds} rounds each, zero-latency model, blocks of {config.block_rounds}")
        for name, steady in (await steady_stage(systems, config)).items():
            results["systems"][name]["steady"] = steady
        for system in systems:
            entry = results["systems"][system.name]
            checkpoint(server_url)
            log(f"{system.name}: slow stage ({config.slow_rounds} rounds, {config.slow_latency_s * 1000:.0f} ms model)")
            entry["slow"] = await slow_stage(system, config)
            checkpoint(server_url)
            log(f"{system.name}: load stage {list(config.load_lengths)}")
            entry["load"] = await load_stage(system, config, server_url)
            checkpoint(server_url)
            log(f"{system.name}: concurrent stage")
            entry["concurrent"] = await concurrent_stage(system, config, server_url)
            log(f"{system.name}: {entry['concurrent']['rounds_per_s']:.0f} rounds/s concurrent")
    finally:
        for system in systems:
            if getattr(system, "dbname", ""):
                await system.close()
    results["ratios"], results["targets"] = ratio_table(results)
    checkpoint(server_url)
    log(f"model-side stage: {config.model_side_rounds} rounds per system, app prompt and tools, priced")
    results["model_side"] = await model_side_stage(server_url, config.model_side_rounds, config.memory_settings)
    checkpoint(server_url)
    # Synchronous (it opens a MemoryService as the CLI does): off this event loop.
    results["observability"] = await asyncio.to_thread(run_observability, config, server_url)
    results["meta"]["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return results


def run_observability(config: BenchConfig, server_url: str) -> dict[str, Any]:
    """The observability stage on a database of its own, dropped afterwards."""
    dbname, url = create_database(server_url, "observability")
    try:
        return observability_stage(url, config.obs_conversations, config.obs_rounds, config.obs_repeats)
    finally:
        drop_database(server_url, dbname)


def write_results(results: dict[str, Any], out_dir: Path, plot: bool = True) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    if "systems" not in results:  # --only observability or model_side: the full run's files stay as they are
        stage = "observability" if "observability" in results else "model_side"
        render = render_observability if stage == "observability" else render_model_side
        (out_dir / f"{stage}.json").write_text(json.dumps(results, indent=1) + "\n")
        (out_dir / f"{stage}.md").write_text(render(results[stage]))
        return
    (out_dir / "latest.json").write_text(json.dumps(results, indent=1) + "\n")
    markdown = render_markdown(results)
    if "model_side" in results:
        markdown += "\n" + render_model_side(results["model_side"])
    if "observability" in results:
        markdown += "\n" + render_observability(results["observability"])
    (out_dir / "latest.md").write_text(markdown)
    if out_dir.resolve() == RESULTS_DIR.resolve():  # the repository's results: the README shows them
        readme = RESULTS_DIR.parent / "README.md"
        readme.write_text(readme_with_results(readme.read_text(), markdown))
    if plot:
        render_plot(results, out_dir / "latest.png")


def run(config: BenchConfig) -> dict[str, Any]:
    """Run every stage for every system (or only the one named); write the results; return them."""
    if config.database_url:
        server_url = config.database_url
    else:
        from memory_agent.db.embedded import scratch_data_dir, start_embedded_postgres

        data_dir = scratch_data_dir("memory_agent_bench_")
        log("starting the embedded PostgreSQL (fresh data directory)")
        server_url = start_embedded_postgres(data_dir, cleanup_mode="delete")
    meta = {"started_at": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count()}
    if config.only == "observability":
        results: dict[str, Any] = {"meta": meta, "observability": run_observability(config, server_url)}
    elif config.only == "recall":
        results = {"meta": meta}
    elif config.only == "model_side":
        results = {
            "meta": {**meta, "memory_settings": config.memory_settings},
            "model_side": asyncio.run(model_side_stage(server_url, config.model_side_rounds, config.memory_settings)),
        }
    else:
        results = asyncio.run(run_all(config, server_url))
    if config.only in (None, "recall"):
        log("recall stage: evaluation on the synthetic dataset, latency at 10,000 items and 5,000 turns per user")
        results["recall"] = asyncio.run(
            recall_stage(
                server_url,
                locomo=config.locomo,
                conversations=config.recall_conversations,
                turns=config.recall_turns,
                items=config.recall_items,
                repeats=config.recall_repeats,
            )
        )
        config.out_dir.mkdir(parents=True, exist_ok=True)
        (config.out_dir / "recall.md").write_text(render_recall(results["recall"]) + "\n")
    if config.only != "recall":
        write_results(results, config.out_dir, config.plot)
    return results


def parse_args(argv: list[str] | None) -> BenchConfig:
    defaults = BenchConfig()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--block-rounds", type=int, default=defaults.block_rounds)
    parser.add_argument("--token-round", type=int, default=defaults.token_round)
    parser.add_argument("--slow-rounds", type=int, default=defaults.slow_rounds)
    parser.add_argument("--slow-latency-ms", type=float, default=defaults.slow_latency_s * 1000)
    parser.add_argument(
        "--load-lengths", type=lambda s: tuple(int(x) for x in s.split(",")), default=defaults.load_lengths
    )
    parser.add_argument("--load-repeats", type=int, default=defaults.load_repeats)
    parser.add_argument("--conversations", type=int, default=defaults.conversations)
    parser.add_argument("--concurrent-rounds", type=int, default=defaults.concurrent_rounds)
    parser.add_argument("--baseline-conversations", type=int, default=defaults.baseline_conversations)
    parser.add_argument("--warmup-rounds", type=int, default=defaults.warmup_rounds)
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server URL; default: embedded, temporary")
    parser.add_argument("--out", type=Path, default=defaults.out_dir)
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--obs-conversations", type=int, default=defaults.obs_conversations)
    parser.add_argument("--obs-rounds", type=int, default=defaults.obs_rounds)
    parser.add_argument("--obs-repeats", type=int, default=defaults.obs_repeats)
    parser.add_argument(
        "--only", choices=["observability", "recall", "model_side"], default=None, help="run one stage alone"
    )
    parser.add_argument("--model-side-rounds", type=int, default=defaults.model_side_rounds)
    parser.add_argument(
        "--locomo",
        choices=["e5", "all", "off"],
        default=defaults.locomo,
        help="the LoCoMo split's evaluations in the recall stage, when its file is present (default: e5 alone)",
    )
    parser.add_argument(
        "--memory-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a MemorySettings field for memory_agent, e.g. event_loop=caller (default: every default)",
    )
    args = parser.parse_args(argv)
    memory_settings = {}
    for item in args.memory_setting:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error(f"--memory-setting takes NAME=VALUE, got {item!r}")
        memory_settings[name] = value
    return BenchConfig(
        rounds=args.rounds,
        block_rounds=args.block_rounds,
        warmup_rounds=args.warmup_rounds,
        token_round=args.token_round,
        slow_rounds=args.slow_rounds,
        slow_latency_s=args.slow_latency_ms / 1000,
        load_lengths=args.load_lengths,
        load_repeats=args.load_repeats,
        conversations=args.conversations,
        concurrent_rounds=args.concurrent_rounds,
        baseline_conversations=args.baseline_conversations,
        database_url=args.database_url,
        out_dir=args.out,
        plot=not args.no_plot,
        obs_conversations=args.obs_conversations,
        obs_rounds=args.obs_rounds,
        obs_repeats=args.obs_repeats,
        only=args.only,
        model_side_rounds=args.model_side_rounds,
        memory_settings=memory_settings,
        locomo=args.locomo,
    )


def main(argv: list[str] | None = None) -> int:
    # The command's output is its figures; set here, not in run(), which a test calls in a process of its own tests.
    logging.getLogger("memory_agent").setLevel(logging.ERROR)
    config = parse_args(argv)
    started = time.perf_counter()
    results = run(config)
    if "systems" in results:
        print(render_markdown(results, headline_only=True))
    if "model_side" in results:
        print(render_model_side(results["model_side"]))
    if "observability" in results:
        print(render_observability(results["observability"]))
    if "recall" in results:
        print(render_recall(results["recall"]))
    print(f"Results in {config.out_dir} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
