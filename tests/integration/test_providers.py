"""Models by name, any provider, end to end over HTTP: the setting picks the LangChain integration, and structured
output degrades (tool calling, the provider's JSON-schema format, JSON in text) instead of failing."""

from __future__ import annotations

import json
import logging

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import MemoryService, MemorySettings, with_memory
from memory_agent.consolidation.model import ConsolidationOutput, call_consolidation_model
from memory_agent.errors import ConfigurationError, SummarizationError
from memory_agent.llm import chat_model_from_setting, default_chat_model
from memory_agent.llm.models import chat_model
from memory_agent.llm.structured import MISSES_TO_FORGET, StructuredCaller, learned_method
from memory_agent.observability import reads as observability
from memory_agent.schemas import MemorySummaryOutput
from memory_agent.summarize.agent import SUMMARY_TOOL, parse_summary
from tests.conftest import query
from tests.provider_servers import FakeAnthropic, FakeOllama
from tests.support import EchoChat


async def talk(memory: MemoryService, thread: str, rounds: int = 4) -> None:
    app = with_memory(EchoChat().graph, memory)
    for n in range(1, rounds + 1):
        await app.ainvoke(
            {"messages": [HumanMessage(f"I like tea number {n}")]}, {"configurable": {"thread_id": thread}}
        )
    assert await memory.drain(timeout=20)


def rows(url: str) -> list[tuple]:
    return query(url, "SELECT status, model_name, memory_text, error FROM memory ORDER BY memory_id")


def test_the_setting_picks_the_integration(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    made = {name: chat_model_from_setting(name, variable="X") for name in ("gpt-x", "llama3.1:8b")}
    made["anthropic:claude-x"] = chat_model_from_setting("anthropic:claude-x", variable="X")
    made["ollama:llama3.1:8b"] = chat_model_from_setting("ollama:llama3.1:8b", variable="X")
    found = {
        name: (type(model).__name__, getattr(model, "model_name", None) or model.model) for name, model in made.items()
    }
    assert found == {
        "gpt-x": ("ChatOpenAI", "gpt-x"),
        "llama3.1:8b": ("ChatOpenAI", "llama3.1:8b"),  # a bare name is OpenAI's, whatever its colon
        "anthropic:claude-x": ("ChatAnthropic", "claude-x"),
        "ollama:llama3.1:8b": ("ChatOllama", "llama3.1:8b"),
    }


def test_unusable_settings_say_what_to_set_or_install(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("GROQ_API_KEY", "k")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY") as raised:
        chat_model_from_setting("anthropic:claude-x", variable="MEMORY_AGENT_MEMORY_MODEL")
    assert "MEMORY_AGENT_MEMORY_MODEL='anthropic:claude-x'" in str(raised.value)
    with pytest.raises(ConfigurationError, match="pip install langchain-groq"):
        chat_model_from_setting("groq:llama-x", variable="MEMORY_AGENT_MEMORY_MODEL")
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    # A provider LangChain does not know: said so, not only that OpenAI's variables are missing.
    with pytest.raises(ConfigurationError, match="'nosuchprovider' is no provider LangChain knows"):
        chat_model_from_setting("nosuchprovider:x", variable="MEMORY_AGENT_MEMORY_MODEL")


def test_the_consolidation_setting_is_named_in_its_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings = MemorySettings(memory_model="offline", consolidation_model="anthropic:claude-x")
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_CONSOLIDATION_MODEL='anthropic:claude-x'"):
        default_chat_model(settings, "consolidation")
    assert default_chat_model(settings.replace(consolidation_model=None), "consolidation")


def test_a_summary_model_passed_with_client_retries_is_warned_about(monkeypatch, caplog):
    """Its client sleeps what a rate-limited provider asks inside a summary's attempt (ChatAnthropic's without a
    bound), the row `processing` meanwhile: said at open, with what to pass."""
    from langchain_anthropic import ChatAnthropic

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    caplog.set_level(logging.WARNING, "memory_agent")
    settings = MemorySettings(memory_model="offline")
    for retries in (2, 0):
        chat_model(ChatAnthropic(model="claude-x", max_retries=retries), settings)
    (warned,) = [r.getMessage() for r in caplog.records]
    assert "'claude-x'" in warned and "max_retries=2" in warned and "pass max_retries=0" in warned


async def test_no_usable_model_is_an_error_at_open(monkeypatch, database_url):
    """No model set up and none named: opening fails, naming the setting (it used the offline model quietly)."""
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMORY_AGENT_MEMORY_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    service = MemoryService(MemorySettings(database_url=database_url))
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_MEMORY_MODEL") as raised:
        await service.aopen()
    assert "OPENAI_API_KEY" in str(raised.value)
    with pytest.raises(RuntimeError, match="not open"):
        service.backend  # noqa: B018


async def test_a_string_model_is_a_setting(fake_openai, open_memory, database_url):
    memory = await open_memory(model="openai:gpt-by-name")
    await talk(memory, "by-name")
    # One summary, or two when the first finished before a later round ended (a fast machine): each by that model.
    assert {(s, m) for s, m, _, _ in rows(database_url)} == {("completed", "gpt-by-name")}


async def test_openai_compatible_server_without_tools_degrades_and_remembers(fake_openai, open_memory, database_url):
    """HTTP 400 to `tools` (a local server): the JSON-schema response format is used, and remembered; 6 of 6
    summaries of such a server failed before."""
    fake_openai.refuse_tools = True
    memory = await open_memory(memory_model="local-model")
    await talk(memory, "no-tools", rounds=8)
    stored = rows(database_url)
    assert stored and all(status == "completed" for status, _, _, _ in stored)
    # The model's answer is what was stored (which rounds the last summary reached depends on when it ran).
    assert "I like tea number" in stored[-1][2]
    asked = [
        ("tools" if r.get("tools") else "response_format" if r.get("response_format") else "text")
        for r in fake_openai.requests
        if r.get("tools") or r.get("response_format")
    ]
    assert asked[:2] == ["tools", "response_format"] and set(asked[2:]) == {"response_format"}
    assert learned_method(memory.agent.model) == "json_schema"


async def test_the_summary_schema_sent_is_terse_and_validation_stays_whole(fake_openai, open_memory, database_url):
    """The schema goes with every summary call (billed input): types and bounds only, the fields explained once
    in the system prompt. What comes back is still validated against the full model."""
    memory = await open_memory(memory_model="terse-model")
    await talk(memory, "terse", rounds=3)
    first = fake_openai.structured_requests()[0]
    (tool,) = first["tools"]
    assert tool == SUMMARY_TOOL and len(json.dumps(tool)) < 1000  # the documented schema was ~4,900 characters
    assert "description" not in json.dumps(tool["function"]["parameters"])
    assert "source_sequences" in first["messages"][0]["content"]  # explained in the system prompt instead
    fake_openai.refuse_tools = True
    fake_openai.summary_text = None
    caller = StructuredCaller(chat_model_from_setting("terse-format", variable="X"), MemorySummaryOutput, tool=tool)
    await caller.ainvoke([HumanMessage("Window: sequences 0-0.\n[seq 0] user: hi")])
    sent = fake_openai.requests[-1]["response_format"]["json_schema"]
    assert sent["name"] == "MemorySummaryOutput" and "description" not in json.dumps(sent["schema"])
    parsed = parse_summary({"summary": "s", "facts": [{"key": "k", "content": "c", "importance": 7}]})
    assert parsed.items.facts == [] and "importance" in parsed.invalid[0]  # bounds checked on our side


async def test_json_in_text_when_the_server_refuses_both(fake_openai, open_memory, database_url):
    fake_openai.refuse_tools = fake_openai.refuse_response_format = True
    memory = await open_memory(memory_model="plain-model")
    await talk(memory, "plain")
    (status, _, text, error), *_ = rows(database_url)
    assert (status, error) == ("completed", None) and "I like tea number" in text
    assert learned_method(memory.agent.model) == "text"


async def test_garbage_is_a_failed_row_with_its_cause(fake_openai, open_memory, database_url):
    fake_openai.refuse_tools = fake_openai.refuse_response_format = True
    fake_openai.text_answer = "Sure! Here are my thoughts: tea is nice."
    memory = await open_memory(memory_model="chatty-model", summary_max_attempts=1)
    await talk(memory, "garbage")
    statuses = {status for status, _, _, _ in rows(database_url)}
    assert statuses == {"failed"}
    error = rows(database_url)[0][3]
    assert "unparseable output" in error and "tea is nice" in error
    assert "tools (refused earlier): OpenAIInvalidRequestError: Error code: 400" in error and "json_schema " in error
    # The refused ways are asked once per model: the retry (with the problems shown) asks for text only.
    asked = [
        "tools" if r.get("tools") else "format" if r.get("response_format") else "text" for r in fake_openai.requests
    ]
    assert asked == ["tools", "format", "text", "text"]


async def test_a_model_answering_garbage_every_way_is_asked_one_way_after(fake_openai):
    """Every method answered without an object: later calls ask by the first alone (18 model calls a failed
    summary before, 3 ways x a try and its retry x 3 attempts), until a method works."""
    fake_openai.mode, fake_openai.text_answer = "malformed", "no idea"
    model = chat_model_from_setting("garbage-every-way", variable="X")
    caller = StructuredCaller(model, MemorySummaryOutput, tool=SUMMARY_TOOL)  # as the summary agent asks
    prompt = [HumanMessage("Window: sequences 0-0.\n[seq 0] user: hi")]
    for _ in range(2):
        with pytest.raises(SummarizationError, match="unparseable output"):
            await caller.ainvoke(prompt)
    asked = [
        "tools" if r.get("tools") else "format" if r.get("response_format") else "text" for r in fake_openai.requests
    ]
    assert asked == ["tools", "format", "text", "tools"]
    fake_openai.mode, fake_openai.text_answer = "ok", None
    assert (await caller.ainvoke(prompt)).method == "tools" and learned_method(caller.model) == "tools"


async def test_anthropic_messages_api(monkeypatch, open_memory, database_url):
    with FakeAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        memory = await open_memory(memory_model="anthropic:claude-test")
        assert type(memory.agent.model).__name__ == "ChatAnthropic"
        await talk(memory, "anthropic")
        (status, model, text, error), *_ = rows(database_url)
        assert (status, model, error) == ("completed", "claude-test", None) and "I like tea number" in text
        assert server.requests[0]["tools"][0]["name"] == "MemorySummaryOutput"
        schema = server.requests[0]["tools"][0]["input_schema"]  # terse there too (its item shape defined once)
        assert "description" not in json.dumps(schema) and schema["$defs"]["SummaryItem"]["required"] == [
            "key",
            "content",
        ]


async def test_an_answer_not_of_the_api_shape_is_named_on_the_row_and_in_the_log(
    monkeypatch, open_memory, database_url, caplog
):
    """HTTP 200 with a Messages API answer of the wrong shape (`content` not a list of blocks, missing, a tool call's
    `input` a string): the failed row and the WARNING name the model, that its answer was not of the expected
    shape, and what was wrong (before: `TypeError: string indices must be integers`, from inside the client)."""
    answer = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use"}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "MemorySummaryOutput", "input": '{"summary": "tea"}'}
    shapes = {
        "text": ({**answer, "content": "I like tea"}, "TypeError: string indices must be integers"),
        "none": ({**answer, "content": None}, "TypeError: 'NoneType' object is not iterable"),
        "input": ({**answer, "content": [tool_use]}, "tool_calls.0.args: Input should be a valid dictionary"),
    }
    caplog.set_level(logging.WARNING, "memory_agent")
    with FakeAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        memory = await open_memory(memory_model="anthropic:claude-test", summary_max_attempts=1)
        for thread, (body, wrong) in shapes.items():
            server.answer_with = body
            await talk(memory, thread)
            errors = query(database_url, "SELECT error FROM memory WHERE conversation_id = %s", (thread,))
            assert errors and all(error for (error,) in errors)
            said = "its answer was not of the expected shape (ChatAnthropic could not read it: "
            warned = [r.getMessage() for r in caplog.records if f"conversation {thread!r}" in r.getMessage()]
            for text in (errors[0][0], *warned):
                assert "'claude-test'" in text and said in text and wrong in text, text
            assert len(warned) == 1 and 'raw: \'{"id": "msg_1"' in warned[0]


async def test_an_ollama_answer_not_of_the_api_shape_is_garbage_too(monkeypatch):
    """A tool call whose arguments are a string, in Ollama's stream: each way of asking is passed over as answering
    garbage, the client's words kept (before: pydantic's ValidationError for ChatResponse, raised as it was)."""
    message = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "x", "arguments": "oops"}}]}
    with FakeOllama() as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        server.answer_with = [{"model": "m", "created_at": "2026-01-01T00:00:00Z", "message": message, "done": True}]
        model = chat_model_from_setting("ollama:llama-test", variable="X")
        caller = StructuredCaller(model, MemorySummaryOutput, tool=SUMMARY_TOOL)
        with pytest.raises(SummarizationError) as raised:
            await caller.ainvoke([HumanMessage("Window: sequences 0-0.\n[seq 0] user: hi")])
    said = str(raised.value)
    assert said.startswith("model 'llama-test' returned unparseable output") and len(server.requests) == 3
    assert said.count("its answer was not of the expected shape (ChatOllama could not read it: ") == 3
    assert "message.tool_calls.0.function.arguments: Input should be a valid dictionary" in said


async def test_an_empty_ollama_answer_is_garbage_too(monkeypatch):
    """Ollama answering HTTP 200 with an empty body: each way of asking is passed over as answering garbage (before:
    langchain-ollama's ValueError "No data received from Ollama stream." was raised at the first, as a bug)."""
    with FakeOllama() as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        server.answer_with = []  # no line at all
        caller = StructuredCaller(chat_model_from_setting("ollama:llama-test", variable="X"), MemorySummaryOutput)
        with pytest.raises(SummarizationError) as raised:
            await caller.ainvoke([HumanMessage("Window: sequences 0-0.\n[seq 0] user: hi")])
    said = str(raised.value)
    assert said.startswith("model 'llama-test' returned unparseable output") and len(server.requests) == 3
    assert said.count("(ChatOllama could not read it: ValueError: No data received from Ollama stream.)") == 3


@pytest.mark.parametrize("tools", [True, False])
async def test_ollama_chat_api(monkeypatch, open_memory, database_url, tools):
    with FakeOllama() as server:
        server.refuse_tools = not tools
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        memory = await open_memory(memory_model="ollama:llama-test:8b")
        await talk(memory, "ollama")
        (status, model, text, error), *_ = rows(database_url)
        assert (status, model, error) == ("completed", "llama-test:8b", None) and "I like tea number" in text
        summary_requests = [r for r in server.requests if r.get("tools") or r.get("format")]
        assert ("format" in summary_requests[-1]) == (not tools)


async def test_consolidation_degrades_too(fake_openai):
    fake_openai.refuse_tools = True
    fake_openai.summary_text = "- fact city: Lisbon"
    model = chat_model_from_setting("consolidator", variable="X")
    parsed, call = await call_consolidation_model(model, "Consolidate.", "- fact city: Lisbon", ConsolidationOutput)
    assert parsed.summary == "- fact city: Lisbon" and call.model == "consolidator"
    assert [bool(r.get("tools")) for r in fake_openai.requests] == [True, False]


async def test_a_consolidation_failure_names_its_kind_and_http_status(fake_openai):
    """As a summary row does (before: `failed: Error code: 500 - upstream exploded`, the kind and status left out,
    and a connection failure only `Connection error.`)."""
    fake_openai.mode = "error"
    model = chat_model_from_setting("consolidator", variable="X", role="consolidation", max_retries=0)
    with pytest.raises(SummarizationError) as raised:
        await call_consolidation_model(model, "Consolidate.", "- a", ConsolidationOutput)
    assert str(raised.value) == (
        "consolidation model 'consolidator' failed: OpenAIAPIError (HTTP 500): Error code: 500 - upstream exploded"
    )


async def test_a_failing_conversation_is_warned_about_once_and_backs_off(
    fake_openai, open_memory, database_url, caplog
):
    """Every summary fails (HTTP 500): one WARNING naming the conversation, the model and the status; after two
    failures the model is no longer asked every round (before: a line per failure, no model named, a call each)."""
    fake_openai.mode = "error"
    caplog.set_level(logging.WARNING, "memory_agent")
    memory = await open_memory(memory_model="flaky-model", summary_max_attempts=1)
    await talk(memory, "failing", rounds=10)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "'failing'" in r.getMessage()]
    assert len(warned) == 1
    assert "'flaky-model'" in warned[0] and "HTTP 500" in warned[0] and "upstream exploded" in warned[0]
    stored = rows(database_url)
    assert len(stored) >= 4 and {status for status, _, _, _ in stored} == {"failed"}
    assert len(fake_openai.structured_requests()) == 2
    assert all("not attempted" in error and "HTTP 500" in error for _, _, _, error in stored[2:])
    # Where it shows: the last hour's failure rate and summary lag (health(): `stats`, /ready; the view for psql).
    recent = (await observability.health(memory.backend, now=memory.clock())).last_hour
    assert (recent["completed"], recent["failed"], recent["failure_rate"]) == (0, len(stored), 1)
    assert recent["rounds"] == 10 and recent["max_summary_lag"] == 18
    assert query(database_url, "SELECT failed, max_summary_lag FROM memory_health_last_hour") == [(len(stored), 18)]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OPENAI_API_KEY", "sk-proj-0123456789\r"),
        ("OPENAI_API_KEY", " "),
        ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1\n"),
        ("ANTHROPIC_API_URL", "https://gateway.example/anthropic\r"),  # read before ANTHROPIC_BASE_URL
    ],
)
def test_a_provider_variable_its_client_cannot_send_is_refused_at_open(monkeypatch, variable, value):
    """A key with a carriage return from an env file (or only a space) cannot go in a header: refused when the
    model is made, naming the variable, not its value (before: every summary failed as `Connection error.`, as if
    the network were away, and was retried as such)."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fine")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fine")
    monkeypatch.setenv(variable, value)
    setting = "anthropic:x" if variable.startswith("ANTHROPIC") else "openai:x"
    with pytest.raises(ConfigurationError, match=f"MEMORY_AGENT_MEMORY_MODEL='{setting}': {variable} holds") as raised:
        chat_model_from_setting(setting, variable="MEMORY_AGENT_MEMORY_MODEL")
    assert not value.strip() or value.strip() not in str(raised.value)


def test_another_providers_model_as_a_bare_name_is_flagged(monkeypatch, caplog):
    """`claude-sonnet-4-5` without `anthropic:` is OpenAI's model by the rule, which OpenAI does not serve: said at
    once, with the value to write (before: nothing, then HTTP 404 on every summary, in the background). Behind
    OPENAI_BASE_URL (a gateway may serve it) it is not flagged."""
    caplog.set_level(logging.WARNING, "memory_agent")
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    with pytest.raises(ConfigurationError, match="for anthropic's model write `anthropic:claude-sonnet-4-5`"):
        chat_model_from_setting("claude-sonnet-4-5", variable="MEMORY_AGENT_MEMORY_MODEL")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert chat_model_from_setting("claude-sonnet-4-5", variable="MEMORY_AGENT_MEMORY_MODEL")
    assert [r.getMessage() for r in caplog.records] == [
        "MEMORY_AGENT_MEMORY_MODEL='claude-sonnet-4-5' is a bare name, sent to the OpenAI API as the model "
        "'claude-sonnet-4-5', which it does not serve; for anthropic's model write `anthropic:claude-sonnet-4-5`"
    ]
    caplog.clear()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    chat_model_from_setting("claude-sonnet-4-5", variable="MEMORY_AGENT_MEMORY_MODEL")
    chat_model_from_setting("gpt-4.1-mini", variable="MEMORY_AGENT_MEMORY_MODEL")
    assert caplog.records == []


def test_model_settings_a_confused_user_writes_are_refused_or_flagged(monkeypatch, caplog):
    """`:gpt-4o` left the provider out and a control character is a stray escape: refused, naming the setting
    (before: OpenAI's model ':gpt-4o', failing on every summary in the background). A provider misspelled is sent
    to OpenAI as written, and said at once."""
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    for name, why in ((":gpt-4o", "names no provider"), (":", "names no provider"), ("gpt-4o\x00", "control")):
        with pytest.raises(ConfigurationError, match=why) as raised:
            chat_model_from_setting(name, variable="MEMORY_AGENT_MEMORY_MODEL")
        assert "MEMORY_AGENT_MEMORY_MODEL=" in str(raised.value)
    caplog.set_level(logging.WARNING, "memory_agent")
    chat_model_from_setting("antropic:claude-x", variable="MEMORY_AGENT_MEMORY_MODEL")
    chat_model_from_setting("OPENAI:gpt-4o", variable="MEMORY_AGENT_MEMORY_MODEL")
    chat_model_from_setting("qwen:7b", variable="MEMORY_AGENT_MEMORY_MODEL")
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "`anthropic:...`" in warned[0]


async def test_a_learned_method_the_server_stops_serving_degrades_again(fake_openai):
    """Tool calling worked, then the server refuses tools (a model swapped behind a proxy): the next method is
    tried and learned (before: the learned method's HTTP 400 was raised on every summary, for good)."""
    from memory_agent.llm.structured import StructuredCaller
    from memory_agent.schemas import MemorySummaryOutput

    model = chat_model_from_setting("swapped-model", variable="X")
    caller = StructuredCaller(model, MemorySummaryOutput)
    prompt = [HumanMessage("Summarize: I like tea")]
    assert (await caller.ainvoke(prompt)).method == "tools"
    fake_openai.refuse_tools = True
    answer = await caller.ainvoke(prompt)
    assert answer.method == "json_schema" and isinstance(answer.args["summary"], str)
    assert learned_method(model) == "json_schema"


async def test_a_learned_method_that_keeps_answering_garbage_is_forgotten(fake_openai):
    """Tool calling worked, then the model behind the address answers it without the object (HTTP 200) while JSON
    in text works: after MISSES_TO_FORGET failed calls every way is asked again and text is learned (before: tool
    calling alone was asked, and every summary failed, for as long as the process ran)."""
    model = chat_model_from_setting("swapped-model", variable="X")
    caller = StructuredCaller(model, MemorySummaryOutput, tool=SUMMARY_TOOL)
    prompt = [HumanMessage("Window: sequences 0-0.\n[seq 0] user: I like tea")]
    assert (await caller.ainvoke(prompt)).method == "tools"
    fake_openai.mode = "malformed"  # tools and the JSON-schema format answer garbage; JSON in text is answered
    for _ in range(MISSES_TO_FORGET):
        with pytest.raises(SummarizationError, match="unparseable output"):
            await caller.ainvoke(prompt)
    assert (await caller.ainvoke(prompt)).method == "text" and learned_method(model) == "text"


async def test_a_backoff_is_its_tenants_own_and_carries_no_answer_text(fake_openai, open_memory, database_url):
    """Tenant a's user u1 fails its summaries, is forgotten, and tenant b's user u1 then starts the same thread id:
    tenant b's summaries are asked of the model, and the rows recorded without a model call name the failure's
    kind, not its text, which may quote the conversation (before: tenant b's conversation was backed off, its rows
    holding tenant a's cause)."""
    fake_openai.mode = "error"
    fake_openai.error_text = "secret of tenant a"
    memory = await open_memory(memory_model="flaky-model", summary_max_attempts=1)
    app = with_memory(EchoChat().graph, memory)

    async def rounds(tenant: str, count: int) -> None:
        config = {"configurable": {"thread_id": "same", "user_id": "u1", "tenant_id": tenant}}
        for n in range(count):
            await app.ainvoke({"messages": [HumanMessage(f"I like tea number {n}")]}, config)
        assert await memory.drain(timeout=20)

    await rounds("a", 10)
    backed_off = [
        error for _, error in query(database_url, "SELECT status, error FROM memory") if "not attempted" in error
    ]
    assert backed_off and all("HTTP 500" in error and "secret" not in error for error in backed_off)
    await memory.long_term.forget_user("u1", tenant_id="a")
    fake_openai.mode = "ok"
    await rounds("b", 6)
    assert query(database_url, "SELECT DISTINCT tenant_id, status, error FROM memory") == [("b", "completed", None)]
