"""Importing a thread's messages with the times they were written: history brought from elsewhere (another app,
a LangGraph checkpointer, a JSON lines file) stored as rounds store theirs, dated as it happened.

An import streams: its messages are read, checked and written a batch at a time (at most IMPORT_BATCH_ROWS rows
or IMPORT_BATCH_BYTES of text), so a history of millions of messages is held a batch at a time, never whole. It
is still one transaction: the thread's owner, its conversation row and every message, each with its own
`created_at`; bad input raises InvalidInputError naming the message (the line of a file) and the field, wherever
it is (the last line too), and the transaction rolls back: nothing is written (each record's own checks:
conversation/import_records.py; the thread's order and tool calls: conversation/import_rows.py; one message an id:
the database, batch by batch, here). The thread must be new: history is not merged into a thread that has
messages. It takes the user's forget lock shared for the whole transaction (sql/queries/forget.sql), as every
writer that must lose against forget_user: an import that committed first is erased by the forget, and one that
waited for the forget writes after it (a new import).
Afterwards the thread is summarized as its rounds would have been: one version per window of
`rolling_window_size` messages ending at a round's end, each on the one before, in this process; without a
summary (none asked or none due), the turns are embedded in the background as a round's are.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from memory_agent.conversation.import_records import (
    TimedMessage,
    check_iterable,
    message_from_record,
    parse_jsonl,
    parse_time,
    read_jsonl,
    timed,
    timed_entry,
)
from memory_agent.conversation.import_rows import ThreadRows, summary_points
from memory_agent.conversation.queries import ConversationQueries
from memory_agent.conversation.trigger import SummaryTrigger
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError
from memory_agent.schemas.keys import ConversationKey

# A batch's bounds: what an import holds of a thread at once (rows in one pipelined write, their text).
IMPORT_BATCH_ROWS = 1000
IMPORT_BATCH_BYTES = 4 * 1024 * 1024

# The record names stay importable from here, where the import's callers have always found them.
__all__ = [
    "ImportReport",
    "ThreadImport",
    "TimedMessage",
    "message_from_record",
    "parse_jsonl",
    "parse_time",
    "read_jsonl",
    "summary_points",
    "timed",
]


@dataclass(frozen=True)
class ImportReport:
    """What an import stored: the conversation, its messages and rounds, the span of their times, and the memory
    versions made from them (their ids, oldest first; a failed one included)."""

    conversation_id: str
    user_id: str
    tenant_id: str
    messages: int
    rounds: int
    first_at: datetime
    last_at: datetime
    memory_ids: tuple[int, ...] = ()


class ThreadImport:
    """Stores an imported thread (one transaction), then summarizes it window by window."""

    def __init__(
        self,
        queries: ConversationQueries,
        trigger: SummaryTrigger,
        run_summary: Callable[[int, str], Awaitable[str]],
        clock: Callable[[], datetime],
        window: int,
        embed: Callable[[str, str], Awaitable[None]] | None = None,
    ) -> None:
        self.queries = queries
        self.trigger = trigger
        self.run_summary = run_summary
        self.clock = clock
        self.window = window
        # With an embedder, the executor's `embed(user_id, tenant_id)`: as after a round, the turns get their
        # vectors in the background when no summary was made (a summary embeds them itself).
        self.embed = embed

    async def run(
        self, key: ConversationKey, messages: Iterable[Any] | AsyncIterable[Any], *, summarize: bool
    ) -> ImportReport:
        """Store `messages` (TimedMessage, (message, time) pairs or import-format records, read as they come) as
        the thread `key`, then summarize it (`summarize`)."""
        check_iterable(messages)
        thread = ThreadRows(key, self.clock(), self.window)
        async with aclosing(_timed(messages)) as entries:
            points = await self._store(key, thread, entries)
        with tenant_scope(key.tenant_id):
            memory_ids = await self._summarize(key, points) if summarize else []
        if self.embed is not None and not memory_ids:
            await self.embed(key.user_id, key.tenant_id)
        assert thread.first_at is not None and thread.last_at is not None
        return ImportReport(
            key.conversation_id,
            key.user_id,
            key.tenant_id,
            thread.count,
            thread.rounds,
            thread.first_at,
            thread.last_at,
            tuple(memory_ids),
        )

    async def _store(self, key: ConversationKey, thread: ThreadRows, entries: AsyncIterator[TimedMessage]) -> list[int]:
        """The thread's messages, checked and written a batch at a time in one transaction; its summary points."""
        first = await anext(entries, None)
        if first is None:
            thread.finish()  # raises: nothing to import
        assert first is not None
        row = thread.row(first)  # a bad first message is refused before the transaction opens
        with tenant_scope(key.tenant_id):
            async with self.queries.connector.session(transaction=True) as conn:
                await self.queries.begin_import(conn, key, thread.now, row["created_at"])
                batch = _Batch()
                batch.add(row, first)
                async for entry in entries:
                    if batch.full:
                        await self._write(conn, key, batch)
                        batch = _Batch()
                    batch.add(thread.row(entry), entry)
                await self._write(conn, key, batch)
                points = thread.finish()
                assert thread.last_at is not None
                await self.queries.end_import(conn, key, thread.count, thread.rounds, thread.last_at)
        return points

    async def _write(self, conn: psycopg.AsyncConnection[Any], key: ConversationKey, batch: _Batch) -> None:
        """A batch's rows; InvalidInputError (the transaction rolls back) when one reuses an earlier message's id:
        a graph's state holds one message an id, so a later round would drop the first."""
        if not batch.rows:
            return
        twice = await self.queries.import_batch(conn, key, batch.rows, batch.ids)
        if twice is not None:
            where = batch.where(twice["sequence_number"])
            raise InvalidInputError(
                f"{where}: field 'id' ({twice['message_id']!r}) is message {twice['first_sequence']}'s too; "
                "give each message its own id (or none)"
            )

    async def _summarize(self, key: ConversationKey, points: list[int]) -> list[int]:
        """One memory version per summary point that the trigger rule finds due, each awaited before the next is
        claimed (a conversation has one summary in flight): the chain its rounds would have made."""
        memory_ids = []
        for point in points:
            try:
                async with self.queries.connector.session(transaction=True) as conn:
                    decision = await self.trigger.decide(conn, key, point, None)
                    result = await self.trigger.claimed(conn, key, decision)
            except psycopg.errors.ForeignKeyViolation:  # erased since it was stored (delete or forget): done
                break
            if result.memory_id is None or not result.started:
                continue
            memory_ids.append(result.memory_id)
            await self.run_summary(result.memory_id, key.user_id)
        return memory_ids


class _Batch:
    """The rows of an import not written yet, their messages' ids, and where each was read (for errors)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.sources: list[str | None] = []
        self.ids: dict[int, str] = {}  # sequence -> the message's id, for those that have one
        self.size = 0

    def add(self, row: dict[str, Any], entry: TimedMessage) -> None:
        self.rows.append(row)
        self.sources.append(entry.source)
        if entry.message.id is not None:
            self.ids[row["sequence_number"]] = entry.message.id
        self.size += len(row["content"]) + len(row["message"])

    @property
    def full(self) -> bool:
        return len(self.rows) >= IMPORT_BATCH_ROWS or self.size >= IMPORT_BATCH_BYTES

    def where(self, sequence: int) -> str:
        return self.sources[sequence - self.rows[0]["sequence_number"]] or f"message {sequence}"


async def _timed(messages: Iterable[Any] | AsyncIterable[Any]) -> AsyncGenerator[TimedMessage]:
    """The messages to import as TimedMessage, one at a time, from a list, an iterator or an async iterator."""
    position = 0
    if isinstance(messages, AsyncIterable):
        async for entry in messages:
            yield timed_entry(entry, position)
            position += 1
        return
    for entry in messages:
        yield timed_entry(entry, position)
        position += 1
