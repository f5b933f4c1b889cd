"""The inspector's pages of ids that end like a page's own path ('bob/forget', 'trip/rounds/1'): each id's link
reaches its own page, never another id's page or an erasure's confirmation."""

from __future__ import annotations

import html
from datetime import UTC, datetime

import httpx
from langchain_core.messages import AIMessage, HumanMessage

from tests.api.conftest import serve

AT = datetime(2025, 12, 1, 9, tzinfo=UTC)


async def test_ids_shaped_like_page_paths_reach_their_own_pages(open_memory):
    memory = await open_memory()
    for user in ("bob", "bob/forget", "bob/items/1/forget"):
        await memory.long_term.remember(user, f"{user} likes jazz", tenant_id="acme")
    for thread in ("trip", "trip/rounds/1", "trip/forget"):
        said = [(HumanMessage(f"said in {thread}"), AT), (AIMessage("ok"), AT)]
        await memory.transfers.import_messages(thread, said, user_id="ana", tenant_id="acme", summarize=False)
    async with serve(memory) as served:
        header = {"Authorization": f"Bearer {await served.key('acme')}"}
        base = f"{served.url}/inspect"
        for user in ("bob/forget", "bob/items/1/forget"):
            page = httpx.get(f"{base}/users/{user.replace('/', '%2F')}", headers=header)
            assert page.status_code == 200 and f"{user} likes jazz" in page.text, page.text[-400:]
            assert "cannot be undone" not in page.text
        for thread in ("trip/rounds/1", "trip/forget"):
            page = httpx.get(f"{base}/conversations/{thread.replace('/', '%2F')}", headers=header)
            assert page.status_code == 200 and "Memory versions" in page.text, page.text[-400:]
            assert "cannot be undone" not in page.text
            at = httpx.get(f"{base}/conversations/{thread.replace('/', '%2F')}/rounds/1", headers=header)
            # An imported thread has no round record: the answer names this thread, not round 1 of 'trip'.
            assert f"conversation '{thread}'" in html.unescape(at.text), at.text[-400:]
        # The confirmation of 'bob/forget' names that user, and its erasure leaves 'bob' whole.
        confirm = httpx.get(f"{base}/users/bob%2Fforget/forget", headers=header)
        assert "bob/forget" in confirm.text and "cannot be undone" in confirm.text
        csrf = confirm.text.split('name="csrf" value="')[1].split('"')[0]
        erased = httpx.post(f"{base}/users/bob%2Fforget/forget", headers=header, data={"csrf": csrf})
        assert erased.status_code == 200, erased.text[-400:]
        assert [i.content for i in await memory.long_term.list_items("bob", tenant_id="acme")] == ["bob likes jazz"]
        assert await memory.long_term.list_items("bob/forget", tenant_id="acme") == []
        # An id no row can hold is nobody's page (it failed in the database: 500).
        for path in ("users/a%00b", "conversations/t%00", "users/a%00b/forget", "conversations/t%00/rounds/1"):
            assert httpx.get(f"{base}/{path}", headers=header).status_code == 404


async def test_a_cut_list_says_so(open_memory, monkeypatch):
    from memory_agent.api.inspector import auth, users

    for module in (auth, users):  # a short list, so the test writes a few items, not hundreds
        monkeypatch.setattr(module, "LIST_LIMIT", 3)
    memory = await open_memory()
    for n in range(4):
        await memory.long_term.remember("many", f"fact number {n}", tenant_id="acme")
    await memory.long_term.remember("few", "one fact", tenant_id="acme")
    async with serve(memory) as served:
        header = {"Authorization": f"Bearer {await served.key('acme')}"}
        many = httpx.get(f"{served.url}/inspect/users/many", headers=header).text
        assert many.count("fact number") == 3 and "Only the first 3 items" in many
        assert "Only the first" not in httpx.get(f"{served.url}/inspect/users/few", headers=header).text
