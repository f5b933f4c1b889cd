"""GET /users/{user_id}/recall over real HTTP: the same ranked memories as memory.recall with their provenance
(a batch summary whose originals were forgotten included), the key's tenant only (404 like an unknown user),
401 without a key, 422 naming the bad parameter."""

from __future__ import annotations

from memory_agent.long_term.recall.block import BLOCK_HEADER
from tests.api.conftest import serve
from tests.api.test_http import chat, client
from tests.integration.test_recall_surfaces import old_batch


async def test_recall_returns_what_memory_recall_returns_with_provenance(served):
    key = await served.key("default")
    await chat(served, "dinner", "ana", "default", ["I'm allergic to peanuts.", "Any snack ideas?"])
    summary_id = await old_batch(served.memory)
    async with client(served, key) as http:
        response = await http.get("/users/ana/recall", params={"q": "Remember what I am allergic to?"})
        assert response.status_code == 200, response.text
        body = response.json()
        expected = (await served.memory.long_term.recall("ana", "Remember what I am allergic to?")).results
        assert [r["text"] for r in body["results"]] == [hit.text for hit in expected]
        first = body["results"][0]
        assert (first["kind"], first["conversation_id"], first["sequences"]) == ("turn", "dinner", [0])
        assert first["is_summary"] is False and "fts" in first["paths"]
        assert body["block"].startswith(BLOCK_HEADER) and body["retrieval_path"] == "fts"
        assert 0 < body["estimated_tokens"] <= 2000

        response = await http.get("/users/ana/recall", params={"q": "Kyoto ryokan", "limit": 5})
        (summary,) = response.json()["results"]
        assert summary["batch_summary_id"] == summary_id and summary["is_summary"] is True
        assert len(summary["source_item_ids"]) == 2 and summary["kind"] == "summary"
        assert response.json()["retrieval_path"] == "summaries_only"
        # Before the summary was written, it was not there to recall.
        early = await http.get("/users/ana/recall", params={"q": "Kyoto ryokan", "as_of": "2026-01-02T00:00:00Z"})
        assert early.status_code == 200 and early.json()["results"] == []


async def test_recall_is_tenant_checked_and_validates_its_parameters(served):
    acme, globex = await served.key("acme"), await served.key("globex")
    await chat(served, "t1", "ana", "acme", ["My violin teacher is called Ingrid."])
    async with client(served) as http:
        assert (await http.get("/users/ana/recall", params={"q": "violin"})).status_code == 401
    async with client(served, globex) as http:
        response = await http.get("/users/ana/recall", params={"q": "violin"})
        assert response.status_code == 404 and "Ingrid" not in response.text
    async with client(served, acme) as http:
        assert (await http.get("/users/nobody/recall", params={"q": "violin"})).status_code == 404
        ok = await http.get("/users/ana/recall", params={"q": "violin teacher"})
        assert ok.status_code == 200 and "Ingrid" in ok.json()["results"][0]["text"]
        zoned = await http.get("/users/ana/recall", params={"q": "violin teacher", "time_zone": "Asia/Tokyo"})
        assert zoned.status_code == 200 and zoned.json()["results"][0]["text"] == ok.json()["results"][0]["text"]
        for params, field in (
            ({}, "q"),
            ({"q": "   "}, "q"),
            ({"q": "a\x00b"}, "q"),
            ({"q": "x" * 4001}, "q"),
            ({"q": "violin", "limit": 0}, "limit"),
            ({"q": "violin", "limit": 51}, "limit"),
            ({"q": "violin", "as_of": "2026-01-02T00:00:00"}, "as_of"),
            ({"q": "violin", "as_of": "yesterday"}, "as_of"),
            ({"q": "violin", "time_zone": "Europe/Lyon"}, "time_zone"),
            ({"q": "violin", "time_zone": "x" * 65}, "time_zone"),
        ):
            response = await http.get("/users/ana/recall", params=params)
            assert response.status_code == 422, (params, response.text)
            assert response.json()["detail"][0]["loc"][-1] == field, (params, response.text)


async def test_a_recall_as_of_a_time_reads_its_dates_in_the_time_zone_setting_when_the_request_names_none(
    open_memory,
):
    # The route says: no time_zone, MEMORY_AGENT_RECALL_TIME_ZONE. With as_of given, the setting was dropped and
    # "yesterday" read in as_of's offset (UTC for a time ending in Z): Tokyo's users got UTC's yesterday.
    from tests.long_term.test_recall_dates import CAKE, TOKYO_NOW, WALK, _walk_and_cake

    memory = await _walk_and_cake(open_memory, recall_time_zone="Asia/Tokyo")
    async with serve(memory) as served:
        key = await served.key("default")
        async with client(served, key) as http:
            params = {"q": "what did I do yesterday?", "as_of": TOKYO_NOW.isoformat().replace("+00:00", "Z")}
            tokyo = (await http.get("/users/ana/recall", params=params)).json()
            first = tokyo["results"][0]
            assert first["conversation_id"] == "walks" and "date" in first["paths"], tokyo
            assert WALK in tokyo["block"].splitlines()[2]
            utc = (await http.get("/users/ana/recall", params={**params, "time_zone": "UTC"})).json()
            assert (utc["results"][0]["conversation_id"], utc["results"][0]["paths"]) == ("cakes", ["date"])
            assert CAKE in utc["block"].splitlines()[2]
