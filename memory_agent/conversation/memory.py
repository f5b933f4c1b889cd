"""The conversation half of MemoryService's reads: a round's key, a thread's owner, its memory versions, and
deleting a conversation with everything derived from it.

MemoryService inherits it and defines the members it reaches (loop, backend, the forgetting behind delete).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_agent.conversation.identity import validate_identity, validate_user_id
from memory_agent.conversation.messages import validate_conversation_id
from memory_agent.db.backend import MemoryBackend
from memory_agent.db.tenancy import tenant_scope
from memory_agent.schemas import MemoryRecord
from memory_agent.schemas.keys import ConversationKey

if TYPE_CHECKING:
    from memory_agent.runtime import MemoryLoop


class ConversationReads:
    """_key / _owned (a thread's key as given or as recorded), get_memory_history, get_memory, delete_conversation."""

    @property
    def loop(self) -> MemoryLoop:
        raise NotImplementedError

    @property
    def backend(self) -> MemoryBackend:
        raise NotImplementedError

    if TYPE_CHECKING:  # UserMemory's, next in MemoryService's bases

        async def _forget_conversation(self, tenant_id: str, user_id: str, conversation_id: str) -> bool: ...

    async def _key(self, conversation_id: str, user_id: str | None, tenant_id: str | None) -> ConversationKey:
        """A round's key as given (no user → the conversation's own scope), checked like any round input."""
        validate_conversation_id(conversation_id)
        if user_id is not None:
            validate_user_id(user_id)
        if tenant_id is not None:
            validate_identity(tenant_id, "tenant_id")
        return ConversationKey.of(conversation_id, user_id, tenant_id)

    async def _owned(self, conversation_id: str, user_id: str | None, tenant_id: str | None) -> ConversationKey:
        """For reads and deletes by thread id: the given user, else the conversation's owner as recorded."""
        if user_id is not None or tenant_id is not None:
            return await self._key(conversation_id, user_id, tenant_id)
        validate_conversation_id(conversation_id)
        owner = await self.loop.arun(self.backend.conversation_owner(conversation_id))
        return ConversationKey(conversation_id, owner[1], owner[0]) if owner else ConversationKey.of(conversation_id)

    async def get_memory_history(
        self, conversation_id: str, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> list[MemoryRecord]:
        """Every memory version of a conversation, oldest first (its owner's unless a user is named)."""
        key = await self._owned(conversation_id, user_id, tenant_id)
        with tenant_scope(key.tenant_id):
            return await self.loop.arun(self.backend.list_memory(key.conversation_id, user_id=key.user_id))

    async def delete_conversation(
        self, conversation_id: str, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> bool:
        """Delete a conversation and everything derived from it, in one transaction: its messages, memory versions
        and metrics, the long-term items only it sourced (lineage of the others), the cluster summaries built
        from an erased item (regenerated without it, or removed below summary_min_cluster_items), the
        consolidation notes and batch summaries made from it (made again by their next run without it), and its
        summary jobs' rows. False when it did not exist."""
        key = await self._owned(conversation_id, user_id, tenant_id)
        with tenant_scope(key.tenant_id):
            coro = self._forget_conversation(key.tenant_id, key.user_id, key.conversation_id)
            return await self.loop.arun(coro, shield=True)

    async def get_memory(self, memory_id: int, *, user_id: str) -> MemoryRecord | None:
        """One memory version by its key (user_id, memory_id)."""
        return await self.loop.arun(self.backend.get_memory(memory_id, user_id=user_id))
