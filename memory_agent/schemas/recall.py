"""What a round's start needs of recall, whichever tier provides it: the query it searches, the protocol of the
recall the service hands to the round (RoundRecaller: long_term/recall/round_start.py implements it) and of what
it gives back (Recalled), and the metrics of a round that recalled nothing. The conversation tier depends on these
shapes only, never on the long-term tier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from langchain_core.messages import BaseMessage, HumanMessage

from memory_agent.schemas.keys import ConversationKey


def recall_query(messages: Sequence[BaseMessage]) -> str:
    """The text recall searches: the newest user message of the round (its text parts)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            content = message.content
            if isinstance(content, str):
                return content.strip()
            parts = [p if isinstance(p, str) else p.get("text", "") for p in content if isinstance(p, str | dict)]
            return " ".join(part for part in parts if part).strip()
    return ""


def absent_recall_metrics(query: str | None = None, latency_ms: float | None = None) -> dict[str, Any]:
    """The round_metrics fields of recall for a round whose recall gave nothing (`query` and `latency_ms` only
    when it ran and failed)."""
    return {
        "query": query,
        "fts_hits": None,
        "trgm_hits": None,
        "used_fallback": None,
        "recall_path": None,
        "context_items": None,
        "estimated_tokens": None,
        "recall_truncated": None,
        "latency_retrieval_ms": latency_ms,
        "recall_status": None,
        "recall_block": None,
        "recall_hits": None,
    }


class Recalled(Protocol):
    """What recall gave a round: the block injected, the failure (None: none), the round_metrics fields."""

    @property
    def error(self) -> str | None: ...

    @property
    def block(self) -> str: ...

    def without_window(self, conversation_id: str, gap_start_sequence: int | None) -> Recalled:
        """Without the turns the model gets in the round's own context (the gap)."""
        ...

    def metrics(self, query: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class NothingRecalled:
    """A round that did not recall (recall off, no query, no user of its own)."""

    error: str | None = None
    block: str = ""

    def without_window(self, conversation_id: str, gap_start_sequence: int | None) -> NothingRecalled:
        return self

    def metrics(self, query: str) -> dict[str, Any]:
        return absent_recall_metrics()


class RoundRecaller(Protocol):
    """Recall at round start, as the service wires it: whether a round recalls, and its recall (never raises but
    for cancellation: a failed recall is a Recalled with an error)."""

    def recalls(self, key: ConversationKey, query: str) -> bool: ...

    async def __call__(self, key: ConversationKey, query: str, now: datetime) -> Recalled: ...
