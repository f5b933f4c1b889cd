"""MemoryRetriever: a LangChain `BaseRetriever` over recall, so chains and agents' retrieval tools
(`create_retriever_tool`, `retriever | format_docs | prompt | model`) read a user's long-term memory as they
read any vector store.

Each Document is one recalled memory (a turn, an item, a cluster, batch or consolidation summary) in recall's
order, its text as `page_content` and where it came from in `metadata` (the hit's provenance: kind,
is_summary, score, paths, conversation_id and sequences, item ids, source item ids, note or batch summary,
source turns). It depends on the Recaller protocol (MemoryService implements it), not on the service.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from memory_agent.long_term.recall.block import RecallHit


class Recaller(Protocol):
    """What the retriever needs of a MemoryService: its recall, and a way to run it from sync code."""

    async def recall(
        self,
        user_id: str,
        query: str,
        *,
        tenant_id: str | None = None,
        limit: int = 10,
        as_of: datetime | None = None,
        recent_fallback: bool = True,
    ) -> list[RecallHit]: ...

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

    memory: Any = Field(description="An open MemoryService (anything with its recall and call_sync).")
    user_id: str
    tenant_id: str | None = None
    k: int = Field(default=10, ge=1)
    as_of: datetime | None = None

    def _recaller(self) -> Recaller:
        recaller: Recaller = self.memory
        return recaller

    async def _recall(self, query: str) -> list[Document]:
        hits = await self._recaller().recall(
            self.user_id, query, tenant_id=self.tenant_id, limit=self.k, as_of=self.as_of, recent_fallback=False
        )
        return [hit_document(hit) for hit in hits]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        documents: list[Document] = self._recaller().call_sync(self._recall(query))
        return documents

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return await self._recall(query)
