"""An imported thread's messages rows, checked one message at a time as they are read: while an import streams,
it holds of the thread only its counts, its last time, the tool calls not answered yet and the summary points,
never its messages.

The thread's checks that need more than the message (times in order, none after the service's clock, tool calls
answered, a user message among them) are here; one message an id is decided by the database as the rows are
written (conversation/imports.py: the messages' ids are indexed).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from memory_agent.conversation.import_records import TimedMessage
from memory_agent.conversation.messages import check_user_messages, serialize_round
from memory_agent.errors import InvalidInputError
from memory_agent.schemas.keys import ConversationKey


class SummaryPoints:
    """The last sequences at which an imported thread is summarized: a round's end once `window` messages came
    after the previous point, and the last message. Eight bytes a point (one per window, not per message)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.points = array("q")
        self.previous = -1

    def round_end(self, end: int) -> None:
        if end - self.previous >= self.window:
            self.points.append(end)
            self.previous = end

    def last(self, end: int) -> None:
        if end != self.previous:
            self.points.append(end)
            self.previous = end


def summary_points(rows: Sequence[dict[str, Any]], window: int) -> list[int]:
    """SummaryPoints of a thread's rows (sequence_number, round_number), oldest first."""
    points = SummaryPoints(window)
    for row, after in zip(rows, [*rows[1:], None], strict=True):
        if after is None:
            points.last(row["sequence_number"])
        elif after["round_number"] != row["round_number"]:
            points.round_end(row["sequence_number"])
    return list(points.points)


class ThreadRows:
    """The messages rows of one imported thread, in order: `row` checks a message against the ones before it
    (LangChain messages a round could store, times in order and none after `now`, the service's clock); `finish`
    checks the thread (a message, a user message among them). Rounds start at each user message."""

    def __init__(self, key: ConversationKey, now: datetime, window: int) -> None:
        self.key = key
        self.now = now
        self.count = 0
        self.rounds = 0
        self.first_at: datetime | None = None
        self.last_at: datetime | None = None
        self.said = False  # a user message among them
        self.called: set[str] = set()  # the calls of the assistant messages so far, not yet answered
        self.points = SummaryPoints(window)

    def row(self, entry: TimedMessage) -> dict[str, Any]:
        position = self.count
        where = entry.source or f"message {position}"
        message = entry.message
        _check_tool_pair(message, self.called, where)
        try:
            roles, contents, payloads = serialize_round([message])
            if isinstance(message, HumanMessage):
                check_user_messages([message])
        except InvalidInputError as exc:
            # The checks of a round name the message by its place in the round of one they were given: "message 0".
            text = str(exc)
            named = text.replace("message 0", where, 1) if "message 0" in text else f"{where}: {text}"
            raise InvalidInputError(named) from None
        if entry.created_at > self.now:
            raise InvalidInputError(
                f"{where}: field 'created_at' ({entry.created_at.isoformat()}) is after the service's clock "
                f"({self.now.isoformat()}); an imported message was written in the past"
            )
        if self.last_at is not None and entry.created_at < self.last_at:
            raise InvalidInputError(
                f"{where}: field 'created_at' ({entry.created_at.isoformat()}) is before the message above it "
                f"({self.last_at.isoformat()}); give a thread's messages in the order they were written"
            )
        if roles[0] == "user" or self.rounds == 0:
            if self.rounds:
                self.points.round_end(position - 1)
            self.rounds += 1
        self.said = self.said or roles[0] == "user"
        self.first_at = self.first_at or entry.created_at
        self.last_at = entry.created_at
        self.count += 1
        return {
            "tenant_id": self.key.tenant_id,
            "user_id": self.key.user_id,
            "conversation_id": self.key.conversation_id,
            "sequence_number": position,
            "round_number": self.rounds,
            "role": roles[0],
            "content": contents[0],
            "message": payloads[0],
            "created_at": entry.created_at,
        }

    def finish(self) -> list[int]:
        """The thread's summary points, once every message was given to `row`."""
        if not self.count:
            raise InvalidInputError("nothing to import: the thread has no message")
        if not self.said:
            raise InvalidInputError(
                "the thread needs a user message (role 'user'); none was given: its rounds start at the user's messages"
            )
        self.points.last(self.count - 1)
        return list(self.points.points)


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
