"""Turns the benchmark's results into ratios, target verdicts, a markdown table and a PNG plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

SUBJECT = "memory_agent"
BASELINES = ("full_history", "summarization_middleware")
SHORT = {
    "memory_agent": "memory_agent",
    "full_history": "(a) full history",
    "summarization_middleware": "(b) SummarizationMiddleware",
}

FLOOR_LABELS = {
    "bare_graph_round_ms": "one-node graph alone (no persistence)",
    "with_memory_noop_round_ms": "the same graph under with_memory with a no-op memory (no database)",
    "round_trip_ms": "one PostgreSQL round trip (SELECT 1)",
    "commit_ms": "one committed single-row INSERT",
    "summary_call_ms": "one summarizer call through MemoryAgent on the zero-latency offline model (no database)",
}


def _get(entry: dict[str, Any], path: str) -> Any:
    value: Any = entry
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def metric_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """(path inside a system's entry, label) for every row of the table, in order."""
    config = results["meta"]["config"]
    token_round = min(config["token_round"], config["rounds"])
    rows = [
        ("steady.overhead_median_ms", f"Round overhead, median of {config['rounds']} rounds (ms)"),
        ("steady.overhead_first20_median_ms", "Round overhead, median of first 20 rounds (ms)"),
        ("steady.overhead_last20_median_ms", "Round overhead, median of last 20 rounds (ms)"),
        ("steady.overhead_last20_over_first20", "Last-20 median / first-20 median"),
        ("steady.overhead_p99_ms", "Round overhead, p99 (ms)"),
        ("steady.cpu_ms_per_round", "Process CPU per round, this process's threads (ms)"),
        ("steady.prompt_tokens_at_token_round", f"Prompt tokens at round {token_round}"),
        ("steady.prompt_tokens_last", f"Prompt tokens at round {config['rounds']}"),
        ("steady.prompt_tokens_mean", "Prompt tokens per round, mean"),
        ("steady.summarizer_calls", f"Summarizer calls in {config['rounds']} rounds"),
        ("steady.summarizer_input_tokens", f"Summarizer input tokens in {config['rounds']} rounds"),
        ("slow.round_median_ms", f"Round time, median, {config['slow_latency_s'] * 1000:.0f} ms model (ms)"),
        ("slow.p99_over_latency", f"p99 round / model latency ({config['slow_rounds']} rounds)"),
    ]
    for length in config["load_lengths"]:
        rows.append((f"load.{length}.median_ms", f"Round-start load at {length:,} messages, median (ms)"))
    rows.append(
        (
            "load.longest_over_shortest",
            f"Load at {config['load_lengths'][-1]:,} / load at {config['load_lengths'][0]:,} messages",
        )
    )
    # Latency under load is queueing (rounds in flight / rounds per second): compared at one number of
    # conversations for every system, the baselines' (memory_agent's own count: its entry's concurrent figures).
    same = config["baseline_conversations"] or config["conversations"]
    rows += [
        ("concurrent.rounds_per_s", "Concurrent conversations: rounds/s"),
        ("concurrent.same_concurrency.rounds_per_s", f"Concurrent, {same:,} conversations each system: rounds/s"),
        (
            "concurrent.same_concurrency.round_median_ms",
            f"Concurrent, {same:,} conversations each system: round latency, median (ms)",
        ),
        (
            "concurrent.same_concurrency.round_p99_ms",
            f"Concurrent, {same:,} conversations each system: round latency, p99 (ms)",
        ),
        ("concurrent.failed_rounds", "Concurrent: failed rounds"),
        ("concurrent.peak_connections", "Concurrent: peak database connections"),
        ("concurrent.summary_lag_after_drain.mean", "Concurrent: summary lag after drain, mean (messages)"),
        ("concurrent.summary_lag_after_drain.max", "Concurrent: summary lag after drain, max (messages)"),
        ("concurrent.drain_s", "Concurrent: time to drain summaries after the last round (s)"),
        ("concurrent.duplicate_versions", "Concurrent: duplicate memory versions"),
    ]
    return rows


def _ratio(value: Any, baseline: Any) -> float | None:
    if not isinstance(value, (int, float)) or not isinstance(baseline, (int, float)):
        return None
    if baseline == 0 or math.isnan(baseline) or math.isnan(value):
        return None
    return value / baseline


def ratio_table(results: dict[str, Any]) -> tuple[dict[str, dict[str, float | None]], list[dict[str, Any]]]:
    """Ratios memory_agent / baseline for every row, and the targets (the overhead at a quarter and at a half of (b)'s)."""
    systems = results["systems"]
    subject = systems[SUBJECT]
    ratios: dict[str, dict[str, float | None]] = {}
    for path, _ in metric_rows(results):
        ratios[path] = {
            f"vs_{name}": _ratio(_get(subject, path), _get(systems.get(name, {}), path)) for name in BASELINES
        }
    config = results["meta"]["config"]
    overhead_ratio = ratios["steady.overhead_median_ms"]["vs_summarization_middleware"]
    token_ratio = ratios["steady.prompt_tokens_at_token_round"]["vs_full_history"]
    token_round = min(config["token_round"], config["rounds"])
    shortest, longest = config["load_lengths"][0], config["load_lengths"][-1]
    checks = [
        (
            "memory_agent round overhead <= 1/4 of (b)'s (medians, zero-latency model)",
            overhead_ratio,
            0.25,
            f"{_get(subject, 'steady.overhead_median_ms'):.2f} ms vs "
            f"{_get(systems['summarization_middleware'], 'steady.overhead_median_ms'):.2f} ms",
        ),
        (
            "memory_agent round overhead <= 1/2 of (b)'s (medians, zero-latency model)",
            overhead_ratio,
            0.5,
            f"{_get(subject, 'steady.overhead_median_ms'):.2f} ms vs "
            f"{_get(systems['summarization_middleware'], 'steady.overhead_median_ms'):.2f} ms",
        ),
        (
            "last-20 median / first-20 median <= 1.2",
            _get(subject, "steady.overhead_last20_over_first20"),
            1.2,
            f"{_get(subject, 'steady.overhead_last20_median_ms'):.2f} ms / "
            f"{_get(subject, 'steady.overhead_first20_median_ms'):.2f} ms",
        ),
        (
            f"p99 round / model latency <= 1.05 ({config['slow_latency_s'] * 1000:.0f} ms model)",
            _get(subject, "slow.p99_over_latency"),
            1.05,
            f"p99 {_get(subject, 'slow.round_p99_ms'):.1f} ms over {config['slow_rounds']} rounds",
        ),
        (
            f"load at {longest:,} / at {shortest:,} messages <= 1.2",
            _get(subject, "load.longest_over_shortest"),
            1.2,
            f"{_get(subject, f'load.{longest}.median_ms'):.2f} ms / {_get(subject, f'load.{shortest}.median_ms'):.2f} ms",
        ),
        (
            f"prompt tokens at round {token_round} <= 1/20 of (a)'s",
            token_ratio,
            0.05,
            f"{_get(subject, 'steady.prompt_tokens_at_token_round')} vs "
            f"{_get(systems['full_history'], 'steady.prompt_tokens_at_token_round')} tokens",
        ),
    ]
    targets = [
        {
            "target": name,
            "value": value,
            "limit": limit,
            "holds": value is not None and value <= limit,
            "detail": detail,
        }
        for name, value, limit, detail in checks
    ]
    return ratios, targets


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.3f}"
    return str(value)


def _fmt_ratio(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}×" if value >= 0.1 else f"{value:.3f}×"


def render_markdown(results: dict[str, Any], headline_only: bool = False) -> str:
    systems = results["systems"]
    meta = results["meta"]
    config = meta["config"]
    lines: list[str] = []
    if not headline_only:
        lines += [
            "# Benchmark results",
            "",
            f"Run {meta['started_at']} on {meta['cpus']} CPUs, Python {meta['python']}; "
            + ", ".join(f"{k} {v}" for k, v in meta["libraries"].items())
            + ".",
            "",
            "Systems: " + "; ".join(f"**{SHORT[n]}** = {systems[n]['label']}" for n in systems) + ".",
            f"Chat model: {meta['chat_model']}.",
            "Summarizers: " + "; ".join(f"{SHORT[k]}: {v}" for k, v in meta["summarizers"].items()) + ".",
            "memory_agent settings: "
            + (
                ", ".join(f"{k}={v}" for k, v in settings.items())
                if (settings := meta.get("config", {}).get("memory_settings"))
                else "its defaults"
            )
            + ".",
            "Floors measured in the same run: "
            + "; ".join(f"{FLOOR_LABELS[k]} {_fmt(v)} ms" for k, v in meta["floors"].items() if k in FLOOR_LABELS)
            + (
                f"; a round's three spans with opentelemetry-api alone (no SDK) "
                f"{_fmt(meta['floors']['tracing_spans_no_sdk_us'])} µs"
                if meta["floors"].get("tracing_spans_no_sdk_us") is not None
                else ""
            )
            + ".",
            "",
        ]
    conc = {n: _get(systems[n], "concurrent.conversations") for n in systems}
    header = ["Metric", *(SHORT[n] for n in systems), *(f"memory_agent ÷ {SHORT[b].split(' ')[0]}" for b in BASELINES)]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---", *(["---:"] * (len(header) - 1))]) + "|")
    ratios = results["ratios"]
    for path, label in metric_rows(results):
        cells = [label, *(_fmt(_get(systems[n], path)) for n in systems)]
        cells += [_fmt_ratio(ratios[path][f"vs_{b}"]) for b in BASELINES]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"Overhead = round wall time minus the model's latency (zero here). Slow stage: {config['slow_rounds']} rounds "
        f"(not {config['rounds']}) to fit the time. Concurrent: "
        + ", ".join(f"{SHORT[n]} {conc[n]:,} conversations" for n in systems if conc[n] is not None)
        + f" × {config['concurrent_rounds']} rounds"
        + (
            f"; memory_agent's round latency at its {conc[SUBJECT]:,}: median {_fmt(own_median)} ms, p99 "
            f"{_fmt(_get(systems[SUBJECT], 'concurrent.round_p99_ms'))} ms (rounds in flight / rounds per second)"
            if (own_median := _get(systems[SUBJECT], "concurrent.round_median_ms")) is not None
            else ""
        )
        + ". Ratios below 1 favour memory_agent except for rounds/s."
    )
    lines += ["", "| Target | Value | Limit | Holds | Numbers |", "|---|---:|---:|---|---|"]
    for t in results["targets"]:
        lines.append(
            f"| {t['target']} | {_fmt(t['value'])} | {_fmt(t['limit'])} | {'holds' if t['holds'] else 'does not hold'} "
            f"| {t['detail']} |"
        )
    lines.append("")
    if not headline_only:
        lines += ["![overhead and prompt tokens per round](latest.png)", ""]
    return "\n".join(lines)


def _rolling_median(values: list[float], window: int) -> list[float]:
    import statistics

    half = window // 2
    return [statistics.median(values[max(0, i - half) : i + half + 1]) for i in range(len(values))]


def render_plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = results["systems"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    for name, entry in systems.items():
        overhead = entry["steady"]["overhead_ms"]
        tokens = entry["steady"]["prompt_tokens"]
        rounds = list(range(1, len(overhead) + 1))
        window = 9 if len(overhead) >= 50 else 1
        top.plot(rounds, _rolling_median(overhead, window), label=SHORT[name], linewidth=1.4)
        bottom.plot(rounds, tokens, label=SHORT[name], linewidth=1.4)
    top.set_ylabel("overhead per round (ms)\nrolling median of 9")
    top.set_title("Per-round overhead, zero-latency chat model")
    top.set_yscale("log")
    top.grid(True, which="both", alpha=0.3)
    top.legend()
    bottom.set_ylabel("prompt tokens the chat model receives")
    bottom.set_xlabel("round")
    bottom.set_title("Prompt tokens per round")
    bottom.set_yscale("log")
    bottom.grid(True, which="both", alpha=0.3)
    bottom.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


README_BLOCK = (
    "<!-- latest results: written by `make bench` from results/latest.md -->",
    "<!-- end of latest results -->",
)


def readme_with_results(readme: str, markdown: str) -> str:
    """benchmarks/README.md with its latest-results block replaced by a run's markdown (latest.md): the page's
    title is the README's own, and the plot is beside latest.md in results/."""
    start, end = README_BLOCK
    head, found, rest = readme.partition(start)
    if not found or end not in rest:
        raise ValueError(f"benchmarks/README.md has no block between {start!r} and {end!r}")
    tail = rest.split(end, 1)[1]
    body = markdown.split("\n", 1)[1] if markdown.startswith("# ") else markdown
    body = body.replace("](latest.png)", "](results/latest.png)").strip()
    return f"{head}{start}\n{body}\n{end}{tail}"
