"""The data shapes every layer shares, below all of them.

conversation.py: a memory version (MemoryRecord), what the summarizer returns (MemorySummaryOutput), what a round
starts from (ConversationContext) and its results (RoundInfo, RoundSaved, TriggerResult); keys.py: the key of
every row (a tenant and a user, the per-conversation scope when a round names none); items.py: a summary's
structured items and the rules that make two statements of one fact the same item; recall.py: what a round start
needs of recall (the RoundRecaller protocol); framing.py: how stored text is quoted into the context; text.py:
text as PostgreSQL can store it.
May import: errors. Nothing else of memory_agent: db/, conversation/, long_term/ and the rest import these shapes.
"""

from memory_agent.schemas.conversation import (
    ConversationContext,
    LeaseReference,
    MemoryRecord,
    MemoryStatus,
    MemorySummaryOutput,
    RoundInfo,
    RoundSaved,
    SummaryClaim,
    TriggerOutcome,
    TriggerResult,
    fingerprint,
    lease_reference,
    new_messages,
)
from memory_agent.schemas.items import StructuredItems, SummaryItem
from memory_agent.schemas.keys import DEFAULT_TENANT_ID, ConversationKey, UserKey, default_user_id

__all__ = [
    "DEFAULT_TENANT_ID",
    "ConversationContext",
    "ConversationKey",
    "LeaseReference",
    "MemoryRecord",
    "MemoryStatus",
    "MemorySummaryOutput",
    "RoundInfo",
    "RoundSaved",
    "StructuredItems",
    "SummaryClaim",
    "SummaryItem",
    "TriggerOutcome",
    "TriggerResult",
    "UserKey",
    "default_user_id",
    "fingerprint",
    "lease_reference",
    "new_messages",
]
