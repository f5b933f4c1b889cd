"""Importing a thread's messages with the times they were written: history brought from elsewhere (another app,
a LangGraph checkpointer, a JSON lines file) stored as rounds store theirs, dated as it happened.

An import is one transaction: the thread's owner, its conversation row and every message, each with its own
`created_at`; bad input raises InvalidInputError naming the message (the line of a file) and the field, before
anything is written (each record's own checks: conversation/import_records.py; the thread's order, ids and tool
calls: here). The thread must be new: history is not merged into a thread that has messages. It takes the user's
forget lock shared (sql/queries/forget.sql), as every writer that must lose against forget_user: an import that
committed first is erased by the forget, and one that waited for the forget writes after it (a new import).
Afterwards the thread is summarized as its rounds would have been: one version per window of
`rolling_window_size` messages ending at a round's end, each on the one before, in this process; without a
summary (none asked or none due), the turns are embedded in the background as a round's are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from memory_agent.conversation.import_records import TimedMessage, message_from_record, parse_jsonl, parse_time, timed
from memory_agent.conversation.messages import check_user_messages, serialize_round
from memory_agent.conversation.queries import ConversationQueries
from memory_agent.conversation.trigger import SummaryTrigger
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError
from memory_agent.schemas.keys import ConversationKey

# The record names stay importable from here, where the import's callers have always found them.
__all__ = [
    "ImportReport",
    "ThreadImport",
    "TimedMessage",
    "import_rows",
    "message_from_record",
    "parse_jsonl",
    "parse_time",
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


def import_rows(key: ConversationKey, messages: Sequence[TimedMessage], now: datetime) -> list[dict[str, Any]]:
    """The messages rows of the thread, checked: LangChain messages a round could store, a user message among
    them, times in order and none after `now` (the service's clock). Rounds start at each user message."""
    if not messages:
        raise InvalidInputError("nothing to import: the thread has no message")
    rows, round_number, previous = [], 0, None
    called: set[str] = set()  # the calls of the assistant messages so far, not yet answered
    ids: dict[str, int] = {}  # a graph's state holds one message an id: a later round would drop the first
    for position, entry in enumerate(messages):
        where = entry.source or f"message {position}"
        _check_tool_pair(entry.message, called, where)
        if entry.message.id is not None and ids.setdefault(entry.message.id, position) != position:
            raise InvalidInputError(
                f"{where}: field 'id' ({entry.message.id!r}) is message {ids[entry.message.id]}'s too; "
                "give each message its own id (or none)"
            )
        try:
            roles, contents, payloads = serialize_round([entry.message])
            if isinstance(entry.message, HumanMessage):
                check_user_messages([entry.message])  # an empty user message, named by its line
        except InvalidInputError as exc:
            # These name the message by its place in the round of one they were given: "message 0".
            text = str(exc)
            named = text.replace("message 0", where, 1) if "message 0" in text else f"{where}: {text}"
            raise InvalidInputError(named) from None
        if entry.created_at > now:
            raise InvalidInputError(
                f"{where}: field 'created_at' ({entry.created_at.isoformat()}) is after the service's clock "
                f"({now.isoformat()}); an imported message was written in the past"
            )
        if previous is not None and entry.created_at < previous:
            raise InvalidInputError(
                f"{where}: field 'created_at' ({entry.created_at.isoformat()}) is before the message above it "
                f"({previous.isoformat()}); give a thread's messages in the order they were written"
            )
        previous = entry.created_at
        if roles[0] == "user" or round_number == 0:
            round_number += 1
        rows.append(
            {
                "tenant_id": key.tenant_id,
                "user_id": key.user_id,
                "conversation_id": key.conversation_id,
                "sequence_number": position,
                "round_number": round_number,
                "role": roles[0],
                "content": contents[0],
                "message": payloads[0],
                "created_at": entry.created_at,
            }
        )
    if not any(isinstance(entry.message, HumanMessage) for entry in messages):
        raise InvalidInputError(
            "the thread needs a user message (role 'user'); none was given: its rounds start at the user's messages"
        )
    return rows


def _check_tool_pair(message: BaseMessage, called: set[str], where: str) -> None:
    """A tool message answers a call of an assistant message before it: a model provider refuses a conversation
    holding one that answers none, and every later round of the thread would give it the model."""
    if isinstance(message, AIMessage):
        called.update(call["id"] or "" for call in message.tool_calls)
    elif isinstance(message, ToolMessage):
        if message.tool_call_id not in called:
            raise InvalidInputError(
                f"{where}: field 'tool_call_id' ({message.tool_call_id!r}) answers no tool call of an assistant "
                "message before it; give that message the call in its 'tool_calls', or leave the tool message out"
            )
        called.discard(message.tool_call_id)


def summary_points(rows: Sequence[dict[str, Any]], window: int) -> list[int]:
    """The last sequences at which the imported thread is summarized: a round's end once `window` messages came
    after the previous point, and the last message."""
    ends = [
        row["sequence_number"]
        for row, after in zip(rows, [*rows[1:], None], strict=True)
        if after is None or after["round_number"] != row["round_number"]
    ]
    points, previous = [], -1
    for end in ends:
        if end - previous >= window or end == ends[-1]:
            points.append(end)
            previous = end
    return points


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

    async def run(self, key: ConversationKey, messages: Sequence[TimedMessage], *, summarize: bool) -> ImportReport:
        now = self.clock()
        rows = import_rows(key, messages, now)
        with tenant_scope(key.tenant_id):
            await self.queries.store_import(key, rows, now)
            memory_ids = await self._summarize(key, rows) if summarize else []
        if self.embed is not None and not memory_ids:
            await self.embed(key.user_id, key.tenant_id)
        return ImportReport(
            key.conversation_id,
            key.user_id,
            key.tenant_id,
            len(rows),
            rows[-1]["round_number"],
            rows[0]["created_at"],
            rows[-1]["created_at"],
            tuple(memory_ids),
        )

    async def _summarize(self, key: ConversationKey, rows: list[dict[str, Any]]) -> list[int]:
        """One memory version per summary point that the trigger rule finds due, each awaited before the next is
        claimed (a conversation has one summary in flight): the chain its rounds would have made."""
        memory_ids = []
        for point in summary_points(rows, self.window):
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
