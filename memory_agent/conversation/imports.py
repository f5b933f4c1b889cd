"""Importing a thread's messages with the times they were written: history brought from elsewhere (another app,
a LangGraph checkpointer, a JSON lines file) stored as rounds store theirs, dated as it happened.

An import is one transaction: the thread's owner, its conversation row and every message, each with its own
`created_at`; bad input raises InvalidInputError naming the message (the line of a file) and the field, before
anything is written. The thread must be new: history is not merged into a thread that has messages. It takes
the user's forget lock shared (sql/queries/forget.sql), as every writer that must lose against forget_user: an
import that committed first is erased by the forget, and one that waited for the forget writes after it (a new
import). Afterwards the thread is summarized as its rounds would have been: one version per window of
`rolling_window_size` messages ending at a round's end, each on the one before, in this process.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from memory_agent.conversation.messages import check_user_messages, serialize_round
from memory_agent.conversation.queries import ConversationQueries
from memory_agent.conversation.trigger import SummaryTrigger
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError
from memory_agent.schemas.keys import ConversationKey

ROLES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "assistant": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
}
FIELDS = ("role", "content", "created_at", "id", "name", "tool_call_id", "tool_calls")


@dataclass(frozen=True)
class TimedMessage:
    """A message and the time it was written in its conversation (timezone-aware); `source`: where it was read,
    for errors (a file's line)."""

    message: BaseMessage
    created_at: datetime
    source: str | None = None


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


def parse_time(value: Any, where: str) -> datetime:
    """An ISO 8601 time with its offset ('Z' for UTC), or a timezone-aware datetime."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInputError(
                f"{where}: field 'created_at' is {value!r}, not an ISO 8601 time; write e.g. 2023-09-14T18:30:00+02:00"
            ) from None
    if not isinstance(value, datetime):
        raise InvalidInputError(f"{where}: field 'created_at' must be an ISO 8601 time, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInputError(
            f"{where}: field 'created_at' ({value.isoformat()}) has no time zone; add its offset (+02:00, or Z for UTC)"
        )
    try:  # stored as UTC: a time before year 1 there would be written, then fail every read of the thread
        value.astimezone(UTC)
    except OverflowError:
        raise InvalidInputError(
            f"{where}: field 'created_at' ({value.isoformat()}) is before year 1 in UTC; give the time it was written"
        ) from None
    return value


def message_from_record(record: Any, where: str) -> TimedMessage:
    """One record of the import format: {"role", "content", "created_at", optional "id", "name", "tool_call_id",
    "tool_calls"}."""
    if not isinstance(record, Mapping):
        raise InvalidInputError(f"{where}: a message must be a JSON object, got {type(record).__name__}")
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        raise InvalidInputError(f"{where}: unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS)}")
    for name in ("role", "content", "created_at"):
        if name not in record:
            raise InvalidInputError(f"{where}: field {name!r} is missing")
    role = record["role"]
    if role not in ROLES:
        raise InvalidInputError(f"{where}: field 'role' is {role!r}; use one of {', '.join(ROLES)}")
    content = record["content"]
    if not isinstance(content, str):
        raise InvalidInputError(f"{where}: field 'content' must be a string, got {type(content).__name__}")
    extra: dict[str, Any] = {}
    for name in ("id", "name", "tool_call_id"):
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(f"{where}: field {name!r} must be a string, got {type(value).__name__}")
        if value is not None:
            extra[name] = value
    if role == "tool" and "tool_call_id" not in extra:
        raise InvalidInputError(f"{where}: field 'tool_call_id' is missing (a tool message answers a tool call)")
    if role != "tool" and "tool_call_id" in extra:
        raise InvalidInputError(f"{where}: field 'tool_call_id' belongs to a tool message only, not {role!r}")
    if record.get("tool_calls") is not None:
        if role != "assistant":
            raise InvalidInputError(f"{where}: field 'tool_calls' belongs to an assistant message only, not {role!r}")
        extra["tool_calls"] = _tool_calls(record["tool_calls"], where)
    return TimedMessage(ROLES[role](content=content, **extra), parse_time(record["created_at"], where), where)


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    """An assistant record's tool calls: [{"id", "name", optional "args" (an object)}], as LangChain holds them."""
    shape = 'a list of {"id": "...", "name": "...", "args": {...}}'
    if not isinstance(calls, list):
        raise InvalidInputError(f"{where}: field 'tool_calls' must be {shape}, got {type(calls).__name__}")
    out = []
    for call in calls:
        if not isinstance(call, Mapping) or not all(isinstance(call.get(k), str) and call[k] for k in ("id", "name")):
            raise InvalidInputError(f"{where}: field 'tool_calls' must be {shape}; a call lacks its id or name")
        args = call.get("args", {})
        if not isinstance(args, Mapping) or set(call) - {"id", "name", "args", "type"}:
            raise InvalidInputError(f"{where}: field 'tool_calls' must be {shape}, got {call!r}")
        out.append({"id": call["id"], "name": call["name"], "args": dict(args)})
    return out


def parse_jsonl(lines: Iterable[str], source: str = "input") -> list[TimedMessage]:
    """The messages of a JSON lines text, one object a line (blank lines skipped); errors name `source`'s line."""
    messages = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}, line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        messages.append(message_from_record(record, where))
    return messages


def timed(messages: Sequence[Any]) -> list[TimedMessage]:
    """TimedMessage, (message, time) pairs or import-format records, as TimedMessage (errors name the position)."""
    if not isinstance(messages, (list, tuple)):
        raise InvalidInputError(f"messages to import must be a list, got {type(messages).__name__}")
    out = []
    for position, entry in enumerate(messages):
        where = f"message {position}"
        if isinstance(entry, TimedMessage):
            out.append(TimedMessage(entry.message, parse_time(entry.created_at, where), entry.source))
        elif isinstance(entry, tuple) and len(entry) == 2:
            out.append(TimedMessage(entry[0], parse_time(entry[1], where)))
        else:
            out.append(message_from_record(entry, where))
    return out


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
        except InvalidInputError as exc:
            # serialize_round names the message by its place in the round of one it was given: "message 0".
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
    check_user_messages([entry.message for entry in messages])
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
    ) -> None:
        self.queries = queries
        self.trigger = trigger
        self.run_summary = run_summary
        self.clock = clock
        self.window = window

    async def run(self, key: ConversationKey, messages: Sequence[TimedMessage], *, summarize: bool) -> ImportReport:
        now = self.clock()
        rows = import_rows(key, messages, now)
        with tenant_scope(key.tenant_id):
            await self.queries.store_import(key, rows, now)
            memory_ids = await self._summarize(key, rows) if summarize else []
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
