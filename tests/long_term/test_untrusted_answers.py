"""A summarizer's answer is untrusted input: one bad item costs that item, an answer of thousands of items is capped
per version, and a cluster summary call is given a bounded number of members."""

from __future__ import annotations

from memory_agent import with_memory
from tests.conftest import query
from tests.long_term.conftest import at
from tests.long_term.test_summary_job import Clock, open_service, say
from tests.support import EchoChat, ScriptedSummaryModel

__all__ = ["open_service"]  # the fixture

ALLERGY = {"key": "allergies", "content": "The user is allergic to peanuts", "source_sequences": [0]}


def allergy(n: int, importance: float = 0.5) -> dict:
    return {
        "key": "allergies",
        "content": f"The user is allergic to food number {n}",
        "importance": importance,
        "single_valued": False,
        "source_sequences": [0],
    }


async def test_an_item_holding_a_lone_surrogate_is_dropped_and_the_version_and_good_items_kept(
    open_service, database_url
):
    bad = {"summary": "The user has a peanut allergy.", "facts": [ALLERGY, {"key": "pin", "content": "PIN \ud800"}]}
    memory = await open_service(ScriptedSummaryModel(answers=[bad, bad]), clock=Clock(at(1)))
    await say(with_memory(EchoChat().graph, memory), "surrogate", ["I'm allergic to peanuts.", "Hello.", "Bye."])
    assert await memory.drain(timeout=10)
    ((status, text, stored),) = query(database_url, "SELECT status, memory_text, items FROM memory")
    assert (status, text) == ("completed", "The user has a peanut allergy.")
    assert [i["key"] for i in stored["facts"]] == ["allergies"]
    assert "facts[1]" in stored["dropped"][0] and "lone surrogate" in stored["dropped"][0]
    assert [i.key for i in await memory.long_term.list_items("ana")] == ["allergies"]


async def test_an_answer_of_thousands_of_items_writes_the_cap_and_counts_the_rest(open_service, database_url):
    answer = {
        "summary": "Many allergies.",
        "facts": [allergy(n, importance=0.9 if n % 1000 == 7 else 0.5) for n in range(3_000)],
    }
    memory = await open_service(
        ScriptedSummaryModel(answers=[answer]), clock=Clock(at(1)), summary_max_items=20, summary_min_cluster_items=50
    )
    await say(with_memory(EchoChat().graph, memory), "flood", ["I'm allergic to many things.", "Hello.", "Bye."])
    assert await memory.drain(timeout=10)
    ((status, stored),) = query(database_url, "SELECT status, items FROM memory")
    assert status == "completed" and len(stored["facts"]) == 20
    assert stored["dropped"] == [
        "2980 items over the cap of 20 per version (MEMORY_AGENT_SUMMARY_MAX_ITEMS): the most important were kept"
    ]
    assert query(database_url, "SELECT count(*) FROM items") == [(20,)]
    contents = {i.content for i in await memory.long_term.list_items("ana")}
    assert {f"The user is allergic to food number {n}" for n in (7, 1007, 2007)} <= contents  # the important ones


async def test_a_cluster_summary_call_gets_at_most_the_member_cap(open_service):
    model = ScriptedSummaryModel(
        answers=[{"summary": "Allergies.", "facts": [allergy(n, importance=0.5 + n / 100) for n in range(12)]}]
    )
    memory = await open_service(model, clock=Clock(at(1)), summary_max_cluster_members=5)
    await say(with_memory(EchoChat().graph, memory), "cluster", ["I'm allergic to many things.", "Hello.", "Bye."])
    assert await memory.drain(timeout=10)
    (prompt,) = model.cluster_prompts
    members = [line for line in prompt.splitlines() if line.startswith("- ")]
    assert sorted(members) == sorted(f"- The user is allergic to food number {n}" for n in range(7, 12))  # top 5
    (summary,) = [i for i in await memory.long_term.list_items("ana") if i.is_summary]
    assert len(summary.source_item_ids) == 12  # it still stands for every member
