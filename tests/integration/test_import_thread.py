"""Importing a thread with its own times: stored as rounds store theirs, summarized, recalled under its dates; bad
input names the message and field and writes nothing; an import racing forget_user never outlives it."""

from __future__ import annotations

import asyncio
import json
import operator
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_from_dict

from memory_agent import with_memory
from memory_agent.conversation.imports import TimedMessage, parse_jsonl, summary_points
from memory_agent.errors import ConversationOwnerError, InvalidInputError
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import query
from tests.support import EchoChat

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


class AppendedState(TypedDict):
    """A state whose messages are appended by operator.add: they get no id."""

    messages: Annotated[list[Any], operator.add]


SEPT = datetime(2023, 9, 14, 18, 30, tzinfo=UTC)


def clock() -> datetime:
    return NOW


def records(count: int = 6, start: datetime = SEPT) -> list[dict[str, str]]:
    """user/assistant records a minute apart, the first about a trip to Kyoto."""
    texts = ["We plan a trip to Kyoto for the maple season.", "Kyoto in November, noted."]
    texts += [f"filler message {n}" for n in range(count - 2)]
    return [
        {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": text,
            "created_at": (start + timedelta(minutes=n)).isoformat(),
        }
        for n, text in enumerate(texts)
    ]


def stored(url: str, user: str = "ana") -> list[tuple]:
    return query(
        url,
        "SELECT conversation_id, sequence_number, round_number, role, content, created_at FROM memory_agent.messages"
        " WHERE user_id = %s ORDER BY conversation_id, sequence_number",
        [user],
    )


def counts(url: str) -> list[int]:
    return [
        query(url, f"SELECT count(*) FROM memory_agent.{table}")[0][0]
        for table in ("conversations", "conversation_owners", "messages", "memory")
    ]


async def test_an_imported_turn_keeps_its_date_in_the_recalled_block(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    report = await memory.transfers.import_messages("old-trip", records(), user_id="ana")
    assert (report.messages, report.rounds, report.first_at) == (6, 3, SEPT)
    rows = stored(database_url)
    assert [row[5] for row in rows] == [SEPT + timedelta(minutes=n) for n in range(6)]
    assert [row[2] for row in rows] == [1, 1, 2, 2, 3, 3]
    found = await memory.long_term.recall("ana", "Kyoto trip")
    assert "14 September 2023" in found.block
    assert f"{NOW:%d %B %Y}" not in found.block
    # At a round's start too: the block the model was given dates the imported turn.
    app = with_memory(EchoChat().graph, memory)
    config = {"configurable": {"thread_id": "today", "user_id": "ana"}}
    await app.ainvoke({"messages": [HumanMessage("What about the Kyoto trip?")]}, config)
    block = query(database_url, "SELECT recall_block FROM memory_agent.round_metrics WHERE conversation_id = 'today'")[
        0
    ][0]
    assert "old-trip #0 user, 14 September 2023" in block


async def test_an_import_is_summarized_window_by_window(open_memory, database_url):
    memory = await open_memory(
        model=OfflineSummaryModel(), clock=clock, memory_rolling_window_size=4, memory_summarize_after_seq=3
    )
    report = await memory.transfers.import_messages("long", records(12), user_id="ana")
    versions = await memory.conversations.get_memory_history("long", user_id="ana")
    assert [v.memory_id for v in versions] == list(report.memory_ids)
    assert [(v.status, v.end_sequence) for v in versions] == [("completed", 3), ("completed", 7), ("completed", 11)]
    assert [v.base_memory_id for v in versions] == [None, versions[0].memory_id, versions[1].memory_id]


def test_summary_points_end_rounds_every_window():
    rows = [{"sequence_number": n, "round_number": n // 3 + 1} for n in range(10)]  # rounds of 3 messages
    assert summary_points(rows, 4) == [5, 9]
    assert summary_points(rows, 100) == [9]


async def test_messages_and_pairs_import_as_records_do(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    pairs = [(HumanMessage("hello", id="h1"), SEPT), (AIMessage("hi", id="a1"), SEPT + timedelta(seconds=5))]
    await memory.transfers.import_messages("pairs", pairs, user_id="ana", summarize=False)
    assert [(r[3], r[4], r[5]) for r in stored(database_url)] == [
        ("user", "hello", SEPT),
        ("assistant", "hi", SEPT + timedelta(seconds=5)),
    ]
    # A pair whose message is no LangChain message: named (it was an AttributeError), nothing written.
    for entry in (("hello", SEPT), TimedMessage({"role": "user"}, SEPT)):  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="message 1: a message with its time is a LangChain message"):
            await memory.transfers.import_messages("bad-pair", [pairs[0], entry], user_id="ana")
    assert len(stored(database_url)) == 2


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ('{"role": "user", "content": "x"}', "line 3: field 'created_at' is missing"),
        ('{"role": "robot", "content": "x", "created_at": "2023-09-14T18:40:00Z"}', "line 3: field 'role'"),
        ('{"role": "user", "content": "x", "created_at": "yesterday"}', "line 3: field 'created_at' is 'yesterday'"),
        ('{"role": "user", "content": "x", "created_at": "2023-09-14T18:40:00"}', "line 3: field 'created_at' (2023"),
        ('{"role": "user", "content": 5, "created_at": "2023-09-14T18:40:00Z"}', "line 3: field 'content'"),
        ('{"role": "user", "content": "x", "created_at": "2023-09-14T18:40:00Z", "when": 1}', "unknown field 'when'"),
        # UTC year 0: stored, then every read of the thread (export_user, its pages) failed
        ('{"role": "user", "content": "x", "created_at": "0001-01-01T00:00:00+14:00"}', "is before year 1 in UTC"),
        ("not json", "line 3: not JSON"),
        ("[1]", "line 3: a message must be a JSON object"),
    ],
)
def test_a_bad_line_is_named_with_its_field(line, error):
    good = ['{"role": "user", "content": "a", "created_at": "2023-09-14T18:30:00Z"}'] * 2
    with pytest.raises(InvalidInputError) as raised:
        parse_jsonl([*good, line], "thread.jsonl")
    assert error in str(raised.value)
    assert str(raised.value).startswith("thread.jsonl, line 3")


async def test_bad_input_writes_nothing(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    before = counts(database_url)
    out_of_order = records()
    out_of_order[4]["created_at"] = (SEPT - timedelta(days=1)).isoformat()
    future = records()
    future[5]["created_at"] = (NOW + timedelta(minutes=1)).isoformat()
    no_user = [record for record in records() if record["role"] == "assistant"]
    nul = records()
    nul[3]["content"] = "bad \x00 text"
    cases = [
        (out_of_order, "message 4: field 'created_at'"),
        (future, "message 5: field 'created_at'"),
        (no_user, "needs a user message"),
        (nul, "message 3 (AIMessage) contains a NUL character"),  # not "message 0", its place in a round of one
        ([], "no message"),
    ]
    for messages, error in cases:
        with pytest.raises(InvalidInputError, match=re.escape(error)):
            await memory.transfers.import_messages("bad", messages, user_id="ana")
    assert counts(database_url) == before
    # A thread that has messages is not merged into, and another user's is refused: nothing written either.
    await memory.transfers.import_messages("taken", records(), user_id="bo", summarize=False)
    before = counts(database_url)
    with pytest.raises(ConversationOwnerError):
        await memory.transfers.import_messages("taken", records(), user_id="ana")
    with pytest.raises(InvalidInputError, match="has messages already"):
        await memory.transfers.import_messages("taken", records(4), user_id="bo")
    assert counts(database_url) == before


async def test_a_checkpointer_thread_imports_with_its_checkpoint_times(open_memory, database_url):
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(database_url) as saver:
        await saver.setup()
        app = EchoChat().graph.builder.compile(checkpointer=saver)  # a plain app: no memory yet
        config = {"configurable": {"thread_id": "lg-1"}}
        await app.ainvoke({"messages": [HumanMessage("We plan a trip to Kyoto.")]}, config)
        await asyncio.sleep(0.05)
        await app.ainvoke({"messages": [HumanMessage("And to Osaka after.")]}, config)
        checkpoints = [c async for c in saver.alist(config)]
        memory = await open_memory(model=OfflineSummaryModel())
        report = await memory.transfers.import_thread(saver, "lg-1", user_id="ana")
        with pytest.raises(InvalidInputError, match="no checkpoint of thread 'missing'"):
            await memory.transfers.import_thread(saver, "missing", user_id="ana")
    rows = stored(database_url)
    assert [(r[0], r[3], r[4]) for r in rows] == [
        ("lg-1", "user", "We plan a trip to Kyoto."),
        ("lg-1", "assistant", "reply 1"),
        ("lg-1", "user", "And to Osaka after."),
        ("lg-1", "assistant", "reply 2"),
    ]
    times = sorted(datetime.fromisoformat(c.checkpoint["ts"]) for c in checkpoints)
    assert {r[5] for r in rows} <= set(times)
    assert rows[0][5] < rows[2][5]  # the second round's messages are dated by its own checkpoints
    assert report.rounds == 2
    # A sync checkpointer reads the same thread the same way.
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(database_url) as sync_saver:
        await memory.transfers.import_thread(
            sync_saver, "lg-1", conversation_id="lg-1-again", user_id="bo", summarize=False
        )
    again = stored(database_url, user="bo")
    assert [(r[3], r[4], r[5]) for r in again] == [(r[3], r[4], r[5]) for r in rows]


async def test_an_import_racing_forget_user_never_outlives_it(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    for attempt in range(6):
        await memory.transfers.import_messages(f"kept-{attempt}", records(), user_id="ana", summarize=False)
        imported, _ = await asyncio.gather(
            # Summarized every other time: a summary claimed after the forget finds the conversation gone.
            memory.transfers.import_messages(f"new-{attempt}", records(40), user_id="ana", summarize=attempt % 2 == 0),
            memory.long_term.forget_user("ana"),
        )
        threads = {row[0] for row in stored(database_url)}
        # Either the import committed first and the forget erased it with the rest, or it waited for the forget
        # and is all that is left: whole, never a part, and nothing of what the forget erased.
        assert threads in (set(), {f"new-{attempt}"})
        if threads:
            assert len(stored(database_url)) == imported.messages == 40
            await memory.long_term.forget_user("ana")


async def test_an_agent_thread_the_summarization_middleware_trimmed_imports_whole(open_memory, database_url):
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import RemoveMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.integration.agent_support import ToolScriptModel, assert_tool_pairs, lookup

    saver = InMemorySaver()
    # Past 8 messages the middleware replaces all but the last 3 with one HumanMessage of its own (a summary).
    trim = SummarizationMiddleware(model=ToolScriptModel(), trigger=("messages", 8), keep=("messages", 3))
    agent = create_agent(ToolScriptModel(), tools=[lookup], checkpointer=saver, middleware=[trim])
    config = {"configurable": {"thread_id": "agent-1"}}
    said = ["Plan Kyoto tools:2:seq", "And Osaka?", "Book a hotel tools:1:par", "Thanks", "Bye tools:1:seq", "Later"]
    for text in said:
        await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
    state = (await agent.aget_state(config)).values["messages"]
    summaries = {
        m.id
        for c in saver.list(config)
        for m in c.checkpoint["channel_values"].get("messages", [])
        if m.additional_kwargs.get("lc_source") == "summarization"
    }
    assert len(summaries) >= 2  # it trimmed more than once: a later summary replaced an earlier one
    # A message the app deleted (RemoveMessage of its id) is not history: it stays out of the import.
    deleted = next(m for m in state if isinstance(m, AIMessage) and m.content and not m.tool_calls)
    await agent.aupdate_state(config, {"messages": [RemoveMessage(id=deleted.id)]})
    memory = await open_memory(model=OfflineSummaryModel())
    report = await memory.transfers.import_thread(saver, "agent-1", user_id="ana", summarize=False)
    rows = stored(database_url)
    assert [r[4] for r in rows if r[3] == "user"] == said  # the user's words, not the middleware's summary
    assert not any("Here is a summary" in r[4] for r in rows)
    ids = [row[0]["data"]["id"] for row in query(database_url, "SELECT message FROM memory_agent.messages")]
    assert deleted.id not in ids and len(ids) == len(set(ids))
    assert [r[5] for r in rows] == sorted(r[5] for r in rows)
    assert report.rounds == len(said)
    payloads = query(database_url, "SELECT message FROM memory_agent.messages ORDER BY sequence_number")
    assert_tool_pairs(messages_from_dict([row[0] for row in payloads]))  # every call with its result, in order


def at(minute: int) -> str:
    return (SEPT + timedelta(minutes=minute)).isoformat()


async def test_a_tool_message_answers_a_call_of_the_assistant_before_it(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    call = {"id": "c1", "name": "weather", "args": {"city": "Kyoto"}, "type": "tool_call"}  # as AIMessage.tool_calls
    lines = [
        {"role": "user", "content": "Weather in Kyoto?", "created_at": at(0)},
        {"role": "assistant", "content": "", "tool_calls": [call], "created_at": at(1)},
        {"role": "tool", "content": "rainy", "tool_call_id": "c1", "name": "weather", "created_at": at(2)},
        {"role": "assistant", "content": "Rainy.", "created_at": at(3)},
    ]
    text = "\n".join(json.dumps(line) for line in lines)
    await memory.transfers.import_messages("tools", parse_jsonl(text.split("\n"), "t.jsonl"), user_id="ana")
    # A later round gives the model the call before its result: a provider refuses a tool result that answers none.
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    await app.ainvoke(
        {"messages": [HumanMessage("And Osaka?")]}, {"configurable": {"thread_id": "tools", "user_id": "ana"}}
    )
    seen = [m for m in chat.seen[-1] if isinstance(m, (AIMessage, ToolMessage))]
    assert [(type(m).__name__, m.content) for m in seen[:2]] == [("AIMessage", ""), ("ToolMessage", "rainy")]
    assert seen[0].tool_calls[0]["id"] == "c1"

    before = counts(database_url)
    orphan = [lines[0], {**lines[1], "content": "Looking.", "tool_calls": None}, *lines[2:]]
    with pytest.raises(InvalidInputError, match="message 2: field 'tool_call_id' \\('c1'\\) answers no tool call"):
        await memory.transfers.import_messages("orphan", orphan, user_id="ana")
    for bad, error in (
        ({**lines[1], "tool_calls": [{"name": "weather"}]}, "tool_calls"),
        ({**lines[1], "tool_calls": "c1"}, "tool_calls"),
        ({**lines[0], "tool_calls": [call]}, "tool_calls' belongs to an assistant message"),
    ):
        with pytest.raises(InvalidInputError, match=error):
            parse_jsonl([json.dumps(bad)], "t.jsonl")
    assert counts(database_url) == before


async def test_two_messages_with_one_id_are_refused(open_memory, database_url):
    # A graph's state holds one message an id (add_messages replaces by id): imported twice, a later round gave
    # the model the second only, the first lost without a word.
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    before = counts(database_url)
    twice = records(4)
    twice[0]["id"], twice[3]["id"] = "m-1", "m-1"
    with pytest.raises(InvalidInputError, match="message 3: field 'id' \\('m-1'\\) is message 0's too"):
        await memory.transfers.import_messages("twice", twice, user_id="ana")
    assert counts(database_url) == before


async def test_messages_without_ids_are_dated_by_the_checkpoint_that_added_them(open_memory, database_url):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph

    def respond(state: AppendedState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"reply {len(state['messages'])}")]}

    builder = StateGraph(AppendedState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    saver = InMemorySaver()
    app = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "appended"}}
    for text in ("one", "two", "three"):
        await app.ainvoke({"messages": [HumanMessage(text)]}, config)
    first = {}  # each round's user message, and the time of the first checkpoint that holds it
    for checkpoint in sorted(saver.list(config), key=lambda c: c.checkpoint["ts"]):
        for message in checkpoint.checkpoint["channel_values"].get("messages", []):
            first.setdefault(message.content, datetime.fromisoformat(checkpoint.checkpoint["ts"]))
    memory = await open_memory(model=OfflineSummaryModel())
    await memory.transfers.import_thread(saver, "appended", user_id="ana", summarize=False)
    rows = stored(database_url)
    assert [(r[3], r[4]) for r in rows][::2] == [("user", "one"), ("user", "two"), ("user", "three")]
    # Each dated by its own round, not all by the last checkpoint.
    assert [r[5] for r in rows[::2]] == [first["one"], first["two"], first["three"]]
    assert rows[0][5] < rows[2][5] < rows[4][5]


async def test_a_summary_whose_earlier_checkpoints_are_gone_is_kept(open_memory, database_url):
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.integration.agent_support import ToolScriptModel

    saver = InMemorySaver()
    trim = SummarizationMiddleware(model=ToolScriptModel(), trigger=("messages", 4), keep=("messages", 2))
    agent = create_agent(ToolScriptModel(), tools=[], checkpointer=saver, middleware=[trim])
    config = {"configurable": {"thread_id": "pruned"}}
    for text in ("one", "two", "three"):
        await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
    # A checkpointer that kept the latest checkpoint only: the summary is all the thread holds of its start.
    checkpoints = saver.storage["pruned"][""]
    for older in sorted(checkpoints)[:-1]:
        del checkpoints[older]
    memory = await open_memory(model=OfflineSummaryModel())
    await memory.transfers.import_thread(saver, "pruned", user_id="ana", summarize=False)
    assert any(r[4].startswith("Here is a summary of the conversation to date") for r in stored(database_url))


@pytest.mark.parametrize("summarize", [False, True])
async def test_imported_turns_get_their_vectors_whether_or_not_a_summary_follows(open_memory, database_url, summarize):
    # A round's turns are embedded by its background work when no summary starts; an import without a summary
    # (--no-summarize, or one the trigger rule does not find due) left its turns to the periodic catch-up, and
    # recall could not find them by meaning until then.
    from memory_agent.long_term.embedders import HashingEmbeddings

    memory = await open_memory(
        model=OfflineSummaryModel(),
        clock=clock,
        embedder=HashingEmbeddings(),
        memory_summarize_after_seq=50,
        memory_rolling_window_size=52,
    )
    await memory.transfers.import_messages("old-trip", records(), user_id="ana", summarize=summarize)
    assert await memory.drain(timeout=10)
    assert query(database_url, "SELECT count(*) FROM memory_agent.memory") == [(0,)]  # no summary was due
    vectors = "SELECT sequence_number FROM memory_agent.message_embeddings ORDER BY sequence_number"
    assert query(database_url, vectors) == [(n,) for n in range(6)]


async def test_the_same_thread_imported_twice_at_once_is_stored_once_and_the_other_told_it_has_messages(
    open_memory, database_url
):
    # The import that lost the race for the thread's owner row read it in its statement's snapshot, taken before
    # the winner committed: no owner, and it raised ConversationOwnerError ("belongs to another user or tenant")
    # for the user's own thread.
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    imports = [
        memory.transfers.import_messages("twice", records(200), user_id="ana", summarize=False) for _ in range(3)
    ]
    outcomes = await asyncio.gather(*imports, return_exceptions=True)
    errors = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    assert len(errors) == 2, outcomes
    for error in errors:
        assert type(error) is InvalidInputError and "has messages already" in str(error), error
    assert len(stored(database_url)) == 200
