"""The memory inspector under /inspect/: over HTTP (the key in a header or the login cookie, tenant isolation,
erasures behind a confirmation and the form token) and rendered in headless Chromium (the DOM checked, a
screenshot of each page in the test's directory, or in MEMORY_AGENT_SCREENSHOTS when it names one)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from tests.api.conftest import serve
from tests.browser import Browser, chromium_path
from tests.conftest import query
from tests.support import EchoChat, ScriptedSummaryModel

FACT = {"key": "home_city", "content": "Ana lives in Lisbon", "importance": 0.9, "source_sequences": [0]}


async def _ana_in_acme(open_memory: Any) -> Any:
    """Tenant acme's ana: four rounds of thread 'trip' (a summary that stated one fact), a second value of it
    stated later (so the first is past), and tenant globex's bob."""
    model = ScriptedSummaryModel(answers=[{"summary": "Ana plans a trip.", "facts": [FACT]}])
    memory = await open_memory(model=model)
    app = with_memory(EchoChat().graph, memory)
    config = {"configurable": {"thread_id": "trip", "user_id": "ana", "tenant_id": "acme"}}
    for n in range(1, 5):
        await app.ainvoke({"messages": [HumanMessage(f"I live in Lisbon, round {n}")]}, config)
        assert await memory.drain(timeout=10)  # round 4 is served the summary of rounds 1-3
    await memory.long_term.remember("ana", "Ana lives in Porto", key="home_city", tenant_id="acme")
    await memory.long_term.remember("bob", "Bob likes jazz", tenant_id="globex")
    slashed = {"configurable": {"thread_id": "desk/42?#", "user_id": "ana/x", "tenant_id": "acme"}}
    await app.ainvoke({"messages": [HumanMessage("a thread id with a slash")]}, slashed)
    return memory


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


async def test_pages_show_the_tenant_only_and_erase_after_confirmation(open_memory):
    memory = await _ana_in_acme(open_memory)
    async with serve(memory) as served:
        acme, globex = await served.key("acme"), await served.key("globex")
        base = f"{served.url}/inspect"
        assert httpx.get(f"{base}/").status_code == 401  # the login form, nothing else
        assert 'name="key"' in httpx.get(f"{base}/").text

        header = {"Authorization": f"Bearer {acme}"}
        users = httpx.get(f"{base}/", headers=header)
        assert users.status_code == 200 and "ana" in users.text and "bob" not in users.text
        user = _text(httpx.get(f"{base}/users/ana", headers=header).text)
        assert "Ana lives in Porto" in user and "Ana lives in Lisbon" in user and "current" in user
        assert "trip seq 0" in user  # the Lisbon fact's source turn
        chain = _text(httpx.get(f"{base}/conversations/trip", headers=header).text)
        assert "completed" in chain and "Memory versions" in chain
        at = _text(httpx.get(f"{base}/conversations/trip/rounds/4", headers=header).text)
        assert "Ana plans a trip." in at and "I live in Lisbon, round 4" in at

        # Ids holding '/', '?' or '#' are quoted whole in links and found by every page.
        slashed = httpx.get(f"{base}/users/ana%2Fx", headers=header).text
        assert "/inspect/conversations/desk%2F42%3F%23" in slashed
        for path in ("conversations/desk%2F42%3F%23", "conversations/desk%2F42%3F%23/rounds/1"):
            assert "a thread id with a slash" in httpx.get(f"{base}/{path}", headers=header).text or path.endswith("23")
        confirm = httpx.get(f"{base}/conversations/desk%2F42%3F%23/forget", headers=header)
        assert "cannot be undone" in confirm.text

        # Another tenant's key: acme's ana and her thread do not exist for it.
        other = {"Authorization": f"Bearer {globex}"}
        assert "ana" not in httpx.get(f"{base}/", headers=other).text
        assert httpx.get(f"{base}/users/ana", headers=other).status_code == 404
        assert httpx.get(f"{base}/conversations/trip", headers=other).status_code == 404
        assert httpx.get(f"{base}/conversations/trip/rounds/1", headers=other).status_code == 404
        (porto,) = query(served.memory.database_url, "SELECT item_id FROM items WHERE content = 'Ana lives in Porto'")
        forget_porto = f"{base}/users/ana/items/{porto[0]}/forget"
        assert httpx.post(forget_porto, headers=other).status_code == 404

        # The login cookie: a form without the page's token erases nothing.
        with httpx.Client(base_url=served.url) as browser:
            logged = browser.post("/inspect/login", data={"key": acme})
            assert logged.status_code == 303 and "memory_agent_inspect" in browser.cookies
            assert "ana" in browser.get("/inspect/").text
            assert browser.post(forget_porto.removeprefix(served.url), data={}).status_code == 403
            confirm = browser.get(forget_porto.removeprefix(served.url))
            assert "cannot be undone" in confirm.text
            csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', confirm.text).group(1)  # type: ignore[union-attr]
            erased = browser.post(forget_porto.removeprefix(served.url), data={"csrf": csrf})
            assert erased.status_code == 200 and f"[{porto[0]}]" in erased.text
        assert query(served.memory.database_url, "SELECT count(*) FROM items WHERE item_id = %s", porto) == [(0,)]

        erased_user = httpx.post(f"{base}/users/ana/forget", headers=header)
        assert erased_user.status_code == 200 and "conversations_deleted" in erased_user.text
        rows = query(served.memory.database_url, "SELECT count(*) FROM conversations WHERE user_id = 'ana'")
        assert rows == [(0,)]
        assert httpx.get(f"{base}/users/ana", headers=header).status_code == 404
        assert httpx.get(f"{base}/", headers={"Authorization": "Bearer mak_revoked"}).status_code == 401


@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (apt-get install chromium)")
async def test_pages_render_in_chromium(open_memory, tmp_path):
    memory = await _ana_in_acme(open_memory)
    shots = Path(os.environ.get("MEMORY_AGENT_SCREENSHOTS") or tmp_path)
    async with serve(memory) as served:
        key = await served.key("acme")
        browser = Browser(tmp_path / "profile")
        try:
            browser.open(f"{served.url}/inspect/")
            assert browser.run("document.querySelector('input[name=key]') !== null")
            browser.screenshot(shots / "inspector-login.png")
            browser.run(
                f"document.querySelector('input[name=key]').value = {key!r}; document.forms[0].submit()",
                navigates=True,
            )
            assert browser.run("document.querySelector('h1').textContent") == "Users of acme"
            assert sorted(browser.run("[...document.querySelectorAll('td a')].map(a => a.textContent)")) == [
                "ana",
                "ana/x",
            ]
            browser.screenshot(shots / "inspector-users.png")

            browser.open(f"{served.url}/inspect/users/ana")
            cells = browser.run("[...document.querySelectorAll('tbody tr')].map(r => r.className + ':' + r.innerText)")
            assert any(c.startswith(":") and "Ana lives in Porto" in c for c in cells)  # current
            assert any(c.startswith("past:") and "Ana lives in Lisbon" in c for c in cells)
            browser.screenshot(shots / "inspector-user.png")

            browser.open(f"{served.url}/inspect/conversations/trip")
            assert "completed" in browser.run("document.querySelector('table').innerText")
            browser.screenshot(shots / "inspector-conversation.png")

            browser.open(f"{served.url}/inspect/conversations/trip/rounds/4")
            assert "Ana plans a trip." in browser.run("document.querySelector('pre').innerText")
            browser.screenshot(shots / "inspector-round.png")

            browser.open(f"{served.url}/inspect/users/ana/forget")
            browser.run("document.forms[0].submit()", navigates=True)
            assert browser.run("document.querySelector('h1').textContent") == "User ana forgotten"
            browser.screenshot(shots / "inspector-forgotten.png")
        finally:
            browser.close()
    assert query(memory.database_url, "SELECT count(*) FROM items WHERE user_id = 'ana'") == [(0,)]
    assert all((shots / f"inspector-{name}.png").stat().st_size > 5_000 for name in ("users", "user", "round"))
