"""When `with_memory`'s graph may run its round node without LangGraph's runner (MemoryGraph's direct
path): the run's config, or None where the runner would make a difference someone could see."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.channels.base import BaseChannel
from langgraph.pregel import Pregel

try:  # LangGraph's own config merging, callback set-up and empty channel value, so both paths see the same
    from langgraph._internal._config import ensure_config, get_async_callback_manager_for_config
    from langgraph._internal._typing import MISSING
except ImportError:  # pragma: no cover - a LangGraph that moved them: every round takes the runner
    ensure_config = get_async_callback_manager_for_config = None  # type: ignore[assignment]
    MISSING = None

# configurable keys LangGraph's runner sets for the nodes it runs: present when the call comes from inside a
# graph (this graph is then a subgraph: the parent's checkpointer, streams and namespace apply).
_RUNNER_KEY_PREFIX = "__pregel_"


def plain_graph(graph: Any) -> bool:
    """Nothing of the runner's own on `graph` (with_memory's graph or the one it wraps): no checkpointer (run as
    a subgraph, the wrapped graph's checkpoints sit under the node's namespace), store or cache (a subgraph takes
    the parent's, none here), interrupt nodes, debug output, step timeout or retry policy."""
    return (
        getattr(graph, "checkpointer", None) in (None, False)
        and getattr(graph, "store", None) is None
        and getattr(graph, "cache", None) is None
        and not getattr(graph, "interrupt_before_nodes", None)
        and not getattr(graph, "interrupt_after_nodes", None)
        and not getattr(graph, "debug", False)
        and getattr(graph, "step_timeout", None) is None
        and not getattr(graph, "retry_policy", None)
    )


def direct_round_config(
    graph_config: RunnableConfig | None, config: RunnableConfig | None, wrapped: Any
) -> RunnableConfig | None:
    """The config the round node gets on the direct path, or None when the runner must run it.

    The runner is needed when the wrapped graph is not a plain graph, or no graph at all (a graph makes its own
    run context; any other runnable has the runner's: interrupt(), the runtime, the stream writer), when the call
    comes from a parent graph, when any callback handler would see the runner's runs (tracing, a handler in the
    config, LangChain's debug output: the same handlers LangGraph would start them on), and when the runner
    would refuse the config before the round starts (a recursion limit below 1).
    """
    if ensure_config is None or not isinstance(wrapped, Pregel) or not plain_graph(wrapped):
        return None
    merged = ensure_config(graph_config, config)
    if merged["recursion_limit"] < 1:
        return None
    if any(key.startswith(_RUNNER_KEY_PREFIX) for key in merged.get("configurable", {})):
        return None
    callbacks = get_async_callback_manager_for_config(merged)
    if callbacks.handlers or callbacks.inheritable_handlers:
        return None
    merged.pop("run_id", None)
    return merged


def fresh_channel(template: BaseChannel[Any, Any, Any]) -> BaseChannel[Any, Any, Any]:
    """An empty channel like the runner makes for each run (`from_checkpoint`), sharing nothing with `template`."""
    return template.from_checkpoint(MISSING)
