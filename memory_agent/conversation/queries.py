"""ConversationQueries: the conversation tier's statements, the only code of the tier that names them — a round's
start and end (memory + gap, the conversation's lease and owner, storing the round, the trigger rule's reads and
claims, the round's metrics) and a thread's import. Built on a Connector (db/connector.py runs them)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memory_agent.conversation.query_rows import (
    StoredRound,
    TriggerRule,
    claim_params,
    lease_params,
    round_json,
    timestamp_text,
)
from memory_agent.db.connector import Connector, Row, execute_many, execute_query, fetch_one, send
from memory_agent.errors import ConversationOwnerError, InvalidInputError
from memory_agent.schemas import MemoryRecord, RoundSaved, SummaryClaim
from memory_agent.schemas.keys import CONVERSATION_SCOPE_PREFIX, ConversationKey

__all__ = ["ConversationQueries", "StoredRound"]


class ConversationQueries:
    """The conversation tier's statements on `connector`: one method per operation."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector

    async def load_context(
        self, conversation_id: str, message_ids: Sequence[str] = (), max_gap: int = 2**31 - 1, *, user_id: str
    ) -> list[Row]:
        """Latest completed memory + the messages after it (at most the conversation's last `max_gap`), and
        which of `message_ids` are stored, in one statement (at least one row)."""
        params = {"user_id": user_id, "conversation_id": conversation_id, "max_gap": max_gap}
        return await self.connector.fetch_all("load_context", {**params, "message_ids": list(message_ids)})

    async def acquire_round_lease(
        self, conversation_id: str, holder: str, lease_s: float, *, tenant_id: str, user_id: str
    ) -> bool:
        """Claim the conversation for (tenant_id, user_id) and take its lease; False while another round holds
        it. ConversationOwnerError when the conversation belongs to another tenant or user (nothing written)."""
        params = lease_params(conversation_id, holder, lease_s, tenant_id, user_id)
        row = await self.connector.fetch_one("acquire_round_lease", params)
        assert row is not None
        return await self._lease_taken(row, params)

    async def begin_round(
        self, key: ConversationKey, holder: str, lease_s: float, message_ids: Sequence[str], max_gap: int
    ) -> list[Row] | None:
        """Round start in one statement (the SQL function begin_round): take the lease (acquire_round_lease),
        then read memory + gap (load_context) in a statement of its own, so the read sees every round that gave
        the lease back. None while another round holds the lease; ConversationOwnerError as
        acquire_round_lease."""
        conversation_id, user_id = key.conversation_id, key.user_id
        params = lease_params(conversation_id, holder, lease_s, key.tenant_id, user_id)
        rows = await self.connector.fetch_all(
            "begin_round", {"message_ids": list(message_ids), "max_gap": max_gap, **params}, prepare=True
        )
        lease_row = rows[0]
        if lease_row["owner_user_id"] is None:  # a concurrent first claim: settled by _lease_taken, read again
            if not await self._lease_taken(lease_row, params):
                return None
            return await self.load_context(conversation_id, message_ids, max_gap, user_id=user_id)
        return rows if await self._lease_taken(lease_row, params) else None

    async def _lease_taken(self, row: Row, params: dict[str, Any]) -> bool:
        """Whether acquire_round_lease's `row` took the lease; raises when the conversation is someone else's. A
        thread without an owner is claimed first (claim_conversation, a statement of its own) and tried again."""
        conversation_id, tenant_id, user_id = params["conversation_id"], params["tenant_id"], params["user_id"]
        owner = (row["owner_tenant_id"], row["owner_user_id"])
        if row["owner_user_id"] is None:
            found = await self.connector.fetch_one("claim_conversation", params)
            if found is None:  # another round claimed it first: committed now (the insert waited for it)
                found = await self.connector.fetch_one("conversation_owner", {"conversation_id": conversation_id})
            # No row: the owner is a tenant row-level security hides from this role (a thread id is claimed once).
            owner = (found["tenant_id"], found["user_id"]) if found is not None else ("", "")
            if owner == (tenant_id, user_id):
                retried = await self.connector.fetch_one("acquire_round_lease", params)
                assert retried is not None
                row = retried
        if owner != (tenant_id, user_id):
            # A round without a user runs under the thread's own scope, a name the caller never gave: not shown.
            who = "without a user_id" if user_id.startswith(CONVERSATION_SCOPE_PREFIX) else f"for user {user_id!r}"
            raise ConversationOwnerError(
                f"conversation {conversation_id!r} belongs to another user or tenant; a round {who} "
                f"(tenant {tenant_id!r}) cannot continue it: use a new thread id"
            )
        return row["holder"] is not None

    async def conversation_owner(self, conversation_id: str, *, tenant_id: str | None = None) -> tuple[str, str] | None:
        """(tenant_id, user_id) of the conversation, None when no round of it has started (in `tenant_id`, when
        given)."""
        if tenant_id is None:
            row = await self.connector.fetch_one("conversation_owner", {"conversation_id": conversation_id})
        else:
            row = await self.connector.fetch_one(
                "tenant_conversation_owner", {"conversation_id": conversation_id, "tenant_id": tenant_id}
            )
        return (row["tenant_id"], row["user_id"]) if row else None

    async def release_round_lease(self, conversation_id: str, holder: str, *, user_id: str) -> None:
        params = {"user_id": user_id, "conversation_id": conversation_id, "holder": holder}
        await self.connector.execute_query("release_round_lease", params)

    async def round_lease_holder(self, conversation_id: str, *, user_id: str) -> str | None:
        row = await self.connector.fetch_one(
            "round_lease_holder", {"user_id": user_id, "conversation_id": conversation_id}
        )
        return row["holder"] if row else None

    async def pass_round_lease(self, conversation_id: str, holder: str, new_holder: str, *, user_id: str) -> bool:
        params = {"user_id": user_id, "conversation_id": conversation_id, "holder": holder, "new_holder": new_holder}
        return await self.connector.fetch_one("pass_round_lease", params) is not None

    async def gap_cap_cause(self, conversation_id: str, memory_end_sequence: int | None, *, user_id: str) -> Row | None:
        params = {"user_id": user_id, "conversation_id": conversation_id, "memory_end_sequence": memory_end_sequence}
        return await self.connector.fetch_one("gap_cap_cause", params)

    async def end_round(
        self,
        conn: psycopg.AsyncConnection[Row],
        key: ConversationKey,
        stored: StoredRound,
        *,
        holder: str | None,
        now: datetime,
        rule: TriggerRule,
    ) -> psycopg.AsyncCursor[Row]:
        """A round end in one statement (the SQL function end_round), on `conn` (autocommit: the statement alone is
        the round's transaction; or a session in pipeline mode): give the
        lease back (when `holder` holds it), store the messages (serialize_round's JSON texts) not stored yet (same
        id and content), apply the trigger rule after them (`rule`'s settings), claiming a due summary, and write
        the round's metrics row (`stored.metrics`; None: none). The
        cursor comes back unread (in a session in pipeline mode, COMMIT travels with the statement); its row: saved_round's, the rule's
        outcome, and with `rule.pick_up` what the claimed summary reads. `now`: the service's clock (the
        conversation's updated_at). The round's `after`: see round_json; `started_on`: see StoredRound."""
        params = {
            "tenant_id": key.tenant_id,
            "user_id": key.user_id,
            "conversation_id": key.conversation_id,
            "holder": holder,
            "round": round_json(stored),
            "now": now,
            "started_on": timestamp_text(stored.started_on),
            "metrics": json.dumps(stored.metrics) if stored.metrics is not None else None,
            **rule._asdict(),
        }
        return await send(conn, "end_round", params, prepare=True)

    async def trigger_state(
        self, conn: psycopg.AsyncConnection[Row], conversation_id: str, last_sequence: int, window: int, *, user_id: str
    ) -> Row:
        """The trigger rule's state for the window of `window` messages that ends at `last_sequence`."""
        params = {"user_id": user_id, "conversation_id": conversation_id, "window": window}
        row = await self.connector.fetch_one("trigger_state", {**params, "last_sequence": last_sequence}, conn=conn)
        assert row is not None
        return row

    async def claim_summary(
        self,
        conn: psycopg.AsyncConnection[Row],
        conversation_id: str,
        claim: SummaryClaim,
        *,
        tenant_id: str,
        user_id: str,
        pick_up: bool = False,
    ) -> Row:
        """Claim the conversation's single in-flight slot for `claim`'s window: the row of the function
        claim_summary (`memory_id` None when another process holds the slot; with `pick_up`, what its summary
        reads)."""
        params = {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "pick_up": pick_up,
            **claim_params(conversation_id, claim),
        }
        row = await self.connector.fetch_one("claim_summary", params, conn=conn)
        assert row is not None  # one row always
        return row

    async def reclaim_stale(
        self,
        timeout_s: float,
        conversation_id: str | None = None,
        conn: psycopg.AsyncConnection[Row] | None = None,
        *,
        user_id: str | None = None,
    ) -> list[Row]:
        """Fail stuck rows of one conversation (its user_id required), or of every user (the sweep)."""
        if conversation_id is not None and user_id is None:
            raise TypeError("reclaim_stale: a conversation needs its user_id")
        return await self.connector.fetch_all(
            "reclaim_stale", {"timeout_s": timeout_s, "user_id": user_id, "conversation_id": conversation_id}, conn=conn
        )

    async def record_app_calls(
        self,
        conn: psycopg.AsyncConnection[Row],
        saved: RoundSaved,
        key: ConversationKey,
        *,
        prices: dict[str, Any],
        app_model: str | None,
        now: datetime,
    ) -> None:
        """The cost ledger's 'app' rows: one per answer of the round that reports its usage (memory_agent/long_term/ledger.py)."""
        params = {
            "tenant_id": key.tenant_id,
            "user_id": key.user_id,
            "conversation_id": key.conversation_id,
            "first_sequence": saved.first_sequence,
            "last_sequence": saved.last_sequence,
            "prices": Jsonb(prices),
            "app_model": app_model,
            "now": now,
        }
        await execute_query(conn, "record_app_calls", params)

    async def record_failed_round(
        self, row: dict[str, Any], *, tenant_id: str, user_id: str, started_on: datetime | None
    ) -> bool:
        """The metrics row of a failed round (round_metrics_row's `row`); False, nothing written, when the
        conversation row it started on (`started_on`: its created_at) was erased since."""
        params = {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "conversation_id": row["conversation_id"],
            "started_on": timestamp_text(started_on),
            "metrics": json.dumps(row),
        }
        found = await self.connector.fetch_one("record_failed_round", params)
        return bool(found and found["recorded"])

    async def get_memory(self, memory_id: int, *, user_id: str) -> MemoryRecord | None:
        row = await self.connector.fetch_one("get_memory", {"user_id": user_id, "memory_id": memory_id})
        return MemoryRecord(**row) if row else None

    async def list_memory(self, conversation_id: str, *, user_id: str) -> list[MemoryRecord]:
        rows = await self.connector.fetch_all("list_memory", {"user_id": user_id, "conversation_id": conversation_id})
        return [MemoryRecord(**row) for row in rows]

    async def last_sequence(self, conversation_id: str, *, user_id: str) -> int | None:
        row = await self.connector.fetch_one("last_sequence", {"user_id": user_id, "conversation_id": conversation_id})
        return row["last_sequence"] if row else None

    async def begin_import(
        self, conn: psycopg.AsyncConnection[Row], key: ConversationKey, now: datetime, first_at: datetime
    ) -> None:
        """The start of an imported thread's transaction (conversation/imports.py): the user's forget lock shared,
        the thread's owner and its conversation row (InvalidInputError: it has messages already)."""
        who = key.params()
        await fetch_one(conn, "share_forget_lock", who)
        owner = await fetch_one(conn, "import_owner", {**who, "now": now})
        if owner is None:  # an import or round of the thread committed its owner while the statement waited on it:
            # the statement's snapshot, older, does not show it; a statement of its own does
            owner = await fetch_one(conn, "conversation_owner", who)
        if owner is None or (owner["tenant_id"], owner["user_id"]) != (key.tenant_id, key.user_id):
            raise ConversationOwnerError(
                f"conversation {key.conversation_id!r} belongs to another user or tenant; import the thread "
                "under a new thread id"
            )
        params = {**who, "next_sequence": 0, "round_count": 0, "now": now, "updated_at": first_at}
        if await fetch_one(conn, "import_conversation", params) is None:
            raise InvalidInputError(
                f"conversation {key.conversation_id!r} has messages already; an import makes a new thread: "
                "import under a new thread id (or delete the conversation first)"
            )

    async def import_batch(
        self,
        conn: psycopg.AsyncConnection[Row],
        key: ConversationKey,
        rows: list[dict[str, Any]],
        ids: dict[int, str],
    ) -> Row | None:
        """Messages rows of an imported thread, in its transaction; the first of them whose id (`ids`: sequence ->
        the message's id, for those that have one) an earlier message of the thread holds (sequence_number,
        message_id, first_sequence), None when none does."""
        await execute_many(conn, "import_message", rows)
        if not ids:
            return None
        params = {**key.params(), "sequences": list(ids), "message_ids": list(ids.values())}
        return await fetch_one(conn, "import_duplicate_id", params)

    async def end_import(
        self, conn: psycopg.AsyncConnection[Row], key: ConversationKey, messages: int, rounds: int, last_at: datetime
    ) -> None:
        """The imported thread's conversation row once its last message is written."""
        who = key.params()
        counts = {"next_sequence": messages, "round_count": rounds, "updated_at": last_at}
        await execute_query(conn, "import_thread_end", {**who, **counts})
