"""The observability commands: `inspect <thread_id>`, `at <thread_id> <round>` and `stats`.

Each opens the database of MemorySettings() (MEMORY_AGENT_DATABASE_URL, or the embedded one), reads
through memory_agent.observability and prints rich tables, or JSON with --json.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from memory_agent.cli.output import _cell, _key_values, _print_json, _read, _rows, compact_table, escape
from memory_agent.observability import reads as observability
from memory_agent.service import MemoryService


def inspect_versions(
    thread_id: str = typer.Argument(..., help="Conversation id (thread_id)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The memory version chain of a conversation (the design's 'Memory Table Evolution')."""

    async def read(memory: MemoryService) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return (
            await observability.conversation(memory.backend, thread_id),
            await observability.version_chain(memory.backend, thread_id),
        )

    summary, versions = _read(read)
    if as_json:
        _print_json({"conversation": summary, "versions": versions})
        return
    table = compact_table(f"Memory versions of {escape(thread_id)}")
    # Short columns never shrink; covers and error wrap on a narrow terminal; error only when a version has one.
    errors = any(version["error"] for version in versions)
    for column in ("id", "start", "end", "base_id", "status", "covers", "created", "gen ms", "error")[
        : 9 if errors else 8
    ]:
        wraps = column in ("covers", "error")
        table.add_column(
            column,
            no_wrap=not wraps,
            overflow="fold" if wraps else "ellipsis",
            min_width=12 if column == "covers" else len(column),
            justify="right" if column in ("id", "start", "end", "base_id", "gen ms") else "left",
        )
    for version in versions:
        table.add_row(
            str(version["memory_id"]),
            str(version["start_sequence"]),
            str(version["end_sequence"]),
            _cell(version["base_memory_id"]) or "null",
            escape(version["status"]),
            _cell(version["covers"]),
            version["created_at"].strftime("%H:%M:%S") if version["created_at"] else "",
            _cell(version["generation_time_ms"]),
            *([_cell(version["error"])] if errors else []),
        )
    console = Console()
    console.print(table)
    served_row = next((v for v in versions if v["memory_id"] == summary["served_memory_id"]), None)
    served = (
        f"memory {served_row['memory_id']} (seq {served_row['start_sequence']}-{served_row['end_sequence']})"
        if served_row is not None
        else "no memory yet (raw fallback)"
    )
    console.print(
        f"{summary['rounds']} rounds, newest sequence {summary['newest_sequence']}; served now: {served}; "
        f"summary lag {summary['summary_lag']} messages ({summary['rounds_behind']} rounds)"
    )


def at_round(
    thread_id: str = typer.Argument(..., help="Conversation id (thread_id)."),
    round_number: int = typer.Argument(..., help="Round number (1-based)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """What the model was given at a round: memory version and text, the recalled long-term block with each
    hit's provenance, message range, each message."""

    async def read(memory: MemoryService) -> tuple[observability.ContextAtRound, str]:
        context = await observability.context_at(memory.backend, thread_id, round_number)
        return context, memory.settings.rounds.injection_mode

    context, injection_mode = _read(read)
    round_row = context.round
    if as_json:
        _print_json(
            {
                "conversation_id": context.conversation_id,
                "round_number": context.round_number,
                "retrieval_path": round_row["retrieval_path"],
                "memory": context.memory,
                "recall": context.recall,
                "gap": [round_row["gap_start_sequence"], round_row["gap_end_sequence"]],
                "input": [round_row["input_first_sequence"], round_row["input_last_sequence"]],
                "round": {k: v for k, v in round_row.items() if k not in ("recall_block", "recall_hits")},
                "messages": context.messages,
                "injection_mode": injection_mode,
            }
        )
        return
    console = Console()
    gap = (
        f"seq {round_row['gap_start_sequence']}-{round_row['gap_end_sequence']} ({round_row['gap_size']} messages)"
        if round_row["gap_size"]
        else "none"
    )
    console.print(
        f"[bold]{escape(thread_id)}, round {round_number}[/bold]: path {round_row['retrieval_path']}, "
        f"gap {gap}, input seq {round_row['input_first_sequence']}-{round_row['input_last_sequence']}, "
        f"~{round_row['context_tokens']} context tokens"
        + (", [yellow]truncated[/yellow]" if round_row["truncated"] else "")
    )
    if context.memory is None:
        console.print("No memory served: the model got the stored messages verbatim (raw fallback).")
    else:
        memory = context.memory
        console.print(
            Panel(
                escape(memory["memory_text"]),
                title=f"memory {memory['memory_id']} (seq {memory['start_sequence']}-{memory['end_sequence']})",
                title_align="left",
            )
        )
    _print_recall(console, context.recall, round_row)
    messages = Table(title="Messages", title_justify="left")
    for column in ("part", "seq", "round", "role", "content"):
        messages.add_column(column)
    for row in context.messages:
        messages.add_row(
            row["part"],
            str(row["sequence_number"]),
            str(row["round_number"]),
            escape(row["role"]),
            escape(row["content"]),
        )
    console.print(messages)


def _origin(hit: dict[str, Any]) -> str:
    """Where a recalled hit came from, in one cell (its provenance as stored with the round)."""
    if hit.get("batch_summary_id") is not None:
        origin = f"batch summary {hit['batch_summary_id']} of items {hit.get('source_item_ids', [])}"
    elif hit.get("note_id") is not None:
        origin = f"{hit.get('period')} note {hit['note_id']} ({hit.get('period_start')})"
    elif hit.get("kind") == "turn":
        origin = f"{hit.get('conversation_id')} #{(hit.get('sequences') or ['?'])[0]}"
    else:
        origin = f"item {', '.join(map(str, hit.get('item_ids', [])))}"
        if hit.get("source_item_ids"):
            origin += f" (summary of items {hit['source_item_ids']})"
    turns = [f"{c} #{n}" for c, n in hit.get("sources", []) if hit.get("kind") != "turn"]
    return origin + (f"; from {', '.join(turns)}" if turns else "")


def _print_recall(console: Console, recall: dict[str, Any] | None, round_row: dict[str, Any]) -> None:
    if recall is None:
        path = round_row.get("recall_path")
        why = f"recall path {path}, no block stored" if path else "the round did not recall"
        console.print(f"No long-term block: {why}.")
        return
    title = f"long-term block: recall path {recall['path']}, {recall['items']} hits, ~{recall['tokens']} tokens" + (
        " (truncated)" if recall["truncated"] else ""
    )
    console.print(Panel(escape(recall["block"]), title=title, title_align="left"))
    hits = Table(title="Recalled (provenance)", title_justify="left")
    for column in ("#", "kind", "score", "paths", "from"):
        hits.add_column(column)
    for n, hit in enumerate(recall["hits"], 1):
        kind = f"{hit.get('kind')} ({hit.get('role')})" if hit.get("role") else str(hit.get("kind"))
        hits.add_row(
            str(n), escape(kind), f"{hit.get('score', 0):.4f}", ",".join(hit.get("paths", [])), escape(_origin(hit))
        )
    console.print(hits)


def stats(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    stuck_after: float | None = typer.Option(
        None, help="Seconds a processing row may stay quiet before it counts as stuck (default: processing_timeout_s)."
    ),
    limit: int = typer.Option(
        observability.DEFAULT_HEALTH_LIMIT, min=1, help="Conversations to list, the most lagging first."
    ),
) -> None:
    """Memory health: summary lag, memory age, compression, failure rate, generation p50/p95, stuck rows; the
    failure rate and summary lag of the last hour."""

    async def read(memory: MemoryService) -> observability.MemoryHealth:
        timeout = stuck_after if stuck_after is not None else memory.settings.jobs.processing_timeout_s
        return await observability.health(memory.backend, timeout, limit, now=memory.clock())

    health = _read(read)
    conversations = health.conversations
    if as_json:
        _print_json(
            {
                "totals": health.totals,
                "last_hour": health.last_hour,
                "conversations": conversations,
                "models": health.models,
                "stuck": health.stuck,
                "stuck_after_s": health.stuck_after_s,
            }
        )
        return
    console = Console()
    width = console.width
    console.print(_key_values("Memory health", health.totals))
    console.print(_key_values("Last hour (summaries finished, rounds started)", health.last_hour))
    console.print(
        _rows(
            "Conversations (most lagging first)",
            conversations,
            {
                "conversation_id": "conversation",
                "rounds": "rounds",
                "summary_lag": "lag",
                "rounds_behind": "behind",
                "served_memory_id": "served",
                "served_memory_age": "age",
                "completed": "done",
                "failed": "failed",
                "processing": "busy",
                "failure_rate": "fail rate",
                "compression_ratio": "ratio",
                "stuck": "stuck",
            },
            width=width,
            optional=("rounds_behind", "completed", "processing", "failure_rate", "compression_ratio", "stuck"),
        )
    )
    console.print(
        _rows(
            "Summarizer models",
            health.models,
            {
                "model_name": "model",
                "completed": "done",
                "failed": "failed",
                "failure_rate": "fail rate",
                "generation_p50_ms": "p50 ms",
                "generation_p95_ms": "p95 ms",
                "input_tokens": "in tokens",
                "output_tokens": "out tokens",
                "compression_ratio": "ratio",
            },
            width=width,
            optional=("failure_rate", "input_tokens", "output_tokens", "compression_ratio"),
        )
    )
    if health.stuck:
        console.print(
            _rows(
                f"Stuck processing rows (quiet > {health.stuck_after_s:g}s)",
                health.stuck,
                {
                    "conversation_id": "conversation",
                    "memory_id": "id",
                    "start_sequence": "start",
                    "end_sequence": "end",
                    "created_at": "created",
                    "attempts": "attempts",
                    "quiet_for": "quiet for",
                },
                width=width,
                optional=("start_sequence", "end_sequence", "attempts"),
            )
        )
    else:
        console.print(f"No stuck processing rows (quiet > {health.stuck_after_s:g}s).")


def register(app: typer.Typer) -> None:
    """Add inspect, at and stats to the `memory-agent` command."""
    app.command("inspect")(inspect_versions)
    app.command("at")(at_round)
    app.command("stats")(stats)
