"""A key revoked while its request's body is still arriving: the request is refused (401) and writes nothing. The
key was checked before the body was read (limits.BodyGuard, the inspector's `seen`), and is checked again once the
body has arrived: a summary (POST /memory/summarize) and an erasure of the inspector (POST /inspect/.../forget)."""

from __future__ import annotations

import asyncio
import json

from memory_agent.api.keys import revoke_api_key
from tests.api.conftest import Served
from tests.api.test_http import remember_on
from tests.conftest import query


async def _revoke(served: Served, key: str) -> None:
    async def run() -> None:
        async with served.memory.backend.pool.connection() as conn, conn.transaction():
            await revoke_api_key(conn, key)

    await served.memory.loop.arun(run())


async def _post_in_two_halves(
    served: Served, key: str, body: bytes, between, path: str = "/memory/summarize", kind: str = "application/json"
) -> bytes:
    """POST `path` with the first half of `body`, then `between()`, then the rest: the status line."""
    host, port = served.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: {kind}\r\n".encode()
            + f"Authorization: Bearer {key}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body[: len(body) // 2]
        )
        await writer.drain()
        await asyncio.sleep(0.3)  # the key check before the body has run: the route waits for the rest
        await between()
        writer.write(body[len(body) // 2 :])
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), timeout=10)
    finally:
        writer.close()


async def test_a_key_revoked_while_the_body_streams_in_is_refused_and_writes_nothing(served: Served, database_url):
    await remember_on(served, "acme", "ana", 6, "The user lives in Lyon")
    body = json.dumps({"userId": "ana", "period": "daily"}).encode()

    async def nothing() -> None:
        return None

    # The same request with the key left alone is served (the two halves alone change nothing).
    kept = await served.key("acme")
    assert (await _post_in_two_halves(served, kept, body, nothing)).startswith(b"HTTP/1.1 200")
    assert query(database_url, "SELECT count(*) FROM consolidation_notes") == [(1,)]
    calls = len(served.model.calls)

    revoked = await served.key("acme")
    status = await _post_in_two_halves(
        served,
        revoked,
        json.dumps({"userId": "ana", "period": "daily", "force": True}).encode(),
        lambda: _revoke(served, revoked),
    )
    assert status.startswith(b"HTTP/1.1 401"), status
    assert len(served.model.calls) == calls  # no model call, no note rewritten


async def test_an_inspector_erasure_whose_key_is_revoked_while_the_form_streams_in_erases_nothing(
    served: Served, database_url
):
    await remember_on(served, "acme", "ana", 6, "The user lives in Lyon")
    form = b"confirm=yes&csrf=unused-by-a-header-client"
    revoked = await served.key("acme")
    status = await _post_in_two_halves(
        served,
        revoked,
        form,
        lambda: _revoke(served, revoked),
        path="/inspect/users/ana/forget",
        kind="application/x-www-form-urlencoded",
    )
    assert status.startswith(b"HTTP/1.1 401"), status
    assert query(database_url, "SELECT count(*) FROM items WHERE user_id = 'ana'") == [(1,)]

    async def nothing() -> None:
        return None

    kept = await served.key("acme")
    status = await _post_in_two_halves(
        served, kept, form, nothing, path="/inspect/users/ana/forget", kind="application/x-www-form-urlencoded"
    )
    assert status.startswith(b"HTTP/1.1 200"), status  # the same erasure with a live key
    assert query(database_url, "SELECT count(*) FROM items WHERE user_id = 'ana'") == [(0,)]
