"""The `memory-agent` command: demo, db, migrate, worker, and the observability commands."""

from __future__ import annotations

from typing import Any

import typer
from typer._click.core import Context  # typer 0.29 carries its own click: its Context is what commands get
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from memory_agent.cli import INTERRUPTED


def _flags_show_no_type() -> None:
    """Rich help (typer 0.29) labels every flag `<bool>`, as if it took a value; a flag takes none, so its type
    column stays empty, as in click's plain help."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "flags_show_no_type", False):
        return

    def display_type_rich(self: TyperOption, ctx: typer.Context) -> str | None:
        return None if self.is_flag and not self.count else shown(self, ctx)

    display_type_rich.flags_show_no_type = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign,assignment]


def error_line(exc: BaseException) -> str:
    """An error as the command prints it: one line (a settings error's problems joined), naming what to fix."""
    from memory_agent.settings.base import ERRORS_HEADER

    text = str(exc).strip()
    if text.startswith(ERRORS_HEADER):
        problems = [line.strip() for line in text.removeprefix(ERRORS_HEADER).splitlines() if line.strip()]
        text = f"{ERRORS_HEADER} {'; '.join(problems)}"
    return " ".join(text.split())


def _usage_exit(exc: UsageError) -> typer.Exit:
    """A usage error (an unknown option, a missing or bad argument) as one line on stderr naming the command's
    help, instead of click's usage block; exit code 2, as click's."""
    from rich.console import Console
    from rich.markup import escape

    where = f"; `{exc.ctx.command_path} --help` shows the usage" if exc.ctx is not None else ""
    Console(stderr=True, soft_wrap=True).print(
        f"[red]error:[/red] {escape(' '.join(exc.format_message().split()).rstrip('.'))}{where}"
    )
    return typer.Exit(2)


class CommandGroup(TyperGroup):
    """The root command: a memory_agent error or a usage error ends any command with one line on stderr and exit
    code 2 (the traceback only with --debug); Ctrl+C ends it quietly with 130."""

    def make_context(self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except NoArgsIsHelpError:
            raise  # a group named alone: its help, as click shows it
        except UsageError as exc:
            raise _usage_exit(exc) from None

    def invoke(self, ctx: Context) -> Any:
        from memory_agent.errors import MemoryAgentError

        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise  # a group named alone: its help, as click shows it
        except UsageError as exc:
            raise _usage_exit(exc) from None
        except MemoryAgentError as exc:
            if ctx.meta.get("memory_agent.debug"):
                raise
            from rich.console import Console
            from rich.markup import escape

            Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(error_line(exc))}")
            Console(stderr=True).print("(run with --debug for the traceback)", style="dim")
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            raise typer.Exit(INTERRUPTED) from None


_flags_show_no_type()
app = typer.Typer(
    cls=CommandGroup,
    help="memory_agent: bounded, auditable conversation memory on PostgreSQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    ctx: typer.Context,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show memory_agent's INFO logs."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error."),
) -> None:
    """memory_agent: bounded, auditable conversation memory on PostgreSQL."""
    from memory_agent.cli import logs

    ctx.meta["memory_agent.debug"] = debug
    logs.configure(verbose)


@app.command()
def demo(
    rounds: int = typer.Option(12, min=10, help="Rounds of the scripted conversation."),
    thread_id: str = typer.Option("demo", help="Conversation id (thread_id) to use."),
    days: int = typer.Option(
        None,
        "--days",
        min=1,
        max=366,
        help="Instead: simulate this many days of one user under a manual clock (35: a month ending in 5 weekly "
        "and 1 monthly rollups) and show what the nightly consolidation writes.",
    ),
    clean: bool = typer.Option(False, "--clean", help="Remove the demo's memory (its own tenant) and stop."),
) -> None:
    """Drive a scripted conversation through a memory-wrapped graph and show the memory evolve (or, with
    --days, a simulated month of nightly consolidation)."""
    if days is not None:
        from memory_agent.cli.demo_month import run_month_demo

        run_month_demo(days)
        return
    from memory_agent.cli.demo import run_demo

    run_demo(rounds=rounds, thread_id=thread_id, clean=clean)


db = typer.Typer(help="The database: its URL (for psql) and the embedded server's lifetime.", no_args_is_help=True)
app.add_typer(db, name="db")


@db.command("url")
def db_url() -> None:
    """Print the database URL: MEMORY_AGENT_DATABASE_URL, or the embedded server's (started if needed, and left
    running for psql; `memory-agent db stop` stops it)."""
    from memory_agent.settings import MemorySettings

    settings = MemorySettings()
    if settings.database.database_url:
        typer.echo(settings.database.database_url)
        return
    from memory_agent.db.embedded import start_embedded_postgres

    conninfo = start_embedded_postgres(
        settings.database.data_dir, cleanup_mode=None, install_dir=settings.database.embedded_install_dir
    )
    typer.echo(conninfo_url(conninfo))


def conninfo_url(conninfo: str) -> str:
    """A libpq connection string as a postgresql:// URL (psql, pg_dump and drivers take it); a URL as it is."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    if conninfo.startswith(("postgresql://", "postgres://")):
        return conninfo
    params = {key: str(value) for key, value in conninfo_to_dict(conninfo).items()}
    user, password = params.pop("user", ""), params.pop("password", "")
    auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    dbname = quote(params.pop("dbname", ""), safe="")
    host = params.get("host", "")
    netloc = ""
    if host and not host.startswith("/"):  # a host name goes in the URL; a socket directory in the query
        netloc = params.pop("host") + (f":{params.pop('port')}" if "port" in params else "")
    query = urlencode(params, safe="/", quote_via=quote)  # libpq reads %20, not +, as a space
    return f"postgresql://{auth + '@' if auth else ''}{netloc}/{dbname}" + (f"?{query}" if query else "")


@db.command("stop")
def db_stop() -> None:
    """Stop the embedded PostgreSQL of MEMORY_AGENT_DATA_DIR (e.g. left running by `langgraph dev`)."""
    from memory_agent.db.embedded import stop_embedded_postgres
    from memory_agent.settings import MemorySettings

    settings = MemorySettings()
    data_dir = settings.database.data_dir
    if stop_embedded_postgres(data_dir, install_dir=settings.database.embedded_install_dir):
        typer.echo(f"stopped the embedded PostgreSQL of {data_dir}")
    else:
        typer.echo(f"no embedded PostgreSQL is running for {data_dir}")


@app.command()
def migrate(
    procrastinate: bool = typer.Option(
        None,
        "--procrastinate/--no-procrastinate",
        help="Also create or upgrade procrastinate's tables (default: when MEMORY_AGENT_EXECUTOR=procrastinate).",
    ),
) -> None:
    """Apply pending schema migrations (and re-create changed views and functions); print what was applied."""
    import asyncio

    from memory_agent.db.connect import migrate_database
    from memory_agent.errors import MemoryAgentError
    from memory_agent.settings import MemorySettings

    settings = MemorySettings()
    url = settings.database.database_url
    if not url:
        from memory_agent.db.embedded import start_embedded_postgres

        url = start_embedded_postgres(settings.database.data_dir, install_dir=settings.database.embedded_install_dir)
    with_jobs = settings.jobs.executor == "procrastinate" if procrastinate is None else procrastinate
    try:
        report = asyncio.run(
            migrate_database(
                url, settings.database.db_schema, procrastinate=with_jobs, timeout=settings.database.connect_timeout_s
            )
        )
    except MemoryAgentError as exc:
        typer.echo(f"error: {error_line(exc)}", err=True)
        raise typer.Exit(2) from exc
    for name in report.applied:
        typer.echo(f"applied {name}")
    if report.definitions:
        typer.echo(f"re-created views and functions: {', '.join(report.definitions)}")
    for name in report.procrastinate:
        typer.echo(f"procrastinate: applied {name}")
    if report.distributed:
        typer.echo("applied the Citus distribution (sql/distribution.sql)")
    if not (report.applied or report.definitions or report.procrastinate or report.distributed):
        typer.echo(f"schema {settings.database.db_schema} is up to date")


def _register_optional_commands() -> None:
    # Each command group lives in its own module and adds itself to `app`.
    import importlib

    modules = ("observe", "worker", "consolidate", "eval", "serve", "report", "mcp", "transfer")
    for module in (f"memory_agent.cli.{name}" for name in modules):
        try:
            importlib.import_module(module).register(app)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


_register_optional_commands()
