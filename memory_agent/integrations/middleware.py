"""MemoryMiddleware: conversation memory for `langchain.agents.create_agent`.

    agent = create_agent(model, tools, middleware=[MemoryMiddleware(memory)])
    agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "conv-1"}})

At the start of the agent run (before_agent) the round is prepared: memory + gap + this run's input, in the
budget. Every model call of the run (wrap_model_call) is given that context followed by the messages the run
produced so far, so a tool loop keeps its calls and results together. At the end (after_agent) the input and
every AI and tool message the run produced are stored as one round and a summary starts when one is due.

The loaded context is handed to the model, not written to the agent's `messages`, so it never shows up in the
caller's result nor in `stream_mode="messages"` / `"updates"` (a before_agent that rewrote `messages` would replay
the gap there). The state's `messages` are this run's input and output; with a checkpointer also the earlier
rounds, which are neither stored again nor sent to the model again: what is stored is a fact of the database
(message ids), not a guess from message shapes.

What the round needs between the hooks (its context, its RoundInfo with the conversation's lease token) stays in
this process, never in the agent's state: LangGraph streams every state channel, private ones too ("values",
"updates", "debug", "tasks", "checkpoints", and the server's thread state), whatever `PrivateStateAttr` says (it
only shapes the input and output schemas). The state carries two harmless facts: a digest naming the round's
lease (`lease_reference`) and the fingerprints of the messages the run started with. A run interrupted by
HumanInTheLoopMiddleware (or any `interrupt()`) resumes from its checkpoint; where this process does not have the
round (another process, a restart), it is prepared again from those start messages under the run's own identity,
renewing the lease the digest names, and stored once, whole, when it completes. A new run on a paused thread (a
new message, not a resume) takes that lease over for its own round.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse, ToolCallRequest
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import BaseMessage
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from memory_agent.errors import InvalidInputError
from memory_agent.integrations.base import (
    RoundMemory,
    persist_round,
    record_interrupted,
    round_scope,
    with_fresh_ids,
)
from memory_agent.schemas import LeaseReference, RoundInfo, fingerprint, lease_reference, new_messages

# The rounds in flight in this process (context and RoundInfo), by their state's "round". A run resumed where
# this does not have its round (another process, after a restart, evicted) prepares it again.
_ROUND_CACHE_SIZE = 1024

_Round = tuple[list[BaseMessage], RoundInfo]


class MemoryAgentState(AgentState[Any]):
    # Plain JSON data (checkpointers store it without registered types), and shown to whoever reads the agent's
    # streams (see the module docstring): {"round", "start"}: lease_reference() of the round's lease (a random id
    # when the memory takes no lease) and the fingerprints of the state's messages at the start of the run
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
        self._rounds: dict[str, _Round] = {}

    def _round(self, state: Any, hook: str) -> dict[str, Any]:
        round_ = state.get("memory_round")
        if isinstance(round_, dict) and isinstance(round_.get("info"), dict) and "round" not in round_:
            # A round paused by an earlier release, which kept {"token", "info", "start"}: named by its lease.
            lease = round_["info"].get("lease")
            round_ = {"round": lease_reference(lease) if lease else round_.get("token"), "start": round_.get("start")}
        if not isinstance(round_, dict) or not isinstance(round_.get("round"), str):
            raise InvalidInputError(f"MemoryMiddleware's {hook} hook ran without its before_agent hook")
        return round_

    def _remember(self, reference: str, round_: _Round) -> _Round:
        if len(self._rounds) >= _ROUND_CACHE_SIZE:
            self._rounds.pop(next(iter(self._rounds)))
        self._rounds[reference] = round_
        return round_

    # ------------------------------------------------------------------ agent start

    async def _start(self, config: Any, state: MemoryAgentState) -> dict[str, Any]:
        conversation_id, scope = round_scope(self.memory, config)
        messages = list(state["messages"])
        # A round still named in the state was paused (an interrupt) and this run starts anew instead of resuming
        # it: this round takes its lease over (the state names it; the lease passes only while it is still that
        # round's). Before, the conversation waited for the paused round's lease to expire (600 s), or was refused
        # at once with multitask_strategy "reject". Its messages are stored with this round (not stored yet).
        earlier = state.get("memory_round")
        lease: str | LeaseReference | None = None
        if isinstance(earlier, dict) and isinstance(earlier.get("round"), str):
            paused = self._rounds.pop(earlier["round"], None)
            lease = paused[1].lease if paused is not None else LeaseReference(earlier["round"])
        context, info = await self.memory.conversations.prepare_round(conversation_id, messages, lease=lease, **scope)
        reference = lease_reference(info.lease) if info.lease is not None else uuid.uuid4().hex
        self._remember(reference, (context, info))
        return {"memory_round": {"round": reference, "start": [fingerprint(m) for m in messages]}}

    async def _resume(self, round_: dict[str, Any], messages: Sequence[BaseMessage], config: Any) -> _Round:
        """The round of a run resumed where this process did not start it, prepared again from the run's start
        messages under the run's own identity (its config, not its state: a client may write the state), renewing
        the lease the state names when it is still that round's. The memory may be newer than at the start."""
        conversation_id, scope = round_scope(self.memory, config)
        start = set(round_["start"])
        prepared = await self.memory.conversations.prepare_round(
            conversation_id,
            [m for m in messages if fingerprint(m) in start],
            lease=LeaseReference(round_["round"]),
            **scope,
        )
        return self._remember(round_["round"], prepared)

    async def abefore_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await self._start(get_config(), state)

    def before_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        config = get_config()
        round_scope(self.memory, config)  # a bad config fails here, before the memory loop is involved
        return self.memory.call_sync(self._start(config, state))

    # ------------------------------------------------------------------ every model call

    def _with_context(self, request: ModelRequest, context: list[BaseMessage]) -> ModelRequest:
        produced = new_messages(request.messages, self._round(request.state, "model")["start"])
        return request.override(messages=[*context, *produced])  # type: ignore[list-item]  # AnyMessage

    def _ended(self, round_: dict[str, Any], prepared: _Round) -> RoundInfo:
        """The round of a model call that raised (a failure, a cancelled caller, an interrupt): forgotten here, as
        its lease is given back and a failure recorded (record_interrupted); a run that goes on anyway (a retry
        middleware around this one, a resume) prepares the round again and takes the lease again."""
        self._rounds.pop(round_["round"], None)
        return prepared[1]

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        round_ = self._round(request.state, "model")
        prepared = self._rounds.get(round_["round"])
        if prepared is None:
            prepared = self.memory.call_sync(self._resume(round_, list(request.state["messages"]), get_config()))
        request = self._with_context(request, prepared[0])
        try:
            return _new_reply(handler(request), request)
        except BaseException as exc:
            self.memory.call_sync(record_interrupted(self.memory, self._ended(round_, prepared), exc))
            raise

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        round_ = self._round(request.state, "model")
        prepared = self._rounds.get(round_["round"])
        if prepared is None:
            prepared = await self._resume(round_, list(request.state["messages"]), get_config())
        request = self._with_context(request, prepared[0])
        try:
            return _new_reply(await handler(request), request)
        except BaseException as exc:  # a failed model, or the caller went away mid-generation (cancelled)
            await record_interrupted(self.memory, self._ended(round_, prepared), exc)
            raise

    # ------------------------------------------------------------------ tool calls

    def _tool_failed(self, request: ToolCallRequest) -> RoundInfo | None:
        """The round of a tool call that raised, when this process holds it: the run ends there as it does when
        a model call raises (no after_agent), so its lease is given back now, not when it expires (600 s, the
        conversation's next round waiting meanwhile). A run resumed here that reached a tool before any model
        call holds no lease (its pause gave it back)."""
        round_ = request.state.get("memory_round") if isinstance(request.state, dict) else None
        if not isinstance(round_, dict) or not isinstance(round_.get("round"), str):
            return None
        prepared = self._rounds.get(round_["round"])
        return self._ended(round_, prepared) if prepared is not None else None

    def wrap_tool_call(self, request: ToolCallRequest, handler: Any) -> Any:
        try:
            return handler(request)
        except GraphBubbleUp:  # an interrupt inside the tool: the round is paused, its lease kept until it resumes
            raise
        except BaseException as exc:  # a failed tool, a cancelled caller
            if (info := self._tool_failed(request)) is not None:
                self.memory.call_sync(record_interrupted(self.memory, info, exc))
            raise

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Any) -> Any:
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except BaseException as exc:
            if (info := self._tool_failed(request)) is not None:
                await record_interrupted(self.memory, info, exc)
            raise

    # ------------------------------------------------------------------ agent end

    async def _finish(self, state: MemoryAgentState, config: Any) -> None:
        round_ = self._round(state, "after_agent")
        messages = list(state["messages"])
        # A run resumed elsewhere may reach its end without a model call here (a return_direct tool).
        prepared = self._rounds.get(round_["round"]) or await self._resume(round_, messages, config)
        self._rounds.pop(round_["round"], None)
        await persist_round(self.memory, prepared[1], new_messages(messages, round_["start"]))

    async def aafter_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        await self._finish(state, get_config())
        return {"memory_round": None}

    def after_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self.memory.call_sync(self._finish(state, get_config()))
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
