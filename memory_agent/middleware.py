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
are neither stored again nor sent to the model again.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import BaseMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime
from pydantic import Field
from typing_extensions import NotRequired

from memory_agent.errors import InvalidInputError
from memory_agent.nodes import conversation_id_from_config, persist_round, produced_messages, round_input
from memory_agent.schemas import RoundInfo
from memory_agent.service import MemoryService


class AgentRound(RoundInfo):
    """A round in flight: what RoundInfo records, plus the context every model call of the run starts from."""

    context: list[BaseMessage] = Field(default_factory=list, repr=False)
    # With a checkpointer the state still holds earlier rounds; they are neither input nor output of this one.
    history_ids: list[str | None] = Field(default_factory=list, repr=False)

    def produced(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """The messages this run added to its input."""
        history = set(self.history_ids)
        return [m for m in produced_messages(messages, self) if m.id not in history]


class MemoryAgentState(AgentState[Any]):
    memory_round: NotRequired[Annotated[AgentRound | None, PrivateStateAttr]]


class MemoryMiddleware(AgentMiddleware[MemoryAgentState, Any, Any]):
    """Load memory at the start of an agent run, persist the round and trigger a summary at its end.

    The conversation is the run's `config["configurable"]["thread_id"]`. Give the agent only the new
    message(s) of the round: the memory supplies everything before them.
    """

    state_schema = MemoryAgentState

    def __init__(self, memory: MemoryService) -> None:
        super().__init__()
        self.memory = memory
        self.tools = []

    # ------------------------------------------------------------------ agent start

    async def _start(self, conversation_id: str, messages: list[BaseMessage]) -> dict[str, Any]:
        incoming = round_input(messages)
        context, info = await self.memory.prepare_round(conversation_id, incoming)
        history = [m.id for m in messages[: len(messages) - len(incoming)]]
        return {"memory_round": AgentRound(**dict(info), context=context, history_ids=history)}

    async def abefore_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await self._start(conversation_id_from_config(get_config()), list(state["messages"]))

    def before_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        conversation_id = conversation_id_from_config(get_config())
        return self.memory.call_sync(self._start(conversation_id, list(state["messages"])))

    # ------------------------------------------------------------------ every model call

    def _with_context(self, request: ModelRequest) -> ModelRequest:
        round_ = request.state.get("memory_round")
        if not isinstance(round_, AgentRound):
            raise InvalidInputError("MemoryMiddleware's model hook ran without its before_agent hook")
        return request.override(messages=[*round_.context, *round_.produced(request.messages)])

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        return handler(self._with_context(request))

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        return await handler(self._with_context(request))

    # ------------------------------------------------------------------ agent end

    def _finish(self, state: MemoryAgentState) -> Any:
        round_ = state.get("memory_round")
        if not isinstance(round_, AgentRound):
            raise InvalidInputError("MemoryMiddleware's after_agent hook ran without its before_agent hook")
        return persist_round(self.memory, round_, round_.produced(list(state["messages"])))

    async def aafter_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        await self._finish(state)
        return {"memory_round": None}

    def after_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self.memory.call_sync(self._finish(state))
        return {"memory_round": None}
