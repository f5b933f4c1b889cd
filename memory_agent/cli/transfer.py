"""`memory-agent import` (a thread's messages from a JSON lines file, with their times), `memory-agent export --user`
(a user's memory as one JSON document) and `memory-agent import-user` (that document, into this database). They
use the database of MemorySettings(); `import` summarizes with the summary model of the settings (a setting whose
model cannot be made is an error: the offline summarizer runs only when named)."""

from __future__ import annotations

import codecs
import dataclasses
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import BinaryIO

import typer

from memory_agent.cli.output import _fail, _opened, _print_json
from memory_agent.conversation.imports import read_jsonl
from memory_agent.errors import MemoryAgentError
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings
from memory_agent.transfer import dumps

FILE_HELP = "The file to read ('-': standard input)."


def _read_bytes(path: str) -> tuple[bytes, str]:
    """(bytes, name for errors) of `path` or standard input, without an editor's byte order mark (not JSON)."""
    if path == "-":
        return sys.stdin.buffer.read().removeprefix(codecs.BOM_UTF8), "stdin"
    try:
        return Path(path).read_bytes().removeprefix(codecs.BOM_UTF8), path
    except OSError as exc:
        raise _fail(f"cannot read {path}: {exc}") from exc


@contextmanager
def _lines(path: str) -> Iterator[tuple[Iterator[bytes], str]]:
    """(the lines of `path` or standard input, read as they are asked for; name for errors). Lines end at "\n"
    only: a JSON string may hold U+2028 or U+0085 raw, which splitlines() would cut at. Each line is decoded on its
    own (read_jsonl, which drops a byte order mark): one that is not UTF-8 is named."""
    if path == "-":
        yield iter(sys.stdin.buffer), "stdin"
        return
    with _open(path) as handle:
        yield iter(handle), path


def _open(path: str) -> BinaryIO:
    """`path` opened to read, or exit 2 naming why it cannot be (before the import starts)."""
    try:
        return Path(path).open("rb")
    except OSError as exc:
        raise _fail(f"cannot read {path}: {exc}") from exc


def _read_text(path: str) -> tuple[str, str]:
    """(text, name for errors) of `path` or standard input, UTF-8."""
    data, name = _read_bytes(path)
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError as exc:
        raise _fail(
            f"cannot read {name}: not UTF-8 (byte 0x{data[exc.start]:02x} at byte {exc.start + 1}); save it as UTF-8"
        ) from exc


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
