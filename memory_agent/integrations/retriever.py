"""MemoryRetriever: a LangChain `BaseRetriever` over recall, so chains and agents' retrieval tools
(`create_retriever_tool`, `retriever | format_docs | prompt | model`) read a user's long-term memory as they
read any vector store.

Each Document is one recalled memory (a turn, an item, a cluster, batch or consolidation summary) in recall's
order, its text as `page_content` and where it came from in `metadata` (the hit's provenance: kind,
is_summary, score, paths, conversation_id and sequences, item ids, source item ids, note or batch summary,
source turns). It depends on the Recaller protocol (MemoryService implements it), not on the service: the
recall it runs is the long-term tier's (`memory.long_term.recall`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from memory_agent.long_term.memory import LongTermMemory
from memory_agent.long_term.recall.block import RecallHit


class Recaller(Protocol):
    """What the retriever needs of a MemoryService: its long-term tier (whose recall it runs), and a way to run
    that from sync code."""

    @property
    def long_term(self) -> LongTermMemory: ...

    def call_sync(self, coro: Any) -> Any: ...


def hit_document(hit: RecallHit) -> Document:
    """A recalled memory as a Document: its text, and its provenance (and the neighbouring turns shown with
    a turn) as metadata."""
    metadata = hit.record()
    return Document(page_content=metadata.pop("content"), metadata=metadata)


class MemoryRetriever(BaseRetriever):
    """Recall for one user as a LangChain retriever: `memory.as_retriever(user_id=...)`.

    `k` is recall's limit (within the MEMORY_AGENT_RECALL_* guardrails: the block's tokens and turns bound it
    too); `as_of` reads the items valid then. Nothing matching gives no Documents (not the latest turns recall
    falls back to at round start). Never calls a chat model."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Any = Field(description="An open MemoryService (anything with its long_term and call_sync).")
    user_id: str
    tenant_id: str | None = None
    k: int = Field(default=10, ge=1)
    as_of: datetime | None = None

    def _recaller(self) -> Recaller:
        recaller: Recaller = self.memory
        return recaller

    async def _recall(self, query: str) -> list[Document]:
        found = await self._recaller().long_term.recall(
            self.user_id, query, tenant_id=self.tenant_id, limit=self.k, as_of=self.as_of, recent_fallback=False
        )
        return [hit_document(hit) for hit in found.results]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        documents: list[Document] = self._recaller().call_sync(self._recall(query))
        return documents

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return await self._recall(query)
