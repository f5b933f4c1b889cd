"""POST /memory/summarize and GET /memory/summaries over real HTTP: keys (401), tenant isolation (404, and
lists of the key's tenant only), bad bodies (422 naming the field, nothing written), a repeat as a no-op and
`force` replacing the note, concurrent identical requests writing one note, a rollup's missing inputs written
first, and DELETE /users/{id} erasing the user's notes."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from tests.api.conftest import NOW, Served, serve
from tests.api.test_http import client, remember_on
from tests.conftest import query
from tests.long_term.test_forget import tables_holding

SEED_KEYS = {"summaryId", "userId", "period", "startDate", "endDate", "keyInsights", "notesConsolidated"}


def notes(url: str) -> list[tuple[str, str, str]]:
    return [
        (tenant, period, start.isoformat())
        for tenant, period, start in query(
            url, "SELECT tenant_id, period, period_start FROM consolidation_notes ORDER BY 1, 2, 3"
        )
    ]


async def test_both_routes_need_a_live_key(served: Served):
    await remember_on(served, "acme", "ana", 6, "The user lives in Lyon")
    for key in (None, "mak_not-a-key"):
        async with client(served, key) as http:
            posted = await http.post("/memory/summarize", json={"userId": "ana", "period": "daily"})
            listed = await http.get("/memory/summaries", params={"period": "daily"})
            assert posted.status_code == listed.status_code == 401
            assert posted.headers["www-authenticate"] == "Bearer"
    assert served.model.calls == []


async def test_a_repeat_is_a_no_op_and_force_replaces_the_note(served: Served, database_url):
    await remember_on(served, "acme", "ana", 6, "The user lives in Lyon")  # January 7: yesterday at NOW
    async with client(served, await served.key("acme")) as http:

        async def summarize(**body: object) -> dict[str, object]:
            response = await http.post("/memory/summarize", json={"userId": "ana", "period": "daily", **body})
            assert response.status_code == 200, response.text
            return dict(response.json())

        first = await summarize()
        assert first == {
            "summaryId": first["summaryId"],
            "period": "daily",
            "startDate": "2026-01-07",
            "endDate": "2026-01-07",
            "notesConsolidated": 1,
            "status": "complete",
        }
        assert isinstance(first["summaryId"], int) and len(served.model.calls) == 1
        again = await summarize(force=False)
        assert again == {**first, "status": "exists"} and len(served.model.calls) == 1  # no model call
        forced = await summarize(force=True)
        assert forced == first and len(served.model.calls) == 2  # written again, same note
        assert notes(database_url) == [("acme", "daily", "2026-01-07")]

        listed = await http.get("/memory/summaries", params={"period": "daily"})
        assert listed.status_code == 200
        (summary,) = listed.json()
        assert set(summary) == SEED_KEYS
        assert summary["summaryId"] == first["summaryId"] and summary["userId"] == "ana"
        assert summary["keyInsights"] == ["fact home_city: The user lives in Lyon"]


async def test_a_rollup_writes_its_missing_inputs_first(served: Served, database_url):
    for day in (0, 1, 2):  # January 1 .. 3: the week of December 28 .. January 3
        await remember_on(served, "acme", "ana", day, f"The user lives in city {day}")
    async with client(served, await served.key("acme")) as http:
        week = (await http.post("/memory/summarize", json={"userId": "ana", "period": "weekly"})).json()
        assert (week["status"], week["startDate"], week["endDate"]) == ("complete", "2025-12-28", "2026-01-03")
        assert week["notesConsolidated"] == 3  # the three dailies, written by this request
        december = (await http.post("/memory/summarize", json={"userId": "ana", "period": "monthly"})).json()
        assert december["status"] == "nothing_to_consolidate" and december["summaryId"] is None
        served.clock.set(datetime(2026, 2, 2, 5, tzinfo=UTC))
        january = (await http.post("/memory/summarize", json={"userId": "ana", "period": "monthly"})).json()
        assert (january["status"], january["notesConsolidated"]) == ("complete", 1)  # the week ending January 3
        monthly = (await http.get("/memory/summaries", params={"period": "monthly", "userId": "ana"})).json()
        assert [(m["startDate"], m["endDate"]) for m in monthly] == [("2026-01-01", "2026-01-31")]
        assert monthly[0]["keyInsights"] == ["fact home_city: The user lives in city 2"]  # the latest value
    daily = [("acme", "daily", f"2026-01-0{d}") for d in (1, 2, 3)]
    assert notes(database_url) == [*daily, ("acme", "monthly", "2026-01-01"), ("acme", "weekly", "2025-12-28")]
    # Three dailies, one weekly, one monthly: the empty days and the empty December cost no model call.
    assert len(served.model.calls) == 5


async def test_another_tenants_user_is_404_and_lists_show_the_keys_tenant_only(served: Served, database_url):
    await remember_on(served, "acme", "ana", 6, "The user lives in Lyon")
    acme, globex = await served.key("acme"), await served.key("globex")
    async with client(served, globex) as http:
        for user in ("ana", "nobody"):
            response = await http.post("/memory/summarize", json={"userId": user, "period": "daily", "force": True})
            assert response.status_code == 404 and response.json() == {"detail": "no such user"}
    assert notes(database_url) == [] and served.model.calls == []
    async with client(served, acme) as http:
        assert (await http.post("/memory/summarize", json={"userId": "ana", "period": "daily"})).status_code == 200
        assert len((await http.get("/memory/summaries", params={"period": "daily"})).json()) == 1
    async with client(served, globex) as http:
        assert (await http.get("/memory/summaries", params={"period": "daily"})).json() == []
        of_other = await http.get("/memory/summaries", params={"period": "daily", "userId": "ana"})
        assert of_other.status_code == 404 and of_other.json() == {"detail": "no such user"}
        nobody = await http.get("/memory/summaries", params={"period": "daily", "userId": "nobody"})
        assert nobody.status_code == 404


async def test_bad_input_is_422_naming_the_problem_and_writes_nothing(served: Served, database_url):
    await remember_on(served, "acme", "ana", 6, "The user lives in Lyon")
    async with client(served, await served.key("acme")) as http:
        for body, loc in (
            ({"userId": "ana", "period": "yearly"}, ["body", "period"]),
            ({"period": "daily"}, ["body", "userId"]),
            ({"userId": "ana"}, ["body", "period"]),
            ({"userId": "ana", "period": "daily", "force": "yes"}, ["body", "force"]),
            ({"userId": "ana", "period": "daily", "extra": 1}, ["body", "extra"]),
            ({"userId": 7, "period": "daily"}, ["body", "userId"]),
            ({"userId": "  ", "period": "daily"}, ["body", "userId"]),  # blank
            ({"userId": "é" * 300, "period": "daily"}, ["body", "userId"]),  # 300 characters, 600 bytes
            ({"userId": "u" * 513, "period": "daily"}, ["body", "userId"]),  # over the 512 bytes of an id
        ):
            response = await http.post("/memory/summarize", json=body)
            assert response.status_code == 422, (body, response.text)
            assert response.json()["detail"][0]["loc"] == loc, (body, response.json())
        not_json = await http.post("/memory/summarize", content=b"{", headers={"content-type": "application/json"})
        assert not_json.status_code == 422
        for params, loc in (
            ({}, ["query", "period"]),
            ({"period": "hourly"}, ["query", "period"]),
            ({"period": "daily", "userId": " "}, ["query", "userId"]),
            ({"period": "daily", "limit": "0"}, ["query", "limit"]),
        ):
            response = await http.get("/memory/summaries", params=params)
            assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc, (params, response.text)
    assert notes(database_url) == [] and served.model.calls == []


async def test_concurrent_identical_requests_write_one_note(served: Served, database_url):
    await remember_on(served, "acme", "ana", 6, "The user lives in Lyon")
    # A model call waits (up to 1 s) for four: all four requests pass their "is it written?" read meanwhile.
    served.model.parties[0], served.model.wait_s[0] = 4, 1.0
    async with client(served, await served.key("acme")) as http:
        responses = await asyncio.gather(
            *(http.post("/memory/summarize", json={"userId": "ana", "period": "daily"}) for _ in range(4))
        )
    answers = [response.json() for response in responses]
    assert all(response.status_code == 200 for response in responses), answers
    assert len(served.model.calls) == 1  # the note is claimed before its call: the others wait, then find it
    assert sorted(a["status"] for a in answers) == ["complete", "exists", "exists", "exists"]
    assert len({a["summaryId"] for a in answers}) == 1  # the losers answer with the note that stands
    assert notes(database_url) == [("acme", "daily", "2026-01-07")]


async def test_forgetting_the_user_erases_their_notes(served: Served, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    await remember_on(served, "acme", "ana", 6, f"The user's code is {canary}")
    async with client(served, await served.key("acme")) as http:
        assert (await http.post("/memory/summarize", json={"userId": "ana", "period": "daily"})).status_code == 200
        assert "consolidation_notes.content" in tables_holding(database_url, canary)
        assert (await http.delete("/users/ana")).status_code == 200
        assert (await http.get("/memory/summaries", params={"period": "daily"})).json() == []
    assert tables_holding(database_url, canary) == []


# One consolidation call of the offline consolidator costs ~150 here: far over a ceiling of 1.0.
PRICED = {"monthly_cost_ceiling": 1.0, "llm_prices": {"offline-consolidator": {"input": 1e6, "output": 1e6}}}


async def test_concurrent_requests_cannot_overrun_the_cost_ceiling(open_memory, database_url):
    async with serve(await open_memory(**PRICED)) as served:
        for n in range(12):
            await remember_on(served, "acme", f"user{n}", 6, f"The user lives in city {n}")
        served.model.parties[0], served.model.wait_s[0] = 12, 1.0  # calls that got through wait for the others
        async with client(served, await served.key("acme")) as http:
            responses = await asyncio.gather(
                *(http.post("/memory/summarize", json={"userId": f"user{n}", "period": "daily"}) for n in range(12))
            )
    assert [r.status_code for r in responses] == [200] * 12, [r.text for r in responses]
    statuses = sorted(r.json()["status"] for r in responses)
    assert statuses == ["complete"] + ["over_budget"] * 11
    assert len(served.model.calls) == 1  # the ceiling was reserved before the call: no other call started
    # The tenant's month is the sum of its rows (one per user, and the tenant's own).
    (spent,) = query(database_url, "SELECT sum(cost) FROM tenant_monthly_spend WHERE tenant_id = 'acme'")[0]
    assert 1.0 < spent < 400  # one call over the ceiling, at most
    assert query(database_url, "SELECT count(*) FROM budget_reservations") == [(0,)]  # settled
    assert query(database_url, "SELECT count(*) FROM llm_calls") == [(1,)]


async def test_over_its_ceiling_a_tenant_gets_200_over_budget(open_memory, database_url):
    async with serve(await open_memory(**PRICED)) as served:
        await remember_on(served, "acme", "ana", 5, "The user lives in Lyon")
        await remember_on(served, "acme", "ana", 6, "The user lives in Nice")
        async with client(served, await served.key("acme")) as http:
            served.clock.set(datetime(2026, 1, 7, 12, tzinfo=UTC))  # the daily of January 6: the ceiling's call
            first = await http.post("/memory/summarize", json={"userId": "ana", "period": "daily"})
            assert first.status_code == 200 and first.json()["status"] == "complete"
            served.clock.set(NOW)
            response = await http.post("/memory/summarize", json={"userId": "ana", "period": "daily"})
            assert response.status_code == 200, response.text  # was a 500: KeyError 'over_budget'
            assert response.json()["status"] == "over_budget" and response.json()["summaryId"] is None
    assert len(served.model.calls) == 1
    assert notes(database_url) == [("acme", "daily", "2026-01-06")]


async def test_an_unusable_consolidation_model_is_503_naming_its_setting(open_memory, database_url, monkeypatch):
    """An app over its own open service makes the consolidation model at the first request: a setting naming no
    usable model answers 503 saying what to set, nothing written (before: a bare 500 Internal Server Error)."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    memory = await open_memory(consolidation_model="anthropic:claude-x")
    async with serve(memory, settings_model=True) as served:
        await remember_on(served, "acme", "ana", 6, "The user lives in Lyon")
        async with client(served, await served.key("acme")) as http:
            response = await http.post("/memory/summarize", json={"userId": "ana", "period": "daily"})
    assert response.status_code == 503, response.text
    detail = response.json()["detail"]
    assert "MEMORY_AGENT_CONSOLIDATION_MODEL='anthropic:claude-x'" in detail and "ANTHROPIC_API_KEY" in detail
    assert notes(database_url) == []
