"""memory_agent: bounded, auditable conversation memory for LangGraph chat apps, stored in PostgreSQL.

The public names are imported when first used (PEP 562): `import memory_agent` stays light, so the
`memory-agent` command starts, and answers Ctrl+C, before LangGraph and the database driver are loaded.

What an app needs to run rounds with memory, and nothing else (as procrastinate's own `__init__`): the service and
its settings, the LangGraph integrations, the store, the default and offline models, the design's window maths,
the key of a conversation and the errors. The rest is public where it lives: the records in `memory_agent.schemas`
(MemoryRecord, ConversationContext, MemorySummaryOutput, RoundSaved, TriggerResult), the summarizer in
`memory_agent.summarize`, the retriever in `memory_agent.integrations.retriever`. The core design's own names (MemoryRecord, MemorySummaryOutput,
ConversationContext, MemoryBackend, MemoryAgent) stay importable from here too (DESIGN_NAMES)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_agent.conversation.window import calculate_summary_range
    from memory_agent.errors import (
        ConfigurationError,
        ConversationOwnerError,
        DatabaseUnavailableError,
        InvalidInputError,
        MemoryAgentError,
        RoundInProgressError,
        ServiceClosedError,
        SummarizationError,
    )
    from memory_agent.integrations.base import RoundMemory
    from memory_agent.integrations.langgraph import MemoryGraph, with_memory
    from memory_agent.integrations.middleware import MemoryMiddleware
    from memory_agent.integrations.nodes import MemoryRoundState, memory_load_node, memory_save_node
    from memory_agent.llm import OfflineSummaryModel, openai_chat_model
    from memory_agent.long_term.store import MemoryStore
    from memory_agent.schemas import ConversationContext as ConversationContext
    from memory_agent.schemas import MemoryRecord as MemoryRecord
    from memory_agent.schemas import MemorySummaryOutput as MemorySummaryOutput
    from memory_agent.schemas.keys import ConversationKey
    from memory_agent.service import MemoryService
    from memory_agent.service.backend import MemoryBackend as MemoryBackend
    from memory_agent.settings import MemorySettings
    from memory_agent.summarize.agent import MemoryAgent as MemoryAgent

# Each public name -> the module that defines it.
_MODULES = {
    "ConfigurationError": "memory_agent.errors",
    "ConversationKey": "memory_agent.schemas.keys",
    "ConversationOwnerError": "memory_agent.errors",
    "DatabaseUnavailableError": "memory_agent.errors",
    "InvalidInputError": "memory_agent.errors",
    "MemoryAgentError": "memory_agent.errors",
    "MemoryGraph": "memory_agent.integrations.langgraph",
    "MemoryMiddleware": "memory_agent.integrations.middleware",
    "MemoryRoundState": "memory_agent.integrations.nodes",
    "MemoryService": "memory_agent.service",
    "MemorySettings": "memory_agent.settings",
    "MemoryStore": "memory_agent.long_term.store",
    "OfflineSummaryModel": "memory_agent.llm",
    "RoundInProgressError": "memory_agent.errors",
    "RoundMemory": "memory_agent.integrations.base",
    "ServiceClosedError": "memory_agent.errors",
    "SummarizationError": "memory_agent.errors",
    "calculate_summary_range": "memory_agent.conversation.window",
    "memory_load_node": "memory_agent.integrations.nodes",
    "memory_save_node": "memory_agent.integrations.nodes",
    "openai_chat_model": "memory_agent.llm",
    "with_memory": "memory_agent.integrations.langgraph",
}
# The core design's names (its schemas, backend and agent) stay importable from here, where the design put them;
# they live, and are exported, in their packages.
DESIGN_NAMES = {
    "ConversationContext": "memory_agent.schemas",
    "MemoryAgent": "memory_agent.summarize.agent",
    "MemoryBackend": "memory_agent.service.backend",
    "MemoryRecord": "memory_agent.schemas",
    "MemorySummaryOutput": "memory_agent.schemas",
}

__all__ = [
    "ConfigurationError",
    "ConversationKey",
    "ConversationOwnerError",
    "DatabaseUnavailableError",
    "InvalidInputError",
    "MemoryAgentError",
    "MemoryGraph",
    "MemoryMiddleware",
    "MemoryRoundState",
    "MemoryService",
    "MemorySettings",
    "MemoryStore",
    "OfflineSummaryModel",
    "RoundInProgressError",
    "RoundMemory",
    "ServiceClosedError",
    "SummarizationError",
    "calculate_summary_range",
    "memory_load_node",
    "memory_save_node",
    "openai_chat_model",
    "with_memory",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name) or DESIGN_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'memory_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *DESIGN_NAMES})
