"""memory_agent: bounded, auditable conversation memory for LangGraph chat apps, stored in PostgreSQL."""

from memory_agent.conversation.window import calculate_summary_range, should_trigger_summary
from memory_agent.db.backend import MemoryBackend
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
from memory_agent.settings import MemorySettings
from memory_agent.summarize.agent import MemoryAgent

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
