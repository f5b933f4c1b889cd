"""MemoryMiddleware: conversation memory for `langchain.agents.create_agent`.

    agent = create_agent(model, tools, middleware=[MemoryMiddleware(memory)])
    agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "conv-1"}})

At the start of the agent run (before_agent) the round is prepared: memory + gap + this run's input, in the
budget. Every model call of the run (wrap_model_call) is given that context followed by the messages the run
produced so far, so a tool loop keeps its calls and results together. At the end (after_agent) the input and
every AI and tool message the run produced are stored as one round and a summary starts when one is due.

The loaded context is handed to the model, not written to the agent's `messages`: it lives in private
middleware state (`memory_round`, hidden from its repr), so it never shows up in the caller's result nor in
`stream_mode="messages"` / `"updates"` (a before_agent that rewrote `messages` would replay the gap there).
The state's `messages` are this run's input and output; with a checkpointer also the earlier rounds, which
are neither stored again nor sent to the model again: what is stored is a fact of the database (message ids),
not a guess from message shapes. The private state is plain JSON data, so a run interrupted by
HumanInTheLoopMiddleware (or any `interrupt()`) resumes from its checkpoint and stores the round once, whole,
when it completes.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import BaseMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from memory_agent.errors import InvalidInputError
from memory_agent.integrations.base import (
    RoundMemory,
    persist_round,
    record_interrupted,
    round_scope,
    with_fresh_ids,
)
from memory_agent.schemas import RoundInfo, fingerprint, new_messages

# Contexts of the rounds in flight in this process, by round token. The loaded context (memory and gap) is
# never written to the agent's state: it would show in stream_mode="updates" and in every checkpoint. A run
# resumed where the cache does not have it (another process, after a restart) loads it again.
_CONTEXT_CACHE_SIZE = 1024


class MemoryAgentState(AgentState[Any]):
    # Plain JSON data (checkpointers store it without registered types): {"token", "info", "start"}: the
    # round's RoundInfo.to_state() and the fingerprints of the state's messages at the start of the run
    # (history and input; anything else at the end of the run was produced by it).
    memory_round: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


class MemoryMiddleware(AgentMiddleware[MemoryAgentState, Any, Any]):
    """Load memory at the start of an agent run, persist the round and trigger a summary at its end.

    The conversation is the run's `config["configurable"]["thread_id"]`. The round's input is every message
    of the agent's state not stored yet (with a checkpointer, the earlier rounds are stored already).
    """

    state_schema = MemoryAgentState

    def __init__(self, memory: RoundMemory) -> None:
        super().__init__()
        self.memory = memory
        self.tools = []
        self._contexts: dict[str, list[BaseMessage]] = {}

    def _round(self, state: Any, hook: str) -> dict[str, Any]:
        round_ = state.get("memory_round")
        if not isinstance(round_, dict):
            raise InvalidInputError(f"MemoryMiddleware's {hook} hook ran without its before_agent hook")
        return round_

    # ------------------------------------------------------------------ agent start

    def _remember(self, token: str, context: list[BaseMessage]) -> list[BaseMessage]:
        if len(self._contexts) >= _CONTEXT_CACHE_SIZE:
            self._contexts.pop(next(iter(self._contexts)))
        self._contexts[token] = context
        return context

    async def _start(self, config: Any, messages: list[BaseMessage]) -> dict[str, Any]:
        conversation_id, scope = round_scope(self.memory, config)
        context, info = await self.memory.conversations.prepare_round(conversation_id, messages, **scope)
        token = uuid.uuid4().hex
        self._remember(token, context)
        return {"memory_round": {"token": token, "info": info.to_state(), "start": [fingerprint(m) for m in messages]}}

    async def _reload(self, round_: dict[str, Any], messages: list[BaseMessage]) -> list[BaseMessage]:
        """The context of a run resumed where this process did not start it: loaded again from the run's
        start messages (the memory may be newer than the one the run started with)."""
        start = set(round_["start"])
        info = round_["info"]
        context, _ = await self.memory.conversations.prepare_round(
            info["conversation_id"],
            [m for m in messages if fingerprint(m) in start],
            lease=info.get("lease"),
            user_id=info.get("user_id"),
            tenant_id=info.get("tenant_id"),
        )
        return self._remember(round_["token"], context)

    async def abefore_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await self._start(get_config(), list(state["messages"]))

    def before_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        config = get_config()
        round_scope(self.memory, config)  # a bad config fails here, before the memory loop is involved
        return self.memory.call_sync(self._start(config, list(state["messages"])))

    # ------------------------------------------------------------------ every model call

    def _with_context(self, request: ModelRequest, context: list[BaseMessage]) -> ModelRequest:
        produced = new_messages(request.messages, self._round(request.state, "model")["start"])
        return request.override(messages=[*context, *produced])  # type: ignore[list-item]  # AnyMessage

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        round_ = self._round(request.state, "model")
        context = self._contexts.get(round_["token"])
        if context is None:
            context = self.memory.call_sync(self._reload(round_, list(request.state["messages"])))
        request = self._with_context(request, context)
        return _new_reply(handler(request), request)

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        round_ = self._round(request.state, "model")
        context = self._contexts.get(round_["token"])
        if context is None:
            context = await self._reload(round_, list(request.state["messages"]))
        request = self._with_context(request, context)
        try:
            return _new_reply(await handler(request), request)
        except asyncio.CancelledError as exc:  # the caller went away mid-generation
            info = RoundInfo.from_state(self._round(request.state, "model")["info"])
            await record_interrupted(self.memory, info, exc)
            raise

    # ------------------------------------------------------------------ agent end

    def _finish(self, state: MemoryAgentState) -> Any:
        round_ = self._round(state, "after_agent")
        self._contexts.pop(round_["token"], None)
        info = RoundInfo.from_state(round_["info"])
        return persist_round(self.memory, info, new_messages(list(state["messages"]), round_["start"]))

    async def aafter_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        await self._finish(state)
        return {"memory_round": None}

    def after_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self.memory.call_sync(self._finish(state))
        return {"memory_round": None}


def _new_reply(response: Any, request: ModelRequest) -> Any:
    """The model's reply with a new id where an earlier message (the agent's state, the loaded context) has its id:
    a model that returns the same message object every time would otherwise replace that message in the agent's
    state (LangGraph's message reducer) instead of adding this round's reply."""
    taken = [*request.state["messages"], *request.messages]
    if isinstance(response, BaseMessage):
        return with_fresh_ids([response], taken)[0]
    inner = getattr(response, "model_response", None)  # ExtendedModelResponse: a ModelResponse and a Command
    target = inner if inner is not None else response
    if isinstance(getattr(target, "result", None), list):
        target.result = with_fresh_ids(target.result, taken)
    return response
