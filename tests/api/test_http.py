"""The HTTP API over real HTTP: keys (401), tenant isolation (404, never 403), items as of a date, forgetting a
user with everything derived from them, bad input (422 naming the field), and the OpenAPI document."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import psycopg
import pytest
from langchain_core.messages import HumanMessage
from psycopg.conninfo import conninfo_to_dict

from memory_agent import with_memory
from memory_agent.long_term import ItemOrigin, ItemScope, remember
from tests.api.conftest import Served
from tests.conftest import execute, query
from tests.long_term.conftest import at, items
from tests.long_term.test_forget import tables_holding
from tests.support import EchoChat


def client(served: Served, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.AsyncClient(base_url=served.url, headers=headers, timeout=10)


async def chat(served: Served, thread: str, user: str, tenant: str, texts: list[str]) -> None:
    app = with_memory(EchoChat().graph, served.memory)
    for text in texts:
        config = {"configurable": {"thread_id": thread, "user_id": user, "tenant_id": tenant}}
        await app.ainvoke({"messages": [HumanMessage(text)]}, config)
    assert await served.memory.drain(timeout=10)


async def remember_on(served: Served, tenant: str, user: str, day: float, content: str, thread: str | None = None):
    async def write() -> None:
        async with served.memory.backend.pool.connection() as conn:
            await remember(
                conn,
                scope=ItemScope(tenant_id=tenant, user_id=user),
                source=ItemOrigin(conversation_id=thread, memory_id=None),
                now=at(day),
                items=items(facts=[("home_city", content)]),
            )

    await served.memory.loop.arun(write())


async def test_requests_without_a_live_key_get_401(served):
    good = await served.key("acme")
    for key in (None, "mak_not-a-key", "garbage", good + "x"):
        async with client(served, key) as http:
            for method, path in (
                ("GET", "/users/ana/items"),
                ("GET", "/conversations/t/memory"),
                ("DELETE", "/users/ana"),
            ):
                response = await http.request(method, path)
                assert response.status_code == 401, (key, path)
                assert response.headers["www-authenticate"] == "Bearer"
    async with client(served, good) as http:
        assert (await http.get("/users/ana/items")).status_code == 404  # past the key check: nobody named ana
    # Only the hash is stored.
    assert not any(good in str(row) for row in query(served.memory.database_url, "SELECT * FROM api_keys"))


async def test_a_key_sees_its_tenant_only(served, database_url):
    await chat(served, "acme-thread", "ana", "acme", [f"acme {n}" for n in range(4)])
    await remember_on(served, "acme", "ana", 1, "The user lives in Lyon")
    acme, other = await served.key("acme"), await served.key("globex")
    async with client(served, acme) as http:
        history = (await http.get("/conversations/acme-thread/memory")).json()
        assert history and history[-1]["status"] == "completed"
        assert [i["content"] for i in (await http.get("/users/ana/items")).json()] == ["The user lives in Lyon"]
    async with client(served, other) as http:
        missing = await http.get("/conversations/acme-thread/memory")
        assert missing.status_code == 404
        assert missing.json() == (await http.get("/conversations/never-seen/memory")).json()
        items_of_other = await http.get("/users/ana/items")
        assert items_of_other.status_code == 404
        assert items_of_other.json() == (await http.get("/users/never-seen/items")).json()
        assert (await http.get("/users/ana/items", params={"as_of": at(3).isoformat()})).status_code == 404
        assert (await http.delete("/users/ana")).status_code == 404
    assert query(database_url, "SELECT count(*) FROM items WHERE tenant_id = 'acme'") == [(1,)]
    assert query(database_url, "SELECT count(*) FROM conversations WHERE tenant_id = 'acme'") == [(1,)]


async def test_items_as_of_a_date(served):
    await remember_on(served, "acme", "ana", 1, "The user lives in Lyon")
    await remember_on(served, "acme", "ana", 5, "The user lives in Lisbon")
    async with client(served, await served.key("acme")) as http:

        async def held(**params: str) -> list[str]:
            response = await http.get("/users/ana/items", params=params)
            assert response.status_code == 200, response.text
            return [i["content"] for i in response.json()]

        assert await held() == ["The user lives in Lisbon"]
        assert await held(as_of=at(3).isoformat()) == ["The user lives in Lyon"]
        assert await held(as_of=at(0).isoformat()) == []
        bad = await http.get("/users/ana/items", params={"as_of": "last tuesday"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "as_of"]
        naive = await http.get("/users/ana/items", params={"as_of": "2026-01-03T00:00:00"})
        assert naive.status_code == 422 and naive.json()["detail"][0]["loc"] == ["query", "as_of"]


async def test_delete_forgets_the_user_everywhere(served, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    await chat(served, "secret", "ana", "acme", [f"my code is {canary}", "more", "and more", "again"])
    await remember_on(served, "acme", "ana", 1, f"The user's code is {canary}", thread="secret")
    await chat(served, "kept", "bob", "acme", ["bob stays"])
    assert "items.content" in tables_holding(database_url, canary)
    assert "messages.content" in tables_holding(database_url, canary)
    async with client(served, await served.key("acme")) as http:
        response = await http.delete("/users/ana")
        assert response.status_code == 200, response.text
        assert response.json() == {"user_id": "ana", "items_deleted": 1, "conversations_deleted": 1}
        assert (await http.get("/users/ana/items")).status_code == 404  # forgotten: nothing of ana is held
        assert (await http.get("/conversations/secret/memory")).status_code == 404
        assert (await http.delete("/users/ana")).status_code == 404
    assert tables_holding(database_url, canary) == []
    assert query(database_url, "SELECT count(*) FROM messages WHERE user_id = 'bob'") == [(2,)]


async def test_bad_ids_are_422_naming_the_field_and_write_nothing(served, database_url):
    await remember_on(served, "acme", "ana", 1, "The user lives in Lyon")
    async with client(served, await served.key("acme")) as http:
        for method, path, field in (
            ("GET", "/users/" + "u" * 600 + "/items", "user_id"),
            ("GET", "/users/" + "é" * 300 + "/items", "user_id"),  # 300 characters, 600 bytes
            ("GET", "/users/" + "\U0001f600" * 200 + "/items", "user_id"),  # 200 characters, 800 bytes
            ("GET", "/users/%20/items", "user_id"),  # blank
            ("GET", "/users/conversation:t/items", "user_id"),  # a conversation's own scope: reserved
            ("DELETE", "/users/conversation:t", "user_id"),
            ("GET", "/conversations/" + "c" * 1100 + "/memory", "conversation_id"),
        ):
            response = await http.request(method, path)
            assert response.status_code == 422, (path, response.text)
            assert response.json()["detail"][0]["loc"] == ["path", field]
    assert query(database_url, "SELECT count(*) FROM items") == [(1,)]


async def test_openapi_is_served(served):
    async with client(served) as http:
        spec = (await http.get("/openapi.json")).json()
        assert {"/users/{user_id}/items", "/users/{user_id}", "/conversations/{conversation_id}/memory"} <= set(
            spec["paths"]
        )
        assert "HTTPBearer" in spec["components"]["securitySchemes"]
        docs = await http.get("/docs")
        assert docs.status_code == 200 and "swagger" in docs.text.lower()


async def test_a_body_is_read_only_with_a_live_key_and_within_the_cap(served, database_url):
    good = await served.key("acme")
    huge = b'{"userId": "ana", "period": "daily", "pad": "' + b"x" * (2 << 20) + b'"}'
    async with client(served) as anonymous, client(served, "mak_not-a-key") as wrong, client(served, good) as http:
        for who in (anonymous, wrong):
            response = await who.post("/memory/summarize", content=huge, headers={"Content-Type": "application/json"})
            assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
        # A live key, but a body over MEMORY_AGENT_API_MAX_BODY_BYTES (1 MiB by default): 413, named.
        response = await http.post("/memory/summarize", content=huge, headers={"Content-Type": "application/json"})
        assert response.status_code == 413 and "MEMORY_AGENT_API_MAX_BODY_BYTES" in response.json()["detail"]

        async def streamed():  # no Content-Length: counted as it arrives
            for _ in range(40):
                yield b" " * 65_536

        response = await http.post(
            "/memory/summarize", content=streamed(), headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 413
        # Within the cap, the route runs as before.
        response = await http.post("/memory/summarize", json={"userId": "ana", "period": "daily"})
        assert response.status_code in (200, 404), response.text
    assert query(database_url, "SELECT count(*) FROM consolidation_notes") == [(0,)]


async def test_an_unauthenticated_body_is_answered_401_before_it_is_sent(served):
    # 40 MB announced, 1 KB sent: the answer comes without the server waiting for (or reading) the rest.
    host, port = served.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /memory/summarize HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Content-Length: 40000000\r\n\r\n" + b"x" * 1024
    )
    await writer.drain()
    try:
        status_line = await asyncio.wait_for(reader.readline(), timeout=5)
    finally:
        writer.close()
    assert status_line.startswith(b"HTTP/1.1 401"), status_line


async def test_a_json_body_with_a_lone_surrogate_is_422_never_500(served):
    good = await served.key("acme")
    async with client(served, good) as http:
        for body in (
            b'{"userId": "\\ud800", "period": "daily"}',  # a valid string, not a storable id
            b'{"userId": "ana", "period": "\\ud800"}',  # fails validation: FastAPI's 422 echoes the input
            b'{"userId": "ana", "period": "daily", "\\udc00": 1}',  # an unknown field named by a lone surrogate
        ):
            response = await http.post("/memory/summarize", content=body, headers={"Content-Type": "application/json"})
            assert response.status_code == 422, (body, response.status_code, response.text)
            assert response.json()["detail"]


async def test_a_user_known_by_a_conversation_only_has_no_items_yet(served):
    await chat(served, "bob-thread", "bob", "acme", ["hello"])
    async with client(served, await served.key("acme")) as http:
        response = await http.get("/users/bob/items")
        assert response.status_code == 200 and response.json() == []


async def test_health_and_ready_answer_without_a_key(served, database_url):
    async with client(served) as http:
        assert (await http.get("/health")).json() == {"status": "ok"}
        ready = await http.get("/ready")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert ready.json()["last_hour"] == {
            "completed": 0,
            "failed": 0,
            "failure_rate": None,
            "rounds": 0,
            "max_summary_lag": None,
            "avg_summary_lag": None,
        }
        # A migration this code has but the database lacks: not ready, and it says what to run.
        execute(
            database_url, "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)"
        )
        behind = await http.get("/ready")
        assert behind.status_code == 503 and "memory-agent migrate" in behind.json()["detail"]
        assert (await http.get("/health")).status_code == 200


@pytest.mark.no_integrity_check
async def test_ready_is_503_when_the_database_is_gone(served, server_url, database_url):
    name = conninfo_to_dict(database_url)["dbname"]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    async with client(served) as http:
        gone = await http.get("/ready")
        assert gone.status_code == 503, gone.text
        assert gone.json()["detail"] in (
            "the database is unreachable",
            "the database did not answer in time (or a migration is running)",
        )
        assert (await http.get("/health")).json() == {"status": "ok"}
