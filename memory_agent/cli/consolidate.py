"""`memory-agent consolidate` (one user's period, or every due user) and `memory-agent summaries` (notes of a
period), as rich tables or --json. They use the database of MemorySettings() and the consolidation model of
the settings (a setting whose model cannot be made is an error: the offline consolidator runs only when named)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from memory_agent.cli.output import _cell, _fail, _opened, _print_json, compact_table, escape
from memory_agent.consolidation import (
    ConsolidationRunner,
    list_notes,
    system_clock,
)
from memory_agent.consolidation.periods import PERIODS
from memory_agent.consolidation.queries import ConsolidationQueries
from memory_agent.consolidation.run import ConsolidationRun
from memory_agent.consolidation.summaries import PeriodSummary, SummarizeResult, summarize_latest
from memory_agent.conversation.identity import validate_user_id
from memory_agent.errors import InvalidInputError, MemoryAgentError
from memory_agent.llm import default_chat_model
from memory_agent.settings import MemorySettings

PERIOD_HELP = "daily, weekly or monthly"


def _with_backend(work: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
    with _opened() as memory:
        try:
            return memory.call_sync(work(memory.backend))
        except MemoryAgentError as exc:
            raise _fail(str(exc)) from exc


def _check_user(user: str) -> None:
    """The one validator of user ids a caller gives (a conversation's implicit scope cannot be named)."""
    try:
        validate_user_id(user, "--user")
    except MemoryAgentError as exc:
        raise _fail(str(exc)) from exc


def consolidate(
    user: str = typer.Option(None, "--user", help="The user to consolidate."),
    period: str = typer.Option("weekly", "--period", help=PERIOD_HELP),
    tenant: str = typer.Option("default", "--tenant", help="The user's tenant."),
    force: bool = typer.Option(False, "--force", help="Write the note again even if this period is done."),
    due: bool = typer.Option(False, "--due", help="Run every due user's nightly work, as the tick would."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Consolidate the last complete period of a user (a repeat is a no-op unless --force), or every due user."""
    if not due:  # the arguments first: neither the model nor the database has anything to say about them
        if not user:
            raise _fail("give --user USER (or --due for every due user)")
        _check_user(user)
        if period not in PERIODS:
            raise _fail(f"period must be one of {', '.join(PERIODS)}, got {period!r}")
    settings = MemorySettings()
    model = default_chat_model(settings, "consolidation")
    config = settings
    now = system_clock()
    if due:
        runner_config = config.replace(consolidation_enabled=True)

        async def run_due(backend: Any) -> dict[tuple[str, str, str], str]:
            runner = ConsolidationRunner(backend.pool, model, runner_config)
            with Console(stderr=True).status("consolidating due users"):
                return await runner.run_due(now)

        done = _with_backend(run_due)
        if as_json:
            _print_json([{"job": j, "tenantId": t, "userId": u, "outcome": o} for (j, t, u), o in done.items()])
            return
        table = Table("job", "tenant", "user", "outcome", title=f"consolidation at {now:%Y-%m-%d %H:%M} UTC")
        for (job, tenant_id, user_id), outcome in done.items():
            table.add_row(job, escape(tenant_id), escape(user_id), escape(outcome))
        Console().print(table)
        return

    async def run_one(backend: Any) -> SummarizeResult:
        async with backend.session() as conn:
            # As the HTTP route answers 404: a user the tenant holds nothing of is a mistake, not an empty period.
            if not await ConsolidationQueries.user_known(conn, {"tenant_id": tenant, "user_id": user}):
                raise InvalidInputError(
                    f"tenant {tenant!r} holds nothing of user {user!r}; check --user and --tenant "
                    "(`memory-agent stats` lists conversations)"
                )
            return await summarize_latest(
                conn, tenant, user, period, now, run=ConsolidationRun(model, config, force=force)
            )

    result = _with_backend(run_one).model_dump(mode="json")
    if as_json:
        _print_json(result)
        return
    table = Table(show_header=False, title=f"consolidate {escape(user)} ({period})", title_justify="left")
    for key, value in result.items():
        table.add_row(key, _cell(value))
    Console().print(table)


def summaries(
    period: str = typer.Option("weekly", "--period", help=PERIOD_HELP),
    user: str = typer.Option(None, "--user", help="Only this user."),
    tenant: str = typer.Option(None, "--tenant", help="Only this tenant."),
    limit: int = typer.Option(50, min=1, help="Most notes shown, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Show the consolidation notes of a period with their key insights."""
    if period not in PERIODS:
        raise _fail(f"period must be one of {', '.join(PERIODS)}, got {period!r}")
    if user is not None:
        _check_user(user)

    async def read(backend: Any) -> list[dict[str, Any]]:
        async with backend.session() as conn:
            return await list_notes(conn, period, tenant_id=tenant, user_id=user, limit=limit)

    rows = _with_backend(read)
    shaped = [{"tenantId": row["tenant_id"], **PeriodSummary.from_row(row).model_dump(mode="json")} for row in rows]
    if as_json:
        _print_json(shaped)
        return
    table = compact_table(f"{period} summaries")
    for column in ("id", "user", "start", "end", "notes", "key insights"):
        fixed = column in ("id", "start", "end", "notes")
        table.add_column(column, no_wrap=fixed, overflow="fold", justify="right" if column == "id" else "left")
    for row in shaped:
        table.add_row(
            str(row["summaryId"]),
            escape(f"{row['tenantId']}/{row['userId']}"),
            row["startDate"],
            row["endDate"],
            str(row["notesConsolidated"]),
            escape("\n".join(f"- {insight}" for insight in row["keyInsights"])),
        )
    Console().print(
        table if shaped else f"No {period} summaries" + (f" of tenant {escape(tenant)}" if tenant else "") + "."
    )


def register(app: typer.Typer) -> None:
    """Add consolidate and summaries to the `memory-agent` command."""
    app.command("consolidate")(consolidate)
    app.command("summaries")(summaries)
