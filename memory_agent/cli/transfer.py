"""`memory-agent import` (a thread's messages from a JSON lines file, with their times), `memory-agent export --user`
(a user's memory as one JSON document) and `memory-agent import-user` (that document, into this database). They
use the database of MemorySettings(); `import` summarizes with the summary model of the settings (the offline one
without an OpenAI key or base URL)."""

from __future__ import annotations

import dataclasses
import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import TextIO

import typer

from memory_agent.cli.output import _fail, _opened, _print_json
from memory_agent.conversation.imports import read_jsonl
from memory_agent.errors import InvalidInputError, MemoryAgentError
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings
from memory_agent.transfer import dumps

FILE_HELP = "The file to read ('-': standard input)."


def _read_text(path: str) -> tuple[str, str]:
    """(text, name for errors) of `path` or standard input."""
    if path == "-":
        return sys.stdin.read().removeprefix("\ufeff"), "stdin"
    try:
        return Path(path).read_text(encoding="utf-8-sig"), path  # an editor's byte order mark is not JSON
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"cannot read {path}: {exc}") from exc


@contextmanager
def _lines(path: str) -> Iterator[tuple[Iterator[str], str]]:
    """(the lines of `path` or standard input, read as they are asked for; name for errors). Lines end at a
    newline ("\n", "\r\n" or "\r") only: a JSON string may hold U+2028 or U+0085 raw, which splitlines() would
    cut at. An editor's byte order mark is not JSON: utf-8-sig drops it."""
    if path == "-":
        raw = getattr(sys.stdin, "buffer", None)
        handle: TextIO = (
            io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape") if raw is not None else sys.stdin
        )
        yield _decoded(handle, "stdin"), "stdin"
        return
    with _open(path) as handle:
        yield _decoded(handle, path), path


def _open(path: str) -> TextIO:
    """`path` opened to read, or exit 2 naming why it cannot be (before the import starts)."""
    try:
        return Path(path).open(encoding="utf-8-sig", errors="surrogateescape")
    except OSError as exc:
        raise _fail(f"cannot read {path}: {exc}") from exc


def _decoded(handle: TextIO, name: str) -> Iterator[str]:
    """`handle`'s lines; a byte that is not UTF-8 is bad input named by its line (the import then writes nothing).
    The handle keeps such bytes as lone surrogates (surrogateescape) to be found here: a strict decoder fails on a
    whole chunk read ahead, some lines before the bad one."""
    for number, line in enumerate(handle, start=1):
        if not line.isascii():
            try:
                line.encode()
            except UnicodeEncodeError:
                raise InvalidInputError(f"{name}, line {number}: not UTF-8; save the file as UTF-8") from None
        yield line


def import_thread(
    file: str = typer.Argument(..., help=FILE_HELP + " One JSON object a line: role, content, created_at."),
    thread: str = typer.Option(..., "--thread", help="The thread id to store the messages under (a new one)."),
    user: str = typer.Option(..., "--user", help="The user the thread belongs to: their other threads recall it."),
    tenant: str = typer.Option(None, "--tenant", help="The user's tenant (default: 'default')."),
    summarize: bool = typer.Option(True, "--summarize/--no-summarize", help="Summarize it as its rounds would be."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a sentence."),
) -> None:
    """Import a thread's messages with the times they were written (a JSON lines file): stored as rounds store
    theirs, recalled under their own dates. Read and written a batch at a time: a file of any size. All or nothing:
    a bad line is named and nothing is written."""
    with _lines(file) as (lines, name):
        try:
            messages = read_jsonl(lines, name)
            with MemoryService.from_settings(MemorySettings()) as memory:
                report = memory.call_sync(
                    memory.transfers.import_messages(
                        thread, messages, user_id=user, tenant_id=tenant, summarize=summarize
                    )
                )
        except MemoryAgentError as exc:
            raise _fail(str(exc)) from exc
        except OSError as exc:
            raise _fail(f"cannot read {name}: {exc}") from exc
    if as_json:
        _print_json(dataclasses.asdict(report))
        return
    typer.echo(
        f"imported {report.messages} messages ({report.rounds} rounds, {report.first_at.astimezone(UTC):%Y-%m-%d %H:%M} "
        f"to {report.last_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC) as thread {report.conversation_id!r} of user {report.user_id!r}; "
        f"{len(report.memory_ids)} memory versions"
    )


def export(
    user: str = typer.Option(..., "--user", help="The user whose memory to export."),
    tenant: str = typer.Option(None, "--tenant", help="The user's tenant (default: 'default')."),
    output: str = typer.Option("-", "--output", "-o", help="The file to write ('-': standard output)."),
) -> None:
    """Export everything stored of a user as one JSON document (the right of access): the same bytes while
    nothing changes. `memory-agent import-user` writes it into a database."""
    with _opened() as memory:
        try:
            document = memory.call_sync(memory.transfers.export_user(user, tenant_id=tenant))
        except MemoryAgentError as exc:
            raise _fail(str(exc)) from exc
    data = dumps(document)
    if output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        Path(output).write_bytes(data)
    except OSError as exc:
        raise _fail(f"cannot write {output}: {exc}") from exc


def import_user(
    file: str = typer.Argument(..., help=FILE_HELP + " A document `memory-agent export --user` wrote."),
    user: str = typer.Option(None, "--user", help="Import as this user (default: the document's)."),
    tenant: str = typer.Option(None, "--tenant", help="Into this tenant (default: the document's)."),
    prefix: str = typer.Option(
        "", "--conversation-prefix", help="Put before every thread id (a thread id belongs to one user)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a sentence."),
) -> None:
    """Import a user's memory document into this database, under new ids that keep every reference, with its
    times. All or nothing: a bad record is named and nothing is written; the user must hold no memory yet."""
    text, _ = _read_text(file)
    with _opened() as memory:
        try:
            report = memory.call_sync(
                memory.transfers.import_user(text, user_id=user, tenant_id=tenant, conversation_prefix=prefix)
            )
        except MemoryAgentError as exc:
            raise _fail(str(exc)) from exc
    if as_json:
        _print_json({"tenant_id": report.tenant_id, "user_id": report.user_id, "counts": report.counts})
        return
    written = ", ".join(f"{count} {section.replace('_', ' ')}" for section, count in report.counts.items())
    typer.echo(f"imported user {report.user_id!r} of tenant {report.tenant_id!r}: {written}")


def register(app: typer.Typer) -> None:
    """Add import, export and import-user to the `memory-agent` command."""
    app.command("import")(import_thread)
    app.command("export")(export)
    app.command("import-user")(import_user)
