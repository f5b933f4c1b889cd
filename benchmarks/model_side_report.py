"""The model-side stage's results as markdown (benchmarks/model_side.py): per system, what it sends its models and
what that costs, and the targets against (b)."""

from __future__ import annotations

from typing import Any

from benchmarks.prices import PRICE_SETS

COLUMNS = {
    "memory_agent": "memory_agent",
    "memory_agent_recall": "memory_agent, recall on",
    "full_history": "(a) full history",
    "summarization_middleware": "(b) SummarizationMiddleware",
    "no_history_floor": "floor: no history",
}


def _rows() -> list[tuple[str, str]]:
    rows = [
        ("summarizer_calls_per_1000_rounds", "Summarizer calls per 1,000 rounds"),
        ("summarizer_input_tokens_per_1000_rounds", "Summarizer input tokens per 1,000 rounds (tool schema included)"),
        ("summarizer_tool_schema_tokens_per_1000_rounds", "… of which the summary's tool schema"),
        ("summarizer_output_tokens_per_1000_rounds", "Summarizer output tokens per 1,000 rounds"),
        ("prompt_tokens_per_round", "Chat prompt tokens per round, mean (app prompt and tools included)"),
        ("conversation_prompt_tokens_per_round", "… the conversation's part (memory, gap, recall, question)"),
        ("prefix_kept_share", "Rounds whose input extends the previous round's but its last user message"),
    ]
    for prices in PRICE_SETS:
        rows.append((f"cached_input_share.{prices.name}", f"Chat input read from cache, {prices.name}"))
    for prices in PRICE_SETS:
        rows.append((f"dollars_per_1000_rounds.{prices.name}.total", f"Dollars per 1,000 rounds, {prices.name}"))
        for part in ("chat_input", "chat_output", "summarizer"):
            rows.append((f"dollars_per_1000_rounds.{prices.name}.{part}", f"… {part.replace('_', ' ')}"))
    return rows


def _value(entry: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        entry = entry.get(part) if isinstance(entry, dict) else None  # type: ignore[assignment]
    return entry


def _cell(value: Any, path: str) -> str:
    if not isinstance(value, (int, float)):
        return "—"
    if path.startswith("dollars"):
        return f"${value:.3f}"
    if "share" in path:
        return f"{value:.3f}"
    return f"{value:,.0f}"


def render_model_side(results: dict[str, Any]) -> str:
    """The stage as markdown: what each system sends, what it costs, the targets."""
    columns = [name for name in COLUMNS if name in results]
    lines = [
        f"Model side, {results['rounds']:,} rounds of one conversation per system, with an app's system prompt of "
        f"{results['app']['system_prompt_tokens']:,} tokens and {len(results['app']['tools'])} tools "
        "(memory_agent with recall on: its rounds name a user). Prices: "
        + "; ".join(
            f"{p['name']}: chat {p['chat']['model']} ${p['chat']['input']}/{p['chat']['cached_input']}/"
            f"{p['chat']['output']}, summarizer {p['summarizer']['model']} ${p['summarizer']['input']}/"
            f"{p['summarizer']['cached_input']}/{p['summarizer']['output']} per million input/cached input/output"
            + (
                f" (cache write ${p['chat']['cache_write']}/{p['summarizer']['cache_write']})"
                if p["chat"]["cache_write"]
                else ""
            )
            for p in results["price_sets"].values()
        )
        + f", read {next(iter(results['price_sets'].values()))['read_on']} (sources in benchmarks/prices.py).",
        "",
        "| Metric | " + " | ".join(COLUMNS[c] for c in columns) + " | memory_agent ÷ (b) |",
        "|---|" + "---:|" * (len(columns) + 1),
    ]
    for path, label in _rows():
        values = [_value(results[c], path) for c in columns]
        ours, theirs = (
            _value(results.get("memory_agent", {}), path),
            _value(results.get("summarization_middleware", {}), path),
        )
        ratio = f"{ours / theirs:.2f}×" if isinstance(ours, (int, float)) and theirs else "—"
        lines.append(f"| {label} | " + " | ".join(_cell(v, path) for v in values) + f" | {ratio} |")
    if "targets" in results:
        lines += ["", "| Target | Value | Limit | Holds |", "|---|---:|---:|---|"]
        for t in results["targets"]:
            lines.append(
                f"| {t['target']} | {t['value']:.2f} | {t['limit']} | {'holds' if t['holds'] else 'does not hold'} |"
            )
    return "\n".join(lines) + "\n"
