"""A thread id belongs to one (tenant, user), decided by conversation_owners: a round start naming another user
is refused with nothing written, and two users racing for a new thread get one owner."""

from __future__ import annotations

import asyncio

import pytest

from memory_agent import InvalidInputError
from memory_agent.service.backend import MemoryBackend
from tests.conftest import query


async def open_backend(url: str, size: int = 2) -> MemoryBackend:
    pool = MemoryBackend.create_pool(url, "memory_agent", min_size=1, max_size=size)
    await pool.open(wait=True)
    return MemoryBackend(pool, "memory_agent")


async def test_another_user_is_refused_for_an_owned_thread(database_url):
    backend = await open_backend(database_url)
    try:
        assert await backend.conversations.acquire_round_lease("t", "a", 60, tenant_id="acme", user_id="alice")
        await backend.conversations.release_round_lease("t", "a", user_id="alice")
        with pytest.raises(InvalidInputError, match="belongs to another user or tenant"):
            await backend.conversations.acquire_round_lease("t", "b", 60, tenant_id="acme", user_id="bob")
        with pytest.raises(InvalidInputError, match="belongs to another user or tenant"):
            await backend.conversations.acquire_round_lease("t", "c", 60, tenant_id="other", user_id="alice")
        assert query(database_url, "SELECT count(*) FROM round_leases") == [(0,)]
        assert await backend.conversations.acquire_round_lease("t", "d", 60, tenant_id="acme", user_id="alice")
    finally:
        await backend.pool.close()
    assert query(database_url, "SELECT conversation_id, tenant_id, user_id FROM conversation_owners") == [
        ("t", "acme", "alice")
    ]


async def test_two_users_racing_for_a_new_thread_get_one_owner(database_url):
    backends = [await open_backend(database_url, size=4) for _ in range(2)]
    try:
        for n in range(20):
            thread = f"race-{n}"

            async def claim(backend: MemoryBackend, user: str) -> str:
                try:
                    await backend.conversations.acquire_round_lease(thread, user, 60, tenant_id="default", user_id=user)
                    return user
                except InvalidInputError:
                    return "refused"

            results = await asyncio.gather(claim(backends[0], "u1"), claim(backends[1], "u2"))
            assert sorted(results) in (["refused", "u1"], ["refused", "u2"]), results
            owner = query(database_url, "SELECT user_id FROM conversation_owners WHERE conversation_id = %s", [thread])
            assert owner == [(next(r for r in results if r != "refused"),)]
    finally:
        for backend in backends:
            await backend.pool.close()
    # The refused user wrote nothing: one lease per thread, the owner's.
    leases = query(
        database_url,
        "SELECT l.conversation_id FROM round_leases l JOIN conversation_owners o"
        " ON o.conversation_id = l.conversation_id AND o.user_id = l.user_id",
    )
    assert len(leases) == 20 and query(database_url, "SELECT count(*) FROM round_leases") == [(20,)]
