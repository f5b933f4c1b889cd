"""`memory-agent mcp` through the official SDK's own client: over stdio (the command as a subprocess, as Claude
Desktop starts it) and over streamable HTTP behind the API keys (uvicorn on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from memory_agent.api import create_api_key
from memory_agent.mcp_server import Identity, build_server, keyed_app
from tests.api.conftest import _free_port
from tests.conftest import query

TOOLS = ["forget", "list_memories", "recall", "remember"]


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def _error(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


async def test_stdio_serves_one_user_and_keeps_serving_after_bad_calls(database_url):
    env = {
        **os.environ,
        "MEMORY_AGENT_DATABASE_URL": database_url,
        "MEMORY_AGENT_MEMORY_MODEL": "offline",
        "MEMORY_AGENT_CONSOLIDATION_MODEL": "offline",
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memory_agent", "mcp", "--user-id", "mara"], env=env
    )
    async with Client(params, read_timeout_seconds=60) as client:
        assert sorted(tool.name for tool in (await client.list_tools()).tools) == TOOLS
        kept = _data(await client.call_tool("remember", {"content": "Mara is allergic to shellfish"}))
        assert kept["outcome"] == "inserted" and isinstance(kept["item_id"], int)
        city = _data(await client.call_tool("remember", {"content": "Lives in Porto", "key": "home_city"}))
        moved = _data(await client.call_tool("remember", {"content": "Lives in Lisbon", "key": "home_city"}))
        assert moved["outcome"] == "superseded" and moved["closed_item_ids"] == [city["item_id"]]

        listed = _data(await client.call_tool("list_memories", {}))
        assert {item["content"] for item in listed} == {"Mara is allergic to shellfish", "Lives in Lisbon"}
        hits = _data(await client.call_tool("recall", {"query": "shellfish allergy"}))
        assert hits and hits[0]["kind"] == "item" and "shellfish" in hits[0]["text"]
        assert hits[0]["item_ids"] == [kept["item_id"]] and hits[0]["time"]

        # Bad calls are tool errors naming the problem; the server goes on serving.
        assert "another" in _error(await client.call_tool("list_memories", {"user_id": "bob"}))
        assert "query" in _error(await client.call_tool("recall", {"query": "  "}))
        assert "500" in _error(await client.call_tool("remember", {"content": "x" * 501}))
        assert "item_type" in _error(await client.call_tool("remember", {"content": "a", "item_type": "secret"}))
        assert "nothing erased" in _error(await client.call_tool("forget", {"item_id": 987654}))

        erased = _data(await client.call_tool("forget", {"item_id": kept["item_id"]}))
        assert erased["items_deleted"] == [kept["item_id"]]
        assert _data(await client.call_tool("recall", {"query": "shellfish allergy"})) == []
    assert query(database_url, "SELECT count(*) FROM items WHERE content LIKE %s", ("%shellfish%",)) == [(0,)]
    assert query(database_url, "SELECT DISTINCT user_id, tenant_id FROM items") == [("mara", "default")]


@asynccontextmanager
async def _served(memory: Any) -> AsyncIterator[str]:
    server = build_server(memory, Identity(user_id=None, tenant_id=None, by_key=True))
    app = keyed_app(memory, server, host="127.0.0.1")
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=_free_port(), log_level="warning"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{uv.servers[0].sockets[0].getsockname()[1]}/mcp"
    finally:
        uv.should_exit = True
        thread.join(10)


def _client(url: str, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=30)


async def test_http_takes_the_tenant_from_the_key_and_each_call_names_its_user(open_memory):
    memory = await open_memory()

    async def key(tenant: str) -> str:
        async def create() -> str:
            async with memory.backend.pool.connection() as conn, conn.transaction():
                return await create_api_key(conn, tenant)

        return str(await memory.loop.arun(create()))

    acme, globex = await key("acme"), await key("globex")
    async with _served(memory) as url:
        # No key, or not a live one: refused before the MCP layer reads the request.
        for headers in ({}, {"Authorization": "Bearer mak_not-a-key"}):
            response = httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert response.status_code == 401 and "API key" in response.text
        async with _client(url, acme) as client:
            assert "user_id is required" in _error(await client.call_tool("remember", {"content": "likes tea"}))
            kept = _data(await client.call_tool("remember", {"content": "likes green tea", "user_id": "ana"}))
            reserved = await client.call_tool("list_memories", {"user_id": "conversation:abc"})
            assert "conversation:" in _error(reserved)
        async with _client(url, globex) as client:
            # Another tenant's key sees nothing of acme's ana and cannot erase her item.
            assert _data(await client.call_tool("list_memories", {"user_id": "ana"})) == []
            assert _data(await client.call_tool("recall", {"query": "green tea", "user_id": "ana"})) == []
            assert "nothing erased" in _error(
                await client.call_tool("forget", {"item_id": kept["item_id"], "user_id": "ana"})
            )
        async with _client(url, acme) as client:
            listed = _data(await client.call_tool("list_memories", {"user_id": "ana"}))
            assert [item["item_id"] for item in listed] == [kept["item_id"]]
    rows = query(memory.database_url, "SELECT tenant_id, user_id FROM items")
    assert rows == [("acme", "ana")]


@pytest.mark.parametrize("limit", [0, 51])
async def test_recall_limits_are_checked(open_memory, limit):
    memory = await open_memory()
    server = build_server(memory, Identity(user_id="ana", tenant_id=None))
    async with Client(server) as client:
        assert "limit" in _error(await client.call_tool("recall", {"query": "tea", "limit": limit}))


@pytest.mark.parametrize("item_id", [0, 2**63, 2**70])
async def test_forget_names_an_id_no_item_can_have(open_memory, item_id):
    memory = await open_memory()
    server = build_server(memory, Identity(user_id="ana", tenant_id=None))
    async with Client(server) as client:
        assert "item_id must be" in _error(await client.call_tool("forget", {"item_id": item_id}))
        assert _data(await client.call_tool("list_memories", {})) == []  # still serving


async def test_recall_reads_yesterday_in_the_users_time_zone(open_memory):
    from datetime import UTC, datetime

    from memory_agent.llm.offline import OfflineSummaryModel

    # 23:30 UTC on 12 March is 08:30 on the 13th in Tokyo: that user's yesterday is the 12th (the walk).
    memory = await open_memory(model=OfflineSummaryModel(), clock=lambda: datetime(2024, 3, 12, 23, 30, tzinfo=UTC))
    for thread, at, text in (("walks", "2024-03-12T10:00:00+00:00", "I walked by the river."),
                             ("cakes", "2024-03-11T05:00:00+00:00", "I baked a lemon cake.")):  # fmt: skip
        await memory.transfers.import_messages(
            thread, [{"role": "user", "content": text, "created_at": at}], user_id="ana", summarize=False
        )
    server = build_server(memory, Identity(user_id="ana", tenant_id=None))
    async with Client(server) as client:
        tokyo = _data(await client.call_tool("recall", {"query": "what did I do yesterday", "time_zone": "Asia/Tokyo"}))
        utc = _data(await client.call_tool("recall", {"query": "what did I do yesterday"}))
        assert (tokyo[0]["conversation_id"], utc[0]["conversation_id"]) == ("walks", "cakes")
        assert tokyo[0]["time"] == "2024-03-12T19:00:00+09:00"
        assert "no time zone" in _error(await client.call_tool("recall", {"query": "x", "time_zone": "Mars/Base"}))


def test_the_user_and_tenant_options_have_the_other_commands_names():
    # Every other command names a user --user and a tenant --tenant; mcp only took --user-id / --tenant-id, and
    # `memory-agent mcp --user ana` stopped at "No such option".
    from typer.testing import CliRunner

    from memory_agent.cli.main import app

    env = {"COLUMNS": "200", "NO_COLOR": "1"}
    for user, tenant in (("--user", "--tenant"), ("--user-id", "--tenant-id")):
        result = CliRunner().invoke(app, ["mcp", user, "ana", tenant, "acme", "--transport", "carrier-pigeon"], env=env)
        assert result.exit_code == 2 and "--transport must be stdio or streamable-http" in result.output, result.output
