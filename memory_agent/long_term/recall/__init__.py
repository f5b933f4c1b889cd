"""Recall: what a user said and what their long-term memory holds, found for a query and shown as a bounded
block, the same on every read surface (the round start, memory.long_term.recall, MemoryStore.search, the HTTP route,
the retriever, `memory-agent at`).

settings.py holds the knobs (RecallSettings, read from MEMORY_AGENT_RECALL_*); search.py runs the one statement
(`recall_search` in sql/queries/recall.sql) and applies the guardrails; hybrid.py embeds the query beside it and
re-ranks its hits with their vectors and adds the user's nearest it missed; transaction.py runs recall's statements with its settings; block.py says what
a hit is and renders the block; replies.py shows a recalled question as its reply; query_text.py reads a query (CJK bigrams, pointing to the past, what is searched
and embedded of it); round_start.py is recall as a round sees it
(its query, its metrics, never failing the round); user.py is recall for a named user outside a round. Never calls a chat model. May import what long_term/ may.
"""

from memory_agent.long_term.recall.block import BLOCK_HEADER, RecallHit, estimate_tokens, format_block
from memory_agent.long_term.recall.query_text import bounded_query
from memory_agent.long_term.recall.search import (
    ALL_PATHS,
    SEARCH_PATHS,
    RecallResult,
    RetrievalPath,
    SearchPath,
    recall,
    source_turns,
)
from memory_agent.long_term.recall.settings import RecallSettings, check_recall_settings
from memory_agent.long_term.recall.user import user_recall

__all__ = [
    "ALL_PATHS",
    "BLOCK_HEADER",
    "SEARCH_PATHS",
    "RecallHit",
    "RecallResult",
    "RecallSettings",
    "RetrievalPath",
    "SearchPath",
    "bounded_query",
    "check_recall_settings",
    "estimate_tokens",
    "format_block",
    "recall",
    "source_turns",
    "user_recall",
]
