"""A LangGraph checkpointer thread's messages with the times they were written, for memory.transfers.import_thread.

The thread's messages are those of its latest checkpoint (its state's `messages` channel, the root graph's); each
is dated by the first checkpoint that holds it (by id; a message without one, as operator.add keeps them, by its
place and text), whose `ts` is when the step that wrote it ended. A summary
LangChain's SummarizationMiddleware put in the state in place of older messages (a HumanMessage marked
`lc_source: summarization`, not the user's words) is replaced by the messages it replaced, read from the
checkpoint before it: they are the thread's history, and conversation memory summarizes them itself. A message
removed otherwise (RemoveMessage of its id) stays out. Any checkpointer works: an async one (AsyncPostgresSaver)
through `alist`, a sync one (PostgresSaver) through `list` in a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from memory_agent.conversation.imports import TimedMessage, parse_time
from memory_agent.errors import InvalidInputError


async def _checkpoints(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> list[CheckpointTuple]:
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    try:
        return [found async for found in checkpointer.alist(config)]
    except NotImplementedError:  # a sync checkpointer
        return await asyncio.to_thread(lambda: list(checkpointer.list(config)))


def _messages(found: CheckpointTuple, channel: str) -> Sequence[Any]:
    messages = found.checkpoint.get("channel_values", {}).get(channel) or []
    return messages if isinstance(messages, (list, tuple)) else []


def _is_summary(message: Any) -> bool:
    """SummarizationMiddleware's summary of the messages it removed (langchain.agents.middleware.summarization)."""
    return isinstance(message, BaseMessage) and message.additional_kwargs.get("lc_source") == "summarization"


def _summarized(found: Sequence[CheckpointTuple], channel: str) -> dict[str, list[BaseMessage]]:
    """Each summary's id → the messages it replaced: those of the checkpoint before the one it first appears in
    that this one no longer holds, in their order."""
    replaced: dict[str, list[BaseMessage]] = {}
    previous: list[BaseMessage] = []
    for item in found:
        current = [m for m in _messages(item, channel) if isinstance(m, BaseMessage)]
        ids = {m.id for m in current}
        held = {m.id for m in previous}
        removed = [m for m in previous if m.id not in ids]
        for summary in current:
            # None removed: the checkpoint before it is gone (a pruned thread), and the summary is what is left.
            if _is_summary(summary) and summary.id is not None and summary.id not in held and removed:
                replaced[summary.id] = removed
        previous = current
    return replaced


def _key(position: int, message: BaseMessage) -> str:
    """A message's identity across checkpoints: its id, or (none: a reducer such as operator.add gives none) its
    place and text, which an append-only list keeps."""
    return message.id if message.id is not None else f"{position}\x00{message.type}\x00{message.content!r}"


def _expanded(
    messages: Sequence[tuple[BaseMessage, datetime]],
    replaced: dict[str, list[BaseMessage]],
    first_seen: dict[str, datetime],
) -> list[tuple[BaseMessage, datetime]]:
    """`messages` with each summary replaced by what it replaced (a summary of a summary too, recursively), each
    dated by its first checkpoint; a summary whose checkpoint before is gone stays (all the thread holds of that
    history)."""
    out: list[tuple[BaseMessage, datetime]] = []
    for message, when in messages:
        if _is_summary(message) and message.id in replaced:
            earlier = [(m, first_seen.get(m.id or "", when)) for m in replaced.pop(message.id)]
            out.extend(_expanded(earlier, replaced, first_seen))
        else:
            out.append((message, when))
    return out


async def checkpointer_messages(checkpointer: Any, thread_id: str, *, channel: str = "messages") -> list[TimedMessage]:
    """The messages of `thread_id`'s latest checkpoint, oldest first, each with the time of the first checkpoint
    that holds it. InvalidInputError when it is not a checkpointer or the thread has no messages."""
    if not isinstance(checkpointer, BaseCheckpointSaver):
        raise InvalidInputError(
            f"import_thread needs a LangGraph checkpointer (BaseCheckpointSaver), got {type(checkpointer).__name__}"
        )
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidInputError(f"thread_id must be a non-empty string, got {thread_id!r}")
    found = await _checkpoints(checkpointer, thread_id)
    if not found:
        raise InvalidInputError(f"the checkpointer has no checkpoint of thread {thread_id!r}")
    found.sort(key=lambda item: item.checkpoint["ts"])
    first_seen: dict[str, datetime] = {}
    for item in found:
        when = parse_time(item.checkpoint["ts"], f"checkpoint {item.checkpoint['id']}")
        for position, message in enumerate(_messages(item, channel)):
            if isinstance(message, BaseMessage):
                first_seen.setdefault(_key(position, message), when)
    latest = found[-1]
    latest_at = parse_time(latest.checkpoint["ts"], f"checkpoint {latest.checkpoint['id']}")
    state = _messages(latest, channel)
    if not state:
        raise InvalidInputError(f"thread {thread_id!r} has no messages in its state's {channel!r} channel")
    for position, message in enumerate(state):
        if not isinstance(message, BaseMessage):
            raise InvalidInputError(
                f"thread {thread_id!r}: message {position} of channel {channel!r} is a {type(message).__name__}, "
                "not a LangChain message"
            )
    dated = [(message, first_seen.get(_key(position, message), latest_at)) for position, message in enumerate(state)]
    out, previous = [], None
    for message, when in _expanded(dated, _summarized(found, channel), first_seen):
        # A message edited into an earlier place of the state keeps the order of the state.
        when = max(when, previous) if previous is not None else when
        out.append(TimedMessage(message, when))
        previous = when
    return out
