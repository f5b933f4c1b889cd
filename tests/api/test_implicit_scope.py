"""A conversation run without a user over HTTP: read by its thread id with its tenant's key; its scope's id is
reserved, so no route takes it as a user id."""

from __future__ import annotations

from tests.api.conftest import Served
from tests.api.test_http import chat, client


async def test_a_conversation_without_a_user_is_read_by_its_thread(served: Served):
    await chat(served, "anon", "", "default", [f"hello {n}" for n in range(4)])  # a blank user: no user
    async with client(served, await served.key("default")) as http:
        history = await http.get("/conversations/anon/memory")
        assert history.status_code == 200, history.text
        assert history.json() and history.json()[-1]["status"] == "completed"
        assert (await http.get("/users/conversation:anon/items")).status_code == 422
    async with client(served, await served.key("acme")) as http:
        assert (await http.get("/conversations/anon/memory")).status_code == 404
