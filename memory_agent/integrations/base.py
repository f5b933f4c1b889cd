"""What both integrations share: the RoundMemory protocol they run rounds through, the conversation id
of a run, and the round end or interruption of a run."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp

from memory_agent.conversation.identity import round_time_zone
from memory_agent.schemas import RoundInfo, fingerprint, new_messages

if TYPE_CHECKING:
    from memory_agent.conversation.memory import ConversationMemory

T = TypeVar("T")


@runtime_checkable
class RoundMemory(Protocol):
    """A memory that prepares and finishes rounds: all `with_memory`, the memory nodes and MemoryMiddleware
    use. MemoryService implements it; so can a stand-in (memory_agent.testing.NoopMemory).

    The round operations are the conversation tier's, written once there (conversation/memory.py:
    prepare_round, finish_round, release_round, record_failed_round): `conversations` is that tier."""

    @property
    def conversations(self) -> ConversationMemory:
        """The conversation tier the rounds run through (looked up at each round: the service opens later)."""
        ...

    def call_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of these coroutines from synchronous code (the sync graph and middleware paths)."""
        ...

    def round_identity(self, config: RunnableConfig | None) -> tuple[str, str | None, str | None]:
        """(thread id, user id, tenant id) a run's config names; None where it names none."""
        ...


def round_scope(memory: RoundMemory, config: RunnableConfig | None) -> tuple[str, dict[str, Any]]:
    """The conversation a run's config names, and prepare_round's keywords for it: whose round it is and the
    user's time zone."""
    conversation_id, user_id, tenant_id = memory.round_identity(config)
    zone = round_time_zone((config or {}).get("configurable") or {})
    return conversation_id, {"user_id": user_id, "tenant_id": tenant_id, "time_zone": zone}


def produced_messages(
    messages: list[BaseMessage], info: RoundInfo, given: Sequence[BaseMessage] | None = None
) -> list[BaseMessage]:
    """The messages the wrapped graph (or agent) added to the context it was given.

    With `given` (the very objects the graph was given, as the round node has them): every message that is not
    one of them, unless it is a copy of one that still stands in the result. So a reply that repeats an earlier
    message's id and content (a model returning the same message object every time: LangGraph puts it in the
    place of its twin) is still this round's. When none of them stands in the result (a state restored from a
    checkpoint: a resumed interrupt), what follows the round's input in it; without `given`, or without the input
    in the result: compared by content fingerprint, not by id (a model or proxy that repeats an earlier id with new
    content still has its reply stored).
    """
    if given is None:
        return new_messages(messages, info.context_fingerprints)
    objects = {id(message) for message in given}
    standing = [message for message in messages if id(message) in objects]
    if not standing:
        # Nothing given stands in the result: the graph's state was restored (a resumed interrupt). It holds the
        # context the round was first given, which a summary made during the pause may have changed since, and
        # then what the graph added: what follows the round's input. Without the input in it, by content.
        inputs = {message.id for message in info.input_messages if message.id is not None}
        last = max((i for i, message in enumerate(messages) if message.id in inputs), default=None)
        if last is not None:
            return messages[last + 1 :]
        return new_messages(messages, [fingerprint(message) for message in given])
    # A copy has its twin's id (a fingerprint covers the id): only messages whose id a standing one has are
    # fingerprinted (none in most rounds: a reply has an id of its own).
    produced = [message for message in messages if id(message) not in objects]
    ids = {message.id for message in produced}
    twins = {fingerprint(message) for message in standing if message.id in ids}
    return [message for message in produced if not twins or fingerprint(message) not in twins]


def with_fresh_ids(produced: Sequence[BaseMessage], taken: Iterable[BaseMessage]) -> list[BaseMessage]:
    """`produced` with a new id on each message whose id an earlier message of the run has (copies: the model's
    own object is not changed). LangGraph's message reducer would put such a reply in the place of the earlier
    message, out of order, instead of adding it."""
    ids = {message.id for message in taken if message.id is not None}
    fresh = []
    for message in produced:
        if message.id is not None and message.id in ids:
            message = message.model_copy(update={"id": f"{message.id[:120]}:{uuid.uuid4().hex[:12]}"})
        if message.id is not None:
            ids.add(message.id)
        fresh.append(message)
    return fresh


async def persist_round(memory: RoundMemory, info: RoundInfo, produced: list[BaseMessage]) -> None:
    """Round end for the graph nodes and the agent middleware: store input + produced messages."""
    try:
        await memory.conversations.finish_round(info.conversation_id, [*info.input_messages, *produced], info)
    except Exception as exc:
        await memory.conversations.record_failed_round(info, "save", exc)
        raise


async def record_interrupted(memory: RoundMemory, info: RoundInfo, error: BaseException) -> None:
    """A round that did not complete: a metrics row (cancelled or failed); an interrupt records nothing, the
    round is stored whole when it is resumed and completes."""
    if isinstance(error, GraphBubbleUp):
        # Paused, not failed: the conversation is free meanwhile; the resumed run takes its lease again.
        await asyncio.shield(memory.conversations.release_round(info))
        return
    stage = "cancelled" if isinstance(error, asyncio.CancelledError) else "graph"
    # Shielded: a cancelled caller still gets its row written.
    await asyncio.shield(memory.conversations.record_failed_round(info, stage, error))
