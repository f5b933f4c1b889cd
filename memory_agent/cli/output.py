"""What the commands share: opening the service for a read, exiting with a reason, and printing stored text
safely (rich tables or JSON; terminal control characters in user or model text never reach the terminal)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape as escape_markup
from rich.table import Table

from memory_agent.errors import MemoryAgentError
from memory_agent.llm import OfflineModel
from memory_agent.observability import queries as observability
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings

T = TypeVar("T")

# Stored text is user and model input: terminal control characters in it (ESC sequences that write the
# clipboard, clear the screen or set the title; BEL; C1 controls such as CSI) must not reach the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape(text: str) -> str:
    """`text` safe to print in a rich table: control characters shown as `\\xNN`, markup escaped."""
    return escape_markup(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text))


def _fail(message: str) -> typer.Exit:
    """Exit 2 with `message` on one line of stderr (every command's errors end this way)."""
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(' '.join(message.split()))}")
    return typer.Exit(2)


@contextmanager
def _opened(settings: MemorySettings | None = None) -> Iterator[MemoryService]:
    settings = settings or MemorySettings()
    # These commands only read; a summarizer that needs no key keeps them from looking for one.
    try:
        with MemoryService.from_settings(settings, model=OfflineModel()) as memory:
            yield memory
    except MemoryAgentError as exc:
        raise _fail(str(exc)) from exc


def _read(read: Callable[[MemoryService], Coroutine[Any, Any, T]]) -> T:
    """Run `read` on an opened service; an unknown thread or round exits 1 with the reason."""
    with _opened() as memory:
        return memory.call_sync(read(memory))


def _print_json(value: Any) -> None:
    text = json.dumps(observability.jsonable(value), indent=2, ensure_ascii=False)
    # JSON escapes C0 controls itself; C1 controls (U+0080-U+009F) it leaves raw.
    typer.echo(re.sub(r"[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if hasattr(value, "total_seconds"):
        return f"{value.total_seconds():.1f}s"
    if isinstance(value, float):
        return f"{value:.1f}"
    return escape(str(value))


def _key_values(title: str, row: dict[str, Any]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key, value in row.items():
        table.add_row(key, _cell(value))
    return table


def _rows(title: str, rows: list[dict[str, Any]], columns: dict[str, str]) -> Table:
    """A table of `rows` showing `columns` ({key: header}); the first column folds instead of truncating."""
    table = Table(title=title, title_justify="left")
    first_key = next(iter(columns))
    first_width = min(40, max([len(columns[first_key]), *(len(_cell(row.get(first_key))) for row in rows)]))
    for position, header in enumerate(columns.values()):
        if position == 0:
            table.add_column(header, overflow="fold", min_width=first_width)
        else:
            table.add_column(header)
    for row in rows:
        table.add_row(*(_cell(row.get(key)) for key in columns))
    return table
