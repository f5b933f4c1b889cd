"""The round-start and round-end nodes for an app's own StateGraph: `memory_load_node` before the nodes that call
the model, `memory_save_node` after them (`with_memory` runs the same steps inside one node).

The state's `memory_round` is the round's record (RoundInfo.to_state(): plain JSON data) with its lease named by a
digest (lease_reference), never by its token: LangGraph streams every state channel ("values", "updates",
"debug", "checkpoints", and a server's thread state), and the token would let whoever reads a stream end or renew
a round that is not theirs. The token stays in this process, by memory and digest; a save node that does not have
it (the run resumed in another process or after a restart) renews the lease the digest names while it is still
that round's, or takes the conversation's lease again (prepare_round's `lease`).
"""

from __future__ import annotations

from typing import Annotated, Any
from weakref import WeakKeyDictionary

from langchain_core.messages import AnyMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from typing_extensions import TypedDict

from memory_agent.errors import InvalidInputError
from memory_agent.integrations.base import RoundMemory, persist_round, produced_messages, round_scope
from memory_agent.schemas import LeaseReference, RoundInfo, fingerprint, lease_reference

# Tag on the memory nodes' own runs (tracing). In a graph of your own, their updates (the loaded context)
# still show in stream_mode "updates"; with_memory runs the whole round in one node and shows only new messages.
NOSTREAM_TAG = "langsmith:nostream"

# The lease tokens of the rounds in flight in this process, by memory and digest; bounded (a round whose save
# never runs, its graph failed, leaves its token here until it is pushed out).
_HELD_PER_MEMORY = 1024
_held: WeakKeyDictionary[Any, dict[str, str]] = WeakKeyDictionary()


class MemoryRoundState(TypedDict, total=False):
    """What the memory nodes read and write. `memory_round` is private to them."""

    messages: Annotated[list[AnyMessage], add_messages]
    # RoundInfo.to_state() with its lease as lease_reference(): plain data, safe in any checkpoint and stream
    memory_round: dict[str, Any] | None


def _tokens(memory: RoundMemory) -> dict[str, str]:
    try:
        return _held.setdefault(memory, {})
    except TypeError:  # a memory that cannot be weakly referenced: its saves renew the lease by its digest
        return {}


async def _load(memory: RoundMemory, state: MemoryRoundState, config: RunnableConfig) -> dict[str, Any]:
    conversation_id, scope = round_scope(memory, config)
    workflow, info = await memory.conversations.prepare_round(
        conversation_id, list(state.get("messages") or []), **scope
    )
    # The save node tells what the graph produced by content (the state between the nodes is a checkpoint's).
    data = info.model_copy(update={"context_fingerprints": [fingerprint(m) for m in workflow]}).to_state()
    if info.lease is not None:
        data["lease"] = reference = lease_reference(info.lease)
        tokens = _tokens(memory)
        if len(tokens) >= _HELD_PER_MEMORY:
            tokens.pop(next(iter(tokens)))
        tokens[reference] = info.lease
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *workflow], "memory_round": data}


async def _held_lease(memory: RoundMemory, info: RoundInfo, config: RunnableConfig) -> str | None:
    """The token of the lease the state's round names: this process's, else renewed by its digest where it is
    still that round's, else the conversation's lease taken again (a round paused past its lease's expiry)."""
    named = info.lease
    if named is None or not named.startswith("lease:"):  # no lease, or a token kept in state by an earlier release
        return named
    token = _tokens(memory).pop(named, None)
    if token is not None:
        return token
    conversation_id, scope = round_scope(memory, config)
    _, renewed = await memory.conversations.prepare_round(
        conversation_id, list(info.input_messages), lease=LeaseReference(named), **scope
    )
    return renewed.lease


async def _save(memory: RoundMemory, state: MemoryRoundState, config: RunnableConfig) -> dict[str, Any]:
    data = state.get("memory_round")
    if not data:
        raise InvalidInputError("memory_save ran without memory_load: add the load node before the graph it wraps")
    info = RoundInfo.from_state(data)
    info = info.model_copy(update={"lease": await _held_lease(memory, info, config)})
    await persist_round(memory, info, produced_messages(list(state.get("messages") or []), info))
    return {"memory_round": None}


def _memory_node(memory: RoundMemory, step: Any, name: str) -> Runnable[Any, Any]:
    """A node running `step(memory, state, config)` on either path: ainvoke awaits it, invoke blocks on it."""

    async def arun(state: MemoryRoundState, config: RunnableConfig) -> dict[str, Any]:
        return await step(memory, state, config)

    def run(state: MemoryRoundState, config: RunnableConfig) -> dict[str, Any]:
        return memory.call_sync(step(memory, state, config))

    return RunnableLambda(run, afunc=arun, name=name).with_config(tags=[NOSTREAM_TAG])


def memory_load_node(memory: RoundMemory) -> Runnable[Any, Any]:
    """Round start: replace the state's messages by gap + this round's input, with the memory injected."""
    return _memory_node(memory, _load, "memory_load")


def memory_save_node(memory: RoundMemory) -> Runnable[Any, Any]:
    """Round end: persist the user input and every message the graph produced; start a summary if due."""
    return _memory_node(memory, _save, "memory_save")
