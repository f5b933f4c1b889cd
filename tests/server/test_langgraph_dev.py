"""graphs/ under a real `langgraph dev` (langgraph.json as shipped, plus a store probe), driven with langgraph_sdk:
Studio-style chat without a user, users named by config or context, two authenticated users kept apart, and the
store slot served by MemoryStore over our tables."""

from __future__ import annotations

import json

import httpx
import pytest
from langgraph_sdk import get_client

from memory_agent.errors import ConfigurationError
from memory_agent.langgraph_server import check_store_config
from tests.conftest import query
from tests.server.langgraph_dev import langgraph_dev, server_log


def rows(url: str, thread: str) -> list[tuple[str, str, str, str]]:
    return query(
        url,
        "SELECT tenant_id, user_id, role, content FROM messages WHERE conversation_id = %s ORDER BY sequence_number",
        [thread],
    )


def ask(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def last_text(state: dict) -> str:
    return state["messages"][-1]["content"]


@pytest.mark.slow  # a server start: ~40 s on 2 cores
async def test_graphs_under_langgraph_dev_without_auth(database_url, fake_openai, tmp_path):
    env = {"MEMORY_AGENT_DATABASE_URL": database_url}
    with langgraph_dev(tmp_path, env) as url:
        client = get_client(url=url)
        # Studio-style: no user anywhere (the server fills configurable.user_id with ""): the thread's own scope.
        thread = (await client.threads.create())["thread_id"]
        for text in ("hello", "how are you"):
            state = await client.runs.wait(thread, "chat", input=ask(text))
            assert last_text(state) == f"echo: {text}", server_log(tmp_path)[-3000:]
        scope = f"conversation:{thread}"
        assert rows(database_url, thread) == [
            ("default", scope, "user", "hello"),
            ("default", scope, "assistant", "echo: hello"),
            ("default", scope, "user", "how are you"),
            ("default", scope, "assistant", "echo: how are you"),
        ]
        # A user named by the run's configurable keys, or by its context.
        by_config = (await client.threads.create())["thread_id"]
        await client.runs.wait(by_config, "chat", input=ask("hi"), config={"configurable": {"user_id": "ana"}})
        by_context = (await client.threads.create())["thread_id"]
        await client.runs.wait(by_context, "chat", input=ask("hi"), context={"user_id": "carl", "tenant_id": "t1"})
        assert {row[:2] for row in rows(database_url, by_config)} == {("default", "ana")}
        assert {row[:2] for row in rows(database_url, by_context)} == {("t1", "carl")}
        # The reserved form of a thread's own scope is refused, and nothing is stored.
        intruder = (await client.threads.create())["thread_id"]
        run = await client.runs.wait(
            intruder,
            "chat",
            input=ask("what is my PIN?"),
            config={"configurable": {"user_id": scope}},
            raise_error=False,
        )
        assert "reserved" in json.dumps(run), run
        assert rows(database_url, intruder) == []

        # The store slot: the graph's runtime.store writes and reads the long-term items of our tables.
        probe = (await client.threads.create())["thread_id"]
        state = await client.runs.wait(probe, "store_probe", input=ask("I live in Lyon"))
        assert json.loads(last_text(state)) == {"found": ["I live in Lyon"], "got": {"content": "I live in Lyon"}}
        assert query(
            database_url, "SELECT tenant_id, user_id, key, value FROM items WHERE store_namespace IS NOT NULL"
        ) == [("default", "ana", "city", {"content": "I live in Lyon"})]


@pytest.mark.slow
async def test_two_authenticated_users_have_separate_memory(database_url, fake_openai, tmp_path):
    env = {"MEMORY_AGENT_DATABASE_URL": database_url}
    with langgraph_dev(tmp_path, env, auth=True) as url:
        async with httpx.AsyncClient() as http:
            assert (await http.post(f"{url}/threads", json={})).status_code == 401  # no token
        alice = get_client(url=url, headers={"Authorization": "Bearer alice-token"})
        bob = get_client(url=url, headers={"Authorization": "Bearer bob-token"})
        alice_thread = (await alice.threads.create())["thread_id"]
        await alice.runs.wait(alice_thread, "chat", input=ask("my secret is 42"))
        await alice.runs.wait(alice_thread, "chat", input=ask("remember it"))
        fake_openai.requests.clear()
        # Bob names alice in every place a client can: the authenticated user still decides.
        bob_thread = (await bob.threads.create())["thread_id"]
        await bob.runs.wait(
            bob_thread, "chat", input=ask("who am I?"), config={"configurable": {"user_id": "alice", "tenant_id": "x"}}
        )
        state = await bob.runs.wait(bob_thread, "chat", input=ask("what is the secret?"), context={"user_id": "alice"})
        assert last_text(state) == "echo: what is the secret?", server_log(tmp_path)[-3000:]
        assert {row[:2] for row in rows(database_url, alice_thread)} == {("acme", "alice")}
        assert {row[:2] for row in rows(database_url, bob_thread)} == {("acme", "bob")}
        sent_for_bob = json.dumps(fake_openai.requests)
        assert "what is the secret?" in sent_for_bob and "42" not in sent_for_bob  # no recall of alice's memory


@pytest.mark.parametrize(
    ("config", "refused"),
    [({"path": "x.py:store", "ttl": {"default_ttl": 60}}, '"ttl"'), ({"index": {"dims": 3, "embed": "x"}}, '"index"')],
)
def test_the_store_block_refuses_what_a_custom_store_does_not_get(config, refused):
    with pytest.raises(ConfigurationError, match=refused):
        check_store_config(config)
    check_store_config({"path": "x.py:store"})
    check_store_config(None)
