"""LangGraph glue: the round-start and round-end nodes, and `with_memory` that wraps a compiled graph.

No SQL and no window maths here: the nodes call a RoundMemory (MemoryService).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.channels.base import BaseChannel
from langgraph.errors import ErrorCode, GraphBubbleUp, GraphInterrupt, InvalidUpdateError, create_error_message
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import is_typeddict

from memory_agent.integrations.base import (
    RoundMemory,
    persist_round,
    produced_messages,
    record_interrupted,
    round_scope,
    with_fresh_ids,
)
from memory_agent.integrations.direct import direct_round_config, fresh_channel, plain_graph
from memory_agent.integrations.nodes import MemoryRoundState, memory_load_node, memory_save_node
from memory_agent.schemas import RoundInfo

__all__ = ["MemoryRoundState", "memory_load_node", "memory_save_node", "with_memory"]

# The key of a graph result's interrupts (LangGraph keeps its own constant private).
INTERRUPT = "__interrupt__"


def _messages_of(state: Any) -> list[BaseMessage]:
    return list((state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)) or [])


def _with_messages(state: Any, messages: list[BaseMessage]) -> Any:
    if isinstance(state, dict):
        return {**state, "messages": messages}
    return state.model_copy(update={"messages": messages})


class _RoundNode(Runnable[Any, Any]):
    """The round node's runnable. Like the nodes LangGraph makes of plain functions, it starts no run of its own
    in the callbacks (no child task, no callback manager per round: docs/measurements/code.md): the
    wrapped graph's runs are children of the node's task, and its streams reach the caller as before."""

    def __init__(
        self,
        graph: Any,
        run: Callable[[Any, RunnableConfig], Any],
        arun: Callable[[Any, RunnableConfig], Awaitable[Any]],
        name: str,
    ) -> None:
        self.name = name
        self.graph = graph
        self._run = run
        self._arun = arun

    # The config is passed on as LangGraph gives it (as its own nodes do): LangChain's ensure_config would fill in
    # its recursion limit of 25 where LangGraph leaves it out, and the wrapped graph would stop there, not at
    # LangGraph's default.
    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._run(input, config if config is not None else ensure_config())

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._arun(input, config if config is not None else ensure_config())


def _raise_interrupts(output: Any) -> Any:
    """A wrapped graph run as a graph of its own (MemoryGraph's direct path) returns its interrupts in its
    result; run as a subgraph it raises them. Either way the round is paused, not finished: raised here too."""
    if isinstance(output, dict) and output.get(INTERRUPT):
        raise GraphInterrupt(output[INTERRUPT])
    return output


def memory_round_node(graph: Any, memory: RoundMemory, name: str) -> Runnable[Any, Any]:
    """One node for a whole round: load memory + gap, run `graph` on that context, persist the round.

    Its update carries only the messages `graph` added, which is all a caller's stream shows. One node
    instead of load → graph → save saves LangGraph two steps on every round.
    """

    def begin(state: Any, config: RunnableConfig) -> Any:
        conversation_id, scope = round_scope(memory, config)
        return memory.conversations.prepare_round(conversation_id, _messages_of(state), **scope)

    def produced(state: Any, workflow: list[BaseMessage], output: Any, info: RoundInfo) -> list[BaseMessage]:
        if not isinstance(output, dict):
            return []
        made = produced_messages(_messages_of(output), info, workflow)
        return with_fresh_ids(made, [*_messages_of(state), *workflow])

    def result(output: Any, messages: list[BaseMessage]) -> Any:
        return _with_messages(output, messages) if isinstance(output, dict) else output

    async def arun(state: Any, config: RunnableConfig) -> Any:
        workflow, info = await begin(state, config)
        try:
            output = _raise_interrupts(await graph.ainvoke(_with_messages(state, workflow), config))
        except BaseException as exc:
            await record_interrupted(memory, info, exc)
            raise
        messages = produced(state, workflow, output, info)
        await persist_round(memory, info, messages)
        return result(output, messages)

    def run(state: Any, config: RunnableConfig) -> Any:
        workflow, info = memory.call_sync(begin(state, config))
        try:
            output = _raise_interrupts(graph.invoke(_with_messages(state, workflow), config))
        except BaseException as exc:
            memory.call_sync(record_interrupted(memory, info, exc))
            raise
        messages = produced(state, workflow, output, info)
        memory.call_sync(persist_round(memory, info, messages))
        return result(output, messages)

    return _RoundNode(graph, run, arun, name)


class MemoryGraph(CompiledStateGraph[Any, Any, Any, Any]):
    """What `with_memory` returns for a graph whose state is only "messages": a compiled graph like any
    other, whose `invoke`/`ainvoke` run the round node directly when nothing could tell the difference.

    "Nothing could tell": a plain invoke (no stream mode, context or interrupt options) of a wrapped LangGraph
    graph (any other runnable needs the runner's run context), no recursion limit below 1, no checkpointer,
    store, cache or interrupt nodes on this graph or the wrapped one, no step timeout or retry policy, no
    callback handler (tracing included), not running inside another graph (integrations/direct.py decides).
    Then LangGraph's runner around the one node adds nothing but its cost (docs/measurements/code.md: the
    no-op floor of `make bench`); the input and the node's update go through a fresh "messages" channel
    of this graph, so the result is the runner's, an interrupt included (the round paused, its interrupts in
    the result). Anything else (streams, `Command`, a checkpointer set later, tracing) takes the runner.
    """

    def _direct(self, input: Any, config: RunnableConfig | None, options: dict[str, Any]) -> Any:
        pregel_node = self.nodes[self._round_node_name()]
        node = pregel_node.bound if not options else None
        if not isinstance(node, _RoundNode) or not isinstance(input, dict) or input.keys() != {"messages"}:
            return None
        if not plain_graph(self) or pregel_node.retry_policy or pregel_node.cache_policy or pregel_node.timeout:
            return None
        run_config = direct_round_config(self.config, config, node.graph)
        template = self.channels["messages"]
        if run_config is None or not isinstance(template, BaseChannel):
            return None
        channel = fresh_channel(template)
        channel.update([input["messages"]])
        return node, channel, run_config

    def _round_node_name(self) -> str:
        return next(name for name in self.nodes if name != START)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **options: Any) -> Any:
        direct = self._direct(input, config, options)
        if direct is None:
            return super().invoke(input, config, **options)
        node, channel, run_config = direct
        try:
            with _as_a_task(node.name):
                return _apply(channel, node.invoke({"messages": channel.get()}, run_config))
        except GraphInterrupt as paused:
            return _paused(channel, paused)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **options: Any) -> Any:
        direct = self._direct(input, config, options)
        if direct is None:
            return await super().ainvoke(input, config, **options)
        node, channel, run_config = direct
        try:
            with _as_a_task(node.name):
                return _apply(channel, await node.ainvoke({"messages": channel.get()}, run_config))
        except GraphInterrupt as paused:
            return _paused(channel, paused)


def _apply(channel: BaseChannel[Any, Any, Any], update: Any) -> dict[str, Any]:
    """The round node's update through the "messages" channel, and the graph's result, as the runner does."""
    if update is None:
        return {"messages": channel.get()}
    if not isinstance(update, dict):
        message = create_error_message(
            message=f"Expected dict, got {update}", error_code=ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE
        )
        raise InvalidUpdateError(message)
    if "messages" in update:
        channel.update([update["messages"]])
    return {"messages": channel.get()}


@contextmanager
def _as_a_task(name: str) -> Iterator[None]:
    """An error inside noted as the runner notes an error of a task it ran (the task's id is its own on either
    path); an interrupt or a hand-off (GraphBubbleUp) passes as it is."""
    try:
        yield
    except GraphBubbleUp:
        raise
    except Exception as error:
        error.add_note(f"During task with name '{name}' and id '{uuid.uuid4()}'")
        raise


def _paused(channel: BaseChannel[Any, Any, Any], paused: GraphInterrupt) -> dict[str, Any]:
    """The runner's result of an interrupted round: the state as it was, and the interrupts."""
    return {"messages": channel.get(), INTERRUPT: list(paused.args[0] if paused.args else ())}


def _only_messages(builder: Any) -> bool:
    """A TypedDict state whose one key is "messages" (MessagesState and its like): what MemoryGraph serves."""
    return is_typeddict(builder.state_schema) and list(builder.channels) == ["messages"] and not builder.managed


def with_memory(graph: Any, memory: RoundMemory, *, name: str = "agent") -> Any:
    """Wrap a compiled graph whose state has "messages": each invoke is one round with memory.

    The wrapped graph sees only the memory, the gap and this round's input, never the whole history.
    Returns a compiled graph with the same state (and context_schema) as `graph`; its result holds the round's input and the
    messages `graph` produced. (`memory_load_node` and `memory_save_node` do the same inside a graph of
    your own.)
    """
    if isinstance(graph, StateGraph):
        raise TypeError("with_memory wraps a compiled graph: pass builder.compile() (and your checkpointer, if any)")
    if not callable(getattr(graph, "ainvoke", None)) or not callable(getattr(graph, "invoke", None)):
        raise TypeError(f"with_memory wraps a compiled graph (a Runnable with invoke/ainvoke), got {type(graph)!r}")
    builder_of_graph = getattr(graph, "builder", None)
    schema = getattr(builder_of_graph, "state_schema", None) or MessagesState
    if "messages" not in getattr(schema, "__annotations__", {}) and not hasattr(schema, "model_fields"):
        schema = MessagesState
    # The wrapped graph's context_schema too: a context given as a dict reaches it as that type, as on its own.
    builder = StateGraph(schema, context_schema=getattr(builder_of_graph, "context_schema", None))
    builder.add_node(name, memory_round_node(graph, memory, name))
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    compiled = builder.compile(name=f"{getattr(graph, 'name', None) or name}_with_memory")
    if not _only_messages(builder):
        return compiled
    # As Pregel.copy does: the same attributes, here under the class with the direct path.
    return MemoryGraph(**{key: value for key, value in vars(compiled).items() if key != "__orig_class__"})
