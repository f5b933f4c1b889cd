"""The records of an import: a message brought from elsewhere (a JSON lines file's line, a record in a list, a
(message, time) pair) checked and read as a TimedMessage, the message with the time it was written.

Each check raises InvalidInputError naming the message (the line of a file) and the field; the import's one
transaction then writes nothing. The thread as a whole (order of times, tool calls answered, ids) is checked as
it is stored (conversation/import_rows.py, conversation/imports.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from memory_agent.errors import InvalidInputError

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


def read_jsonl(lines: Iterable[str | bytes], source: str = "input") -> Iterator[TimedMessage]:
    """The messages of a JSON lines text, one object a line (blank lines skipped; a line of bytes is UTF-8, a byte
    order mark dropped), read as they are asked for: a file of any size is held one line at a time. Errors name
    `source`'s line."""
    for number, line in enumerate(lines, start=1):
        where = f"{source}, line {number}"
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(
                    f"{where}: not UTF-8 (byte 0x{line[exc.start]:02x} at byte {exc.start + 1} of the line); save the "
                    "file as UTF-8"
                ) from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # an editor's byte order mark is not JSON
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        yield message_from_record(record, where)


def parse_jsonl(lines: Iterable[str | bytes], source: str = "input") -> list[TimedMessage]:
    """read_jsonl's messages, all read at once (a short text; an import streams a file with read_jsonl)."""
    return list(read_jsonl(lines, source))


def _with_time(message: Any, created_at: Any, where: str, source: str | None = None) -> TimedMessage:
    """A message given with its time (a pair or a TimedMessage), checked."""
    if not isinstance(message, BaseMessage):
        raise InvalidInputError(
            f"{where}: a message with its time is a LangChain message, got {type(message).__name__}; give "
            'HumanMessage("...") or a record {"role", "content", "created_at"}'
        )
    return TimedMessage(message, parse_time(created_at, where), source)


def timed_entry(entry: Any, position: int) -> TimedMessage:
    """A TimedMessage, a (message, time) pair or an import-format record, as a TimedMessage (errors name the
    position)."""
    where = f"message {position}"
    if isinstance(entry, TimedMessage):
        return _with_time(entry.message, entry.created_at, where, entry.source)
    if isinstance(entry, tuple) and len(entry) == 2:
        return _with_time(entry[0], entry[1], where)
    return message_from_record(entry, where)


def check_iterable(messages: Any) -> None:
    """Messages to import come as a list or any (async) iterable of them, never as one record or text."""
    iterable = isinstance(messages, (Iterable, AsyncIterable))
    if not iterable or isinstance(messages, (str, bytes, Mapping)):
        raise InvalidInputError(
            f"messages to import must be a list (or an iterable) of messages, got {type(messages).__name__}"
        )


def timed(messages: Sequence[Any]) -> list[TimedMessage]:
    """TimedMessage, (message, time) pairs or import-format records, as TimedMessage (errors name the position)."""
    if not isinstance(messages, (list, tuple)):
        raise InvalidInputError(f"messages to import must be a list, got {type(messages).__name__}")
    return [timed_entry(entry, position) for position, entry in enumerate(messages)]
