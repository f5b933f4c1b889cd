"""Double texting: one round at a time per conversation, across processes, decided by a lease row in
PostgreSQL (`enqueue` waits for it, `reject` raises RoundInProgressError); it expires after round_lease_s
when its holder died."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from memory_agent.conversation.queries import ConversationQueries
from memory_agent.errors import RoundInProgressError
from memory_agent.runtime import MemoryLoop
from memory_agent.schemas.keys import ConversationKey
from memory_agent.settings import RoundSettings

T = TypeVar("T")


class RoundLeases:
    """The leases this process takes and gives back."""

    def __init__(self, rounds: RoundSettings, queries: ConversationQueries, loop: MemoryLoop) -> None:
        self.rounds = rounds  # MEMORY_AGENT_MULTITASK_STRATEGY and MEMORY_AGENT_MULTITASK_TIMEOUT_S
        self.queries = queries
        self.loop = loop
        # Leases this process could not give back (the database was away when its round failed): ours to
        # take over at once; other processes wait for their expiry.
        self._unreleased: dict[str, str] = {}

    async def acquire(
        self, key: ConversationKey, attempt: Callable[[str], Awaitable[T | None]], token: str | None = None
    ) -> tuple[str, T]:
        """The conversation's lease for a new round, and what `attempt` read with it. `attempt(token)` takes
        the lease (None while another round holds it) and reads the round start in the same round trip. A
        resumed round passes the token it holds and gets it renewed. Runs on the memory loop."""
        rounds = self.rounds
        conversation_id = key.conversation_id
        token = token or self._unreleased.get(conversation_id) or uuid.uuid4().hex
        deadline = time.monotonic() + rounds.multitask_timeout_s
        delay = 0.01
        while (taken := await attempt(token)) is None:
            if rounds.multitask_strategy == "reject":
                raise RoundInProgressError(
                    f"another round of conversation {conversation_id!r} is running; wait for it to finish "
                    "(MEMORY_AGENT_MULTITASK_STRATEGY=reject; 'enqueue' waits instead)"
                )
            if time.monotonic() + delay > deadline:
                raise RoundInProgressError(
                    f"waited {rounds.multitask_timeout_s}s for the running round of conversation "
                    f"{conversation_id!r} to finish (MEMORY_AGENT_MULTITASK_TIMEOUT_S)"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)
        self._unreleased.pop(conversation_id, None)
        return token, taken

    async def release(self, key: ConversationKey, token: str) -> None:
        """Give the lease back; shielded, so a cancelled caller still frees the conversation."""
        await self.loop.arun(
            self.queries.release_round_lease(key.conversation_id, token, user_id=key.user_id), shield=True
        )

    async def give_back(self, key: ConversationKey, token: str) -> Exception | None:
        """Release, and when the database is away keep the lease for this process's next round of the
        conversation; returns what prevented the release."""
        try:
            await self.release(key, token)
        except Exception as exc:
            self._unreleased[key.conversation_id] = token
            return exc
        return None
