"""What the commands share: opening the service for a read, exiting with a reason, and printing stored text
safely (rich tables or JSON; terminal control characters in user or model text never reach the terminal)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.markup import escape as escape_markup
from rich.table import Table

from memory_agent.errors import MemoryAgentError
from memory_agent.llm import OfflineModel
from memory_agent.observability import reads as observability
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


def human_duration(seconds: float) -> str:
    """A duration as a person reads it: 12 s, 5 min 53 s, 3 h 5 min, 451 days."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if hasattr(value, "total_seconds"):
        return human_duration(value.total_seconds())
    if isinstance(value, float):
        return f"{value:.1f}"
    return escape(str(value))


def _key_values(title: str, row: dict[str, Any]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left", box=box.SIMPLE)
    table.add_column(style="bold")
    table.add_column()
    for key, value in row.items():
        table.add_row(key, _cell(value))
    return table


def compact_table(title: str, **options: Any) -> Table:
    """A table with a rule under its header and no cell borders: two spaces between columns, so tables of ten
    columns fit 80 terminal columns."""
    return Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, **options
    )


def _rows(
    title: str,
    rows: list[dict[str, Any]],
    columns: dict[str, str],
    *,
    width: int | None = None,
    optional: tuple[str, ...] = (),
) -> Table:
    """A table of `rows` showing `columns` ({key: header}); the first column folds instead of truncating. The
    `optional` columns are left out, last first, while the table would be wider than `width` (the terminal)."""
    cells = [{key: _cell(row.get(key)) for key in columns} for row in rows]

    def natural(key: str) -> int:
        return max([len(columns[key]), *(len(row[key]) for row in cells)])

    shown = list(columns)
    first_key = shown[0]
    if width is not None:
        for key in reversed(optional):
            if sum(min(natural(k), 40) + 2 for k in shown) <= width:
                break
            shown.remove(key)
    table = compact_table(title + (" (--json for every column)" if len(shown) < len(columns) else ""))
    for key in shown:
        if key == first_key:
            table.add_column(columns[key], overflow="fold", min_width=min(40, natural(key)))
        else:
            table.add_column(columns[key], no_wrap=True)
    for row in cells:
        table.add_row(*(row[key] for key in shown))
    return table
