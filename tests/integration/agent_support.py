"""Helpers for agent tests: a tool-calling fake chat model, two tools, the tool-pairing check, a thread's run config
and its stored messages."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt
from pydantic import Field

from tests.conftest import query

COMMAND = re.compile(r"tools:(\d+):(seq|par)")


def config(thread: str) -> dict[str, Any]:
    """A run's config naming the thread alone."""
    return {"configurable": {"thread_id": thread}}


def stored(url: str, thread: str) -> list[tuple[int, int, str, str]]:
    """(sequence, round, role, content) of every stored message of `thread`, in order."""
    return query(
        url,
        "SELECT sequence_number, round_number, role, content FROM messages WHERE conversation_id = %s"
        " ORDER BY sequence_number",
        [thread],
    )


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


class ToolScriptModel(BaseChatModel):
    """Answers a round's user message `… tools:<k>:<seq|par> …` with k lookup calls (one per turn, or all in
    one message), then a final answer; any other message gets a final answer at once. Records every call."""

    calls: list[list[BaseMessage]] = Field(default_factory=list)
    counter: list[int] = Field(default_factory=lambda: [0])

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls = []
        self.counter = [0]

    @property
    def _llm_type(self) -> str:
        return "tool-script"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolScriptModel:
        return self

    def _next_id(self) -> str:
        self.counter[0] += 1
        return f"call_{self.counter[0]}"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        user_text = str(messages[last_user].text)
        if user_text.startswith("[Previous context: "):
            user_text = user_text.rsplit("]\n\n", 1)[-1]  # the user's own words, not the injected memory
        done = sum(isinstance(m, ToolMessage) for m in messages[last_user:])
        found = COMMAND.findall(user_text)
        reply: AIMessage
        if found:
            k, mode = int(found[-1][0]), found[-1][1]
            if mode == "par" and done == 0:
                calls = [{"name": "lookup", "args": {"key": f"k{i}"}, "id": self._next_id()} for i in range(k)]
                reply = AIMessage("", tool_calls=calls)
            elif mode == "seq" and done < k:
                reply = AIMessage(
                    "", tool_calls=[{"name": "lookup", "args": {"key": f"k{done}"}, "id": self._next_id()}]
                )
            else:
                reply = AIMessage(f"final answer after {done} tool results")
        else:
            reply = AIMessage("final answer without tools")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def assert_tool_pairs(messages: Sequence[BaseMessage], *, allow_open_end: bool = False) -> None:
    """Every ToolMessage follows the AI message that called it; every AI tool call has its result."""
    open_calls: dict[str, int] = {}
    for position, message in enumerate(messages):
        if isinstance(message, AIMessage):
            assert not open_calls, f"AI message {position} arrives while tool calls {open_calls} are unanswered"
            for call in message.tool_calls:
                open_calls[call["id"]] = position
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, (
                f"ToolMessage {position} answers {message.tool_call_id}, which no earlier AI message called"
            )
            del open_calls[message.tool_call_id]
        else:
            assert not open_calls, f"{message.type} message {position} arrives while {open_calls} are unanswered"
    if not allow_open_end:
        assert not open_calls, f"tool calls {open_calls} have no results"


def approval_graph() -> Any:
    """A one-node MessagesState graph that asks `interrupt("approve?")` and answers with what it was resumed with."""

    def ask(state: MessagesState) -> dict[str, Any]:
        answer = interrupt("approve?")
        return {"messages": [AIMessage(f"approved: {answer}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder.compile()
