"""Transfers: history and memory moved in and out of the service — a thread imported with the times its messages
were written (conversation/imports.py, integrations/thread_import.py), and a user's whole memory as one document
(transfer/): `memory.transfers`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory_agent.conversation.imports import ImportReport, ThreadImport
from memory_agent.conversation.memory import round_key
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError
from memory_agent.long_term.memory import user_scope
from memory_agent.runtime import MemoryLoop
from memory_agent.transfer import ImportedUser, read_user, write_user
from memory_agent.transfer.load import check_document

if TYPE_CHECKING:
    from memory_agent.service._lifecycle import Parts


class Transfers:
    """import_messages, import_thread, export_user, import_user over the open service's parts."""

    def __init__(self, parts: Parts, loop: MemoryLoop, clock: Callable[[], datetime], window_size: int) -> None:
        self.parts = parts
        self.loop = loop
        self.clock = clock
        self.window_size = window_size  # MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE: an import's windows

    async def import_messages(
        self,
        conversation_id: str,
        messages: Iterable[Any] | AsyncIterable[Any],
        *,
        user_id: str | None = None,
        tenant_id: str | None = None,
        summarize: bool = True,
    ) -> ImportReport:
        """Store a thread brought from elsewhere with the times its messages were written, in the tables rounds
        use: recall finds its turns under their own dates, and (`summarize`) it is summarized window by window as
        its rounds would have been, in this call. `messages`: TimedMessage, (LangChain message, aware datetime)
        pairs or records {"role", "content", "created_at", optional "id", "name", "tool_call_id", "tool_calls"},
        oldest first (a tool message after the assistant message that called it), in a list or any iterator or
        async iterator (`read_jsonl` of a file): read and written a batch at a time, never held whole.
        All or nothing: InvalidInputError names the message and field (nothing written), wherever it is; the
        thread id must be new (ConversationOwnerError when another user's)."""
        key = round_key(conversation_id, user_id, tenant_id)
        parts = self.parts
        importer = ThreadImport(
            parts.backend.conversations,
            parts.conversations.trigger,
            parts.runner.run_summary,
            self.clock,
            self.window_size,
            embed=parts.executor.embed if parts.embedder is not None else None,
        )
        return await self.loop.arun(importer.run(key, messages, summarize=summarize))

    async def import_thread(
        self,
        checkpointer: Any,
        thread_id: str,
        *,
        conversation_id: str | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
        summarize: bool = True,
    ) -> ImportReport:
        """import_messages of a LangGraph checkpointer's thread: the messages of its latest checkpoint, each dated
        by the first checkpoint that holds it (integrations/thread_import.py); stored as `conversation_id`
        (default: the same thread id)."""
        from memory_agent.integrations.thread_import import checkpointer_messages

        messages = await checkpointer_messages(checkpointer, thread_id)
        return await self.import_messages(
            conversation_id or thread_id, messages, user_id=user_id, tenant_id=tenant_id, summarize=summarize
        )

    async def export_user(self, user_id: str, *, tenant_id: str | None = None) -> dict[str, Any]:
        """Everything stored of `user_id` in the tenant as one JSON document (format memory_agent.user_memory,
        `schema_version`): conversations, messages and memory versions, items with validity and sources,
        consolidation notes, batch summaries and schedules, with their times. `memory_agent.transfer.dumps` gives
        its canonical bytes: the same for the same rows. A user without memory gives empty lists."""
        tenant, user = user_scope(user_id, tenant_id)
        backend = self.parts.backend

        async def read() -> dict[str, Any]:
            async with backend.session() as conn:
                return await read_user(conn, tenant, user)

        with tenant_scope(tenant):
            return await self.loop.arun(read())

    async def import_user(
        self,
        document: Mapping[str, Any] | bytes | str,
        *,
        user_id: str | None = None,
        tenant_id: str | None = None,
        conversation_prefix: str = "",
    ) -> ImportedUser:
        """Write an export_user document (or its JSON text) as the memory of `user_id` in `tenant_id` (default:
        the document's), under new ids that keep every reference, with its times. All or nothing: InvalidInputError
        names the record and field (nothing written); the user must hold no memory yet. Thread ids are kept after
        `conversation_prefix` (a thread id belongs to one user: give one to import beside the original). Holds the
        user's forget lock: a forget_user that comes after erases the import whole."""
        if isinstance(document, (bytes, str)):
            try:
                document = json.loads(document)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InvalidInputError(f"the user document is not JSON ({exc})") from None
        if not isinstance(document, Mapping):
            raise InvalidInputError(f"a user document is a JSON object, got {type(document).__name__}")
        check_document(document)  # before its user: a document that is none is refused as such
        tenant, user = user_scope(
            user_id if user_id is not None else document.get("user_id"),
            tenant_id if tenant_id is not None else document.get("tenant_id"),
        )
        if not isinstance(conversation_prefix, str):
            raise InvalidInputError("conversation_prefix must be a string")
        backend = self.parts.backend

        async def write() -> ImportedUser:
            async with backend.session() as conn:
                return await write_user(
                    conn, document, tenant_id=tenant, user_id=user, conversation_prefix=conversation_prefix
                )

        with tenant_scope(tenant):
            return await self.loop.arun(write(), shield=True)
