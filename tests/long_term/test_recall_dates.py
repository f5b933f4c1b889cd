"""Recall's date boost: a date expression in the query, read at the service's clock in its time zone, ranks the
turns of that time first."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from memory_agent.errors import ConfigurationError, InvalidInputError
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term.recall import RecallSettings
from memory_agent.long_term.recall.dates import date_span
from memory_agent.schemas.keys import zone_named

PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2024, 3, 13, 9, 0, tzinfo=PARIS)  # a Wednesday


def day(year: int, month: int, number: int, zone=PARIS) -> datetime:
    return datetime(year, month, number, tzinfo=zone)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did they plan for September 2023?", day(2023, 9, 1), day(2023, 10, 1)),
        ("in sept. 2023", day(2023, 9, 1), day(2023, 10, 1)),
        ("plans in December 2023", day(2023, 12, 1), day(2024, 1, 1)),
        ("on 5 March 2024", day(2024, 3, 5), day(2024, 3, 6)),
        ("on March 5th, 2024", day(2024, 3, 5), day(2024, 3, 6)),
        ("the 2023-09-14 call", day(2023, 9, 14), day(2023, 9, 15)),
        ("notes of 2023-09", day(2023, 9, 1), day(2023, 10, 1)),
        ("what did I say yesterday", day(2024, 3, 12), day(2024, 3, 13)),
        # Read as "yesterday", the day before it named the wrong day; "last night" named none.
        ("what did I say the day before yesterday?", day(2024, 3, 11), day(2024, 3, 12)),
        ("what did we talk about last night", day(2024, 3, 12), day(2024, 3, 13)),
        ("what did we decide today", day(2024, 3, 13), day(2024, 3, 14)),
        ("last week", day(2024, 3, 4), day(2024, 3, 11)),
        ("this week", day(2024, 3, 11), day(2024, 3, 18)),
        ("last month", day(2024, 2, 1), day(2024, 3, 1)),
        ("last year", day(2023, 1, 1), day(2024, 1, 1)),
        ("two weeks ago", day(2024, 2, 26), day(2024, 3, 4)),
        ("3 days ago", day(2024, 3, 10), day(2024, 3, 11)),
        ("last Monday", day(2024, 3, 11), day(2024, 3, 12)),
        ("last Wednesday", day(2024, 3, 6), day(2024, 3, 7)),
        ("during 2022", day(2022, 1, 1), day(2023, 1, 1)),
        ("what did we do in 2019, the words she said", day(2019, 1, 1), day(2020, 1, 1)),
        # A day without its year: the latest one not after today (a user asks about the past).
        ("what did we do on March 3rd?", day(2024, 3, 3), day(2024, 3, 4)),
        ("on the 13th of March", day(2024, 3, 13), day(2024, 3, 14)),
        ("what happened on March 14", day(2023, 3, 14), day(2023, 3, 15)),
        ("on 29 February", day(2024, 2, 29), day(2024, 3, 1)),
        ("the call of Dec. 24th", day(2023, 12, 24), day(2023, 12, 25)),
        ("on Sept 5 at the office", day(2023, 9, 5), day(2023, 9, 6)),
        ("what did we plan in September?", day(2023, 9, 1), day(2023, 10, 1)),
        ("during march", day(2024, 3, 1), day(2024, 4, 1)),
    ],
)
def test_date_expressions_name_a_span_in_the_users_time(query, start, end):
    span = date_span(query, NOW)
    assert span is not None
    assert (span.start, span.end) == (start, end)


@pytest.mark.parametrize(
    ("query", "now", "start", "end", "hours"),
    [
        # Paris moved to summer time at 02:00 on 31 March 2024: that day had 23 hours, 27 October 25.
        ("yesterday", datetime(2024, 4, 1, 12, tzinfo=PARIS), day(2024, 3, 31), day(2024, 4, 1), 23),
        ("in October 2024", NOW, day(2024, 10, 1), day(2024, 11, 1), 31 * 24 + 1),
        # A Monday: last week is the whole week before, not the day before.
        ("last week", datetime(2024, 3, 4, 0, 5, tzinfo=PARIS), day(2024, 2, 26), day(2024, 3, 4), 7 * 24),
        # Across a year: the 1st of January's yesterday, last month and December.
        ("yesterday", datetime(2024, 1, 1, 0, 30, tzinfo=PARIS), day(2023, 12, 31), day(2024, 1, 1), 24),
        ("last month", datetime(2024, 1, 1, 0, 30, tzinfo=PARIS), day(2023, 12, 1), day(2024, 1, 1), 31 * 24),
        ("in December", datetime(2024, 1, 1, 0, 30, tzinfo=PARIS), day(2023, 12, 1), day(2024, 1, 1), 31 * 24),
        ("on Feb 29", datetime(2025, 3, 1, tzinfo=PARIS), day(2024, 2, 29), day(2024, 3, 1), 24),
    ],
)
def test_spans_follow_the_users_calendar_across_summer_time_and_year_ends(query, now, start, end, hours):
    span = date_span(query, now)
    assert span is not None and (span.start, span.end) == (start, end)
    assert span.end.astimezone(UTC) - span.start.astimezone(UTC) == timedelta(hours=hours)


@pytest.mark.parametrize(
    "query",
    [
        "peanut allergy",
        "February 30, 2024",
        "the 2023-13 report",
        "May I ask?",
        "on February 30th",
        "I may 3D print it",
        # A bound, not a time: ranking November's turns first lost the answer, told in July.
        "how many pets do I have as of November 2023?",
        "how many books as of 2023",
        "what changed since last week?",
        "what did I do before April 10, 2023?",
        "what is due by the 5th of March",
        # A count, not a year: the essay was of 2000 words, the run of 1990 meters.
        "what did I write in the essay of 2000 words?",
        "the run from 1990 meters to the top",
        "a budget of 2000 dollars",
        "a text of 2000-word length",
    ],
)
def test_no_date_or_an_impossible_one_gives_none(query):
    assert date_span(query, NOW) is None


def test_the_clock_must_know_its_time_zone():
    with pytest.raises(ValueError, match="timezone-aware"):
        date_span("yesterday", datetime(2024, 3, 13))


@pytest.mark.parametrize("name", ["Asia/Tokio", "Europe", "America", "Etc", "../etc", "+02:00"])
def test_a_name_that_is_no_time_zone_is_refused_by_name(name):
    # "Europe" is a folder of the zone database: ZoneInfo raised IsADirectoryError, which reached the round (and
    # the HTTP route's 500) instead of the InvalidInputError naming the setting.
    with pytest.raises(InvalidInputError, match=f"time_zone {re.escape(repr(name))} is no time zone"):
        zone_named(name, "time_zone")
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_RECALL_TIME_ZONE .* is no time zone"):
        RecallSettings(time_zone=name)


def records(start: datetime, texts: list[str]) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": text,
            "created_at": (start + timedelta(minutes=n)).isoformat(),
        }
        for n, text in enumerate(texts)
    ]


@pytest.mark.parametrize("config", ["english", "simple"])  # the stored vectors, or vectors computed
async def test_a_date_in_the_query_ranks_the_turns_of_that_time_first(open_memory, config):
    memory = await open_memory(model=OfflineSummaryModel(), clock=lambda: NOW, recall_text_search_config=config)
    september = records(datetime(2023, 9, 20, 17, tzinfo=UTC), ["The garden fence needs a plan.", "Fine."])
    january = records(
        datetime(2024, 1, 10, 17, tzinfo=UTC),
        ["What did we plan? We plan the kitchen.", "A kitchen plan, then."],
    )
    yesterday = records(datetime(2024, 3, 12, 8, tzinfo=UTC), ["Nothing to plan, just a walk by the river.", "Nice."])
    for thread, messages in (("sep", september), ("jan", january), ("yday", yesterday)):
        await memory.transfers.import_messages(thread, messages, user_id="ana", summarize=False)

    undated = await memory.long_term.recall("ana", "what did we plan")
    assert undated.results[0].conversation_id == "jan"  # the most words in common

    dated = await memory.long_term.recall("ana", "what did we plan in September 2023")
    first = dated.results[0]
    assert (first.conversation_id, first.sequences[0]) == ("sep", 0)
    assert "date" in first.paths
    assert "20 September 2023" in dated.block.splitlines()[1]

    # Yesterday in Paris (the clock's zone): 12 March, whose turns share no word with the query but the time.
    walk = await memory.long_term.recall("ana", "what happened yesterday?")
    assert walk.results[0].conversation_id == "yday"
    # A span with no turn changes nothing.
    empty = await memory.long_term.recall("ana", "what did we plan in May 2021")
    assert [h.conversation_id for h in empty.results] == [h.conversation_id for h in undated.results]


async def test_a_turn_that_names_a_time_of_the_span_ranks_with_the_turns_stored_in_it(open_memory):
    # "Last month I went to a convention", stored on 18 April, is of March: it ranked after every turn stored in
    # March, none of which spoke of a convention. A turn's "last year" is not of a month.
    memory = await open_memory(model=OfflineSummaryModel(), clock=lambda: NOW)
    march = [
        "Swimming on Mondays.",
        "We went to the cinema.",
        "I did the taxes.",
        "I went to the dentist.",
        "I painted the kitchen.",
        "I fixed the bike.",
    ]
    for n, text in enumerate(march):
        stored = records(datetime(2023, 3, 5 + n, 17, tzinfo=UTC), [text])
        await memory.transfers.import_messages(f"march-{n}", stored, user_id="ana", summarize=False)
    told = records(datetime(2023, 4, 18, 17, tzinfo=UTC), ["Last month we attended a convention with my colleagues."])
    await memory.transfers.import_messages("april", told, user_id="ana", summarize=False)
    later = records(datetime(2024, 2, 1, 17, tzinfo=UTC), ["Last year we attended a convention with my colleagues."])
    await memory.transfers.import_messages("later", later, user_id="ana", summarize=False)

    found = await memory.long_term.recall("ana", "which convention did we attend in March 2023?", limit=5)
    assert found.results[0].conversation_id == "april"
    assert "date" in found.results[0].paths
    assert "later" not in [hit.conversation_id for hit in found.results]


async def test_the_block_dates_a_turn_in_the_users_time_zone(open_memory):
    # 00:30 in Paris on 12 March is 23:30 UTC on 11 March: "yesterday" (12 March in Paris) finds it, and the block
    # must say 12 March, the day the user wrote it (in UTC the model read 11 March, a day the question did not name).
    memory = await open_memory(model=OfflineSummaryModel(), clock=lambda: NOW)
    late = records(datetime(2024, 3, 12, 0, 30, tzinfo=PARIS), ["I booked the dentist for Friday.", "Good."])
    await memory.transfers.import_messages("late", late, user_id="ana", summarize=False)
    found = await memory.long_term.recall("ana", "what did I book yesterday with the dentist")
    assert found.results[0].conversation_id == "late"
    assert "date" in found.results[0].paths
    assert "late #0 user, 12 March 2024]" in found.block
    assert found.results[0].created_at == datetime(2024, 3, 12, 0, 30, tzinfo=PARIS)


async def test_a_rounds_turns_are_dated_by_the_services_clock(open_memory, database_url):
    # A round's messages take the service's clock (as imported ones take their own times): with the database's
    # now() instead, a round at a replayed or injected time was dated today, and "yesterday" at the clock missed it.
    from langchain_core.messages import AIMessage, HumanMessage

    from tests.conftest import query

    now = [datetime(2024, 3, 12, 18, 0, tzinfo=PARIS)]
    memory = await open_memory(model=OfflineSummaryModel(), clock=lambda: now[0])
    await memory.conversations.finish_round(
        "walks", [HumanMessage("I took a long walk by the river."), AIMessage("Lovely.")], user_id="ana"
    )
    now[0] = NOW  # the next morning
    found = await memory.long_term.recall("ana", "what did I do yesterday?")
    assert found.results and found.results[0].conversation_id == "walks"
    assert found.results[0].created_at == datetime(2024, 3, 12, 18, 0, tzinfo=PARIS)
    assert "12 March 2024]" in found.block
    assert found.retrieval_path == "date"  # found by its time alone (it read "window": nothing recalled)
    # A round that recalls so records it (the round's metrics row accepts the path).
    question = [HumanMessage("what did I do yesterday?")]
    _, info = await memory.conversations.prepare_round("next", question, user_id="ana")
    await memory.conversations.finish_round("next", [*question, AIMessage("A walk.")], info, user_id="ana")
    assert await memory.drain(timeout=10)
    assert query(database_url, "SELECT recall_path FROM round_metrics WHERE conversation_id = 'next'") == [("date",)]


# The user's time zone, named by the round: at 23:30 UTC on 12 March it is 08:30 on 13 March in Tokyo, so the user's
# "yesterday" is 12 March in Tokyo (the walk, at 19:00 there), not 11 March in UTC (the cake, 14:00 in Tokyo on the
# 11th). Read in the service clock's zone (UTC), every user everywhere had UTC's yesterday.
TOKYO_NOW = datetime(2024, 3, 12, 23, 30, tzinfo=UTC)
WALK = "I took a long walk by the river."
CAKE = "I baked a lemon cake for the neighbours."


async def _walk_and_cake(open_memory, **settings):
    memory = await open_memory(model=OfflineSummaryModel(), clock=lambda: TOKYO_NOW, **settings)
    for thread, at, text in (
        ("walks", datetime(2024, 3, 12, 10, 0, tzinfo=UTC), WALK),
        ("cakes", datetime(2024, 3, 11, 5, 0, tzinfo=UTC), CAKE),
    ):
        await memory.transfers.import_messages(thread, records(at, [text, "Nice."]), user_id="ana", summarize=False)
    return memory


def _first_recalled(context) -> str:
    text = "\n".join(str(m.content) for m in context)
    found = {name: text.find(turn) for name, turn in (("walk", WALK), ("cake", CAKE)) if turn in text}
    return min(found, key=found.__getitem__)


async def test_a_round_reads_yesterday_in_the_time_zone_it_names(open_memory):
    from langchain_core.messages import HumanMessage

    memory = await _walk_and_cake(open_memory)
    question = [HumanMessage("what did I do yesterday?")]
    tokyo, _ = await memory.conversations.prepare_round("q-tokyo", question, user_id="ana", time_zone="Asia/Tokyo")
    assert _first_recalled(tokyo) == "walk"
    assert "12 March 2024]" in "\n".join(str(m.content) for m in tokyo)
    utc, _ = await memory.conversations.prepare_round("q-utc", question, user_id="ana")
    assert _first_recalled(utc) == "cake"  # the service clock's zone when the round names none


async def test_a_graph_run_names_the_time_zone_in_its_config_and_a_bad_one_is_refused(open_memory):
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import START, MessagesState, StateGraph

    from memory_agent import with_memory

    memory = await _walk_and_cake(open_memory)
    seen = []

    def chat(state: MessagesState):
        seen.append(_first_recalled(state["messages"]))
        return {"messages": [AIMessage("noted")]}

    builder = StateGraph(MessagesState).add_node("chat", chat).add_edge(START, "chat")
    with pytest.raises(TypeError, match="compiled graph"):
        with_memory(builder, memory)  # failed only at the first invoke, with StateGraph's AttributeError
    graph = with_memory(builder.compile(), memory)
    config = {"configurable": {"thread_id": "q-graph", "user_id": "ana", "time_zone": "Asia/Tokyo"}}
    await graph.ainvoke({"messages": [HumanMessage("what did I do yesterday?")]}, config)
    assert seen == ["walk"]
    config["configurable"].update(thread_id="q-bad", time_zone="Asia/Tokio")
    with pytest.raises(InvalidInputError, match="time_zone 'Asia/Tokio' is no time zone"):
        await graph.ainvoke({"messages": [HumanMessage("what did I do yesterday?")]}, config)


async def test_the_users_time_zone_setting_and_a_recall_as_of_a_time_in_its_own(open_memory):
    memory = await _walk_and_cake(open_memory, recall_time_zone="Asia/Tokyo")
    assert (await memory.long_term.recall("ana", "what did I do yesterday?")).results[0].conversation_id == "walks"
    # A recall as of a time is read in that time's zone (the caller's), whatever the setting says.
    utc = await memory.long_term.recall("ana", "what did I do yesterday?", as_of=TOKYO_NOW)
    assert utc.results[0].conversation_id == "cakes"
