"""memory_agent: bounded, auditable conversation memory for LangGraph chat apps, stored in PostgreSQL.

The public names are imported when first used (PEP 562): `import memory_agent` stays light, so the
`memory-agent` command starts, and answers Ctrl+C, before LangGraph and the database driver are loaded."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_agent.conversation.window import calculate_summary_range, should_trigger_summary
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
    from memory_agent.integrations.langgraph import (
        MemoryGraph,
        MemoryRoundState,
        memory_load_node,
        memory_save_node,
        with_memory,
    )
    from memory_agent.integrations.middleware import MemoryMiddleware
    from memory_agent.integrations.retriever import MemoryRetriever
    from memory_agent.llm import OfflineSummaryModel, openai_chat_model
    from memory_agent.long_term.store import MemoryStore
    from memory_agent.schemas import (
        ConversationContext,
        MemoryRecord,
        MemorySummaryOutput,
        RoundSaved,
        TriggerResult,
    )
    from memory_agent.schemas.keys import ConversationKey
    from memory_agent.service import MemoryService
    from memory_agent.service.backend import MemoryBackend
    from memory_agent.settings import MemorySettings
    from memory_agent.summarize.agent import MemoryAgent

# Each public name -> the module that defines it.
_MODULES = {
    "ConfigurationError": "memory_agent.errors",
    "ConversationContext": "memory_agent.schemas",
    "ConversationKey": "memory_agent.schemas.keys",
    "ConversationOwnerError": "memory_agent.errors",
    "DatabaseUnavailableError": "memory_agent.errors",
    "InvalidInputError": "memory_agent.errors",
    "MemoryAgent": "memory_agent.summarize.agent",
    "MemoryAgentError": "memory_agent.errors",
    "MemoryBackend": "memory_agent.service.backend",
    "MemoryGraph": "memory_agent.integrations.langgraph",
    "MemoryMiddleware": "memory_agent.integrations.middleware",
    "MemoryRecord": "memory_agent.schemas",
    "MemoryRetriever": "memory_agent.integrations.retriever",
    "MemoryRoundState": "memory_agent.integrations.langgraph",
    "MemoryService": "memory_agent.service",
    "MemorySettings": "memory_agent.settings",
    "MemoryStore": "memory_agent.long_term.store",
    "MemorySummaryOutput": "memory_agent.schemas",
    "OfflineSummaryModel": "memory_agent.llm",
    "RoundInProgressError": "memory_agent.errors",
    "RoundMemory": "memory_agent.integrations.base",
    "RoundSaved": "memory_agent.schemas",
    "ServiceClosedError": "memory_agent.errors",
    "SummarizationError": "memory_agent.errors",
    "TriggerResult": "memory_agent.schemas",
    "calculate_summary_range": "memory_agent.conversation.window",
    "memory_load_node": "memory_agent.integrations.langgraph",
    "memory_save_node": "memory_agent.integrations.langgraph",
    "openai_chat_model": "memory_agent.llm",
    "should_trigger_summary": "memory_agent.conversation.window",
    "with_memory": "memory_agent.integrations.langgraph",
}

__all__ = [
    "ConfigurationError",
    "ConversationContext",
    "ConversationKey",
    "ConversationOwnerError",
    "DatabaseUnavailableError",
    "InvalidInputError",
    "MemoryAgent",
    "MemoryAgentError",
    "MemoryBackend",
    "MemoryGraph",
    "MemoryMiddleware",
    "MemoryRecord",
    "MemoryRetriever",
    "MemoryRoundState",
    "MemoryService",
    "MemorySettings",
    "MemoryStore",
    "MemorySummaryOutput",
    "OfflineSummaryModel",
    "RoundInProgressError",
    "RoundMemory",
    "RoundSaved",
    "ServiceClosedError",
    "SummarizationError",
    "TriggerResult",
    "calculate_summary_range",
    "memory_load_node",
    "memory_save_node",
    "openai_chat_model",
    "should_trigger_summary",
    "with_memory",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'memory_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
