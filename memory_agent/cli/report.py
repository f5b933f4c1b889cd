"""`memory-agent report`: the weekly upgrade report (the design's upgrade triggers, docs/concepts/consolidation.md) as one rich
table — a row per ISO week and tenant, each metric beside its threshold, crossed ones marked — or --json."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from memory_agent.cli.observe import _print_json, _read, escape
from memory_agent.errors import MemoryAgentError
from memory_agent.observability.upgrade import METRICS, Metric, shaped, upgrade_report
from memory_agent.service import MemoryService

CAPTION = (
    "A query is a round that recalled. LLM spend = memory_agent's calls (summaries, cluster summaries, "
    "consolidation) + the app model's answers that reported usage ('app calls'), priced from "
    "MEMORY_AGENT_LLM_PRICES at call time. YES: over the threshold."
)


def _threshold(metric: Metric, threshold: float) -> str:
    return f">{threshold / 1000:g} s" if metric.unit == "ms" else f">{threshold:.0%}"


def _cell(metric: Metric, value: float | None, crossed: bool | None) -> str:
    if value is None:
        return "-"
    shown = f"{value / 1000:.2f} s" if metric.unit == "ms" else f"{value:.1%}"
    return f"[bold red]{shown} YES[/]" if crossed else f"{shown} no"


def table(rows: list[dict[str, Any]], title: str) -> Table:
    """The report's rows (shaped()) as one table."""
    thresholds = rows[0]["metrics"] if rows else {}
    headers = [
        f"{m.label}\n({_threshold(m, thresholds[m.key]['threshold'])})" if thresholds else m.label for m in METRICS
    ]
    view = Table("week", "tenant", "rounds", *headers, "app calls", "crossed", title=title, caption=CAPTION)
    for row in rows:
        cells = [_cell(m, row["metrics"][m.key]["value"], row["metrics"][m.key]["crossed"]) for m in METRICS]
        crossed = f"[bold red]{row['crossed']}[/]" if row["crossed"] else "0"
        view.add_row(row["week"], escape(row["tenantId"]), str(row["rounds"]), *cells, str(row["appCalls"]), crossed)
    return view


def report(
    weeks: int = typer.Option(8, "--weeks", min=1, help="ISO weeks shown, the current one included."),
    tenant: str = typer.Option(None, "--tenant", help="Only this tenant."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The weekly upgrade report: the evolution plan's triggers per week, each beside its threshold."""

    async def read(memory: MemoryService) -> list[dict[str, Any]]:
        return await upgrade_report(memory.backend, weeks=weeks, tenant_id=tenant)

    try:
        rows = [shaped(row) for row in _read(read)]
    except MemoryAgentError as exc:
        typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        _print_json(rows)
        return
    scope = f" of tenant {tenant}" if tenant else ""
    console = Console()
    console.print(table(rows, f"Upgrade report{escape(scope)}, last {weeks} weeks"))
    if not rows:
        console.print("no rounds and no LLM calls in these weeks")
    for line in verdicts(rows):
        console.print(line)


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """Per tenant, its newest week read off the table: which thresholds it crossed."""
    newest: dict[str, dict[str, Any]] = {}
    for row in rows:  # newest weeks first
        newest.setdefault(row["tenantId"], row)
    lines = []
    for tenant_id, row in sorted(newest.items()):
        crossed = [m.label for m in METRICS if row["metrics"][m.key]["crossed"]]
        verdict = f"upgrade signals: {', '.join(crossed)}" if crossed else "no threshold crossed"
        lines.append(f"{escape(tenant_id)}, {row['week']}: {len(crossed)} of {len(METRICS)} crossed, {verdict}")
    return lines


def register(app: typer.Typer) -> None:
    """Add report to the `memory-agent` command."""
    app.command("report")(report)
