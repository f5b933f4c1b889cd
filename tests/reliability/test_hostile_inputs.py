"""Hostile input: a clear error that names the problem and leaves the database as it was, or correct storage."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from memory_agent import InvalidInputError, with_memory
from tests.conftest import query
from tests.support import EchoChat

ODD_BUT_VALID_THREAD_IDS = [
    "it's",
    'say "hi"',
    "a; DROP TABLE messages; --",
    "'); DELETE FROM memory; --",
    "ünïcödé 会話 🎉",
    "x" * 1024,
    "../../etc/passwd",
    "%s %(name)s {0} $1",
    "back\\slash",
    "line\nbreak\ttab",
    "  padded  ",
    "null",
]

BAD_THREAD_IDS = [
    ("", "empty"),
    ("   ", "blank"),
    ("nul\x00byte", "NUL"),
    ("x" * 1025, "at most 1024 bytes"),
    ("会" * 1024, "3072 bytes"),  # 1,024 characters, but 3,072 bytes: no retry would ever store it
    ("lone \ud800 surrogate", "lone surrogate"),
    (123, "got int"),
    (None, "got NoneType"),
    (["conv"], "got list"),
    (b"bytes", "got bytes"),
]

ODD_BUT_VALID_CONTENT = [
    "x" * (1024 * 1024),  # 1 MB
    "'); DROP TABLE memory; --",
    "emoji 🎉 and RTL \u202e text",
    'json-looking {"a": [1, 2]}',
    "%(conversation_id)s %s",
    "\\x00 written as text, not a NUL",
    "\\u0000 written as text, not a NUL",
]


def counts(url: str) -> tuple[int, int, int]:
    return query(
        url,
        "SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages), (SELECT count(*) FROM memory)",
    )[0]


@pytest.fixture
async def app(open_memory):
    memory = await open_memory()
    return with_memory(EchoChat().graph, memory), memory


@pytest.mark.parametrize("thread_id", ODD_BUT_VALID_THREAD_IDS)
async def test_odd_thread_ids_are_stored_exactly(app, database_url, thread_id):
    graph, memory = app
    await graph.ainvoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": thread_id}})
    assert query(database_url, "SELECT conversation_id FROM conversations") == [(thread_id,)]
    context = await memory.conversations.get_context_for_workflow(thread_id)
    assert [m.text for m in context.gap_messages] == ["hello", "reply 1"]


@pytest.mark.parametrize(("thread_id", "named"), BAD_THREAD_IDS)
async def test_bad_thread_ids_are_refused_with_a_clear_error(app, database_url, thread_id, named):
    graph, _ = app
    before = counts(database_url)
    with pytest.raises(InvalidInputError, match="thread_id") as raised:
        await graph.ainvoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": thread_id}})
    assert named in str(raised.value)
    assert counts(database_url) == before


async def test_missing_thread_id_names_the_config_key(app, database_url):
    graph, _ = app
    with pytest.raises(InvalidInputError, match=r"configurable.*thread_id"):
        await graph.ainvoke({"messages": [HumanMessage("hello")]}, {})
    assert counts(database_url) == (0, 0, 0)


@pytest.mark.parametrize("content", ODD_BUT_VALID_CONTENT, ids=lambda c: c[:20])
async def test_odd_content_round_trips(app, database_url, content):
    graph, memory = app
    await graph.ainvoke({"messages": [HumanMessage(content)]}, {"configurable": {"thread_id": "content"}})
    context = await memory.conversations.get_context_for_workflow("content")
    assert context.gap_messages[0].content == content
    assert query(database_url, "SELECT content FROM messages WHERE sequence_number = 0") == [(content,)]


def _int_content() -> HumanMessage:
    return HumanMessage.model_construct(content=5, additional_kwargs={}, response_metadata={}, type="human")


BAD_ROUNDS = [
    ([HumanMessage("")], "empty"),
    ([HumanMessage("   \n")], "empty"),
    ([HumanMessage("nul \x00 inside")], "NUL"),
    ([HumanMessage("ok", additional_kwargs={"meta": "nul\x00"})], "NUL"),
    ([_int_content()], "content of type int"),
    ([AIMessage("no user here")], "needs a user message"),
    ([SystemMessage("only a system prompt")], "needs a user message"),
    ([ToolMessage("orphan", tool_call_id="x")], "needs a user message"),
    ([HumanMessage("lone \ud800 surrogate")], "lone surrogate"),
    ([HumanMessage("long id", id="i" * 600)], "id over 512 bytes"),
    ([], "needs a user message"),
]


@pytest.mark.parametrize(("messages", "named"), BAD_ROUNDS)
async def test_bad_rounds_are_refused_and_nothing_is_written(app, database_url, messages, named):
    graph, memory = app
    before = counts(database_url)
    with pytest.raises(InvalidInputError, match=named):
        await graph.ainvoke({"messages": messages}, {"configurable": {"thread_id": "bad"}})
    with pytest.raises(InvalidInputError, match=named):
        await memory.conversations.finish_round("bad", messages)
    assert counts(database_url) == before


@pytest.mark.parametrize(
    ("messages", "named"),
    [
        (["just a string"], "not a LangChain message"),
        ([{"role": "user", "content": "a dict"}], "not a LangChain message"),
        ([42], "not a LangChain message"),
        ([HumanMessage("fine"), None], "not a LangChain message"),
        ("a whole string", "list of messages"),
    ],
)
async def test_wrong_types_at_the_service_api(app, database_url, messages, named):
    _, memory = app
    with pytest.raises(InvalidInputError, match=named):
        await memory.conversations.prepare_round("types", messages)
    if isinstance(messages, list):
        with pytest.raises(InvalidInputError, match=named):
            await memory.conversations.finish_round("types", messages)
    assert counts(database_url) == (0, 0, 0)


async def test_a_bad_message_in_the_middle_of_a_round_writes_nothing(app, database_url):
    _, memory = app
    await memory.conversations.finish_round("mid", [HumanMessage("first"), AIMessage("ok")])
    before = counts(database_url)
    with pytest.raises(InvalidInputError, match="message 2"):
        await memory.conversations.finish_round(
            "mid", [HumanMessage("second"), AIMessage("fine"), AIMessage("bad \x00")]
        )
    assert counts(database_url) == before


async def test_graph_input_coerced_by_langgraph_is_stored_as_messages(app, database_url):
    graph, memory = app
    # LangGraph's add_messages turns role dicts and strings into messages before our node sees them.
    await graph.ainvoke(
        {"messages": [{"role": "user", "content": "from a dict"}]}, {"configurable": {"thread_id": "d"}}
    )
    await graph.ainvoke({"messages": "from a string"}, {"configurable": {"thread_id": "d"}})
    assert query(database_url, "SELECT role, content FROM messages ORDER BY sequence_number") == [
        ("user", "from a dict"),
        ("assistant", "reply 1"),
        ("user", "from a string"),
        ("assistant", "reply 2"),
    ]
