"""The scripted conversation and the fake models every system in the benchmark is given.

The chat model answers after a configurable latency and keeps a reference to what it was called with
(tokens are counted outside the timed round). The summarizers answer after their own latency and count
their calls and input tokens as they go.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult

from memory_agent.llm.offline import OfflineSummaryModel

_WORDS = [
    "order",
    "invoice",
    "shipping",
    "refund",
    "account",
    "password",
    "delivery",
    "address",
    "warehouse",
    "product",
    "price",
    "discount",
    "customer",
    "ticket",
    "status",
    "update",
    "schedule",
    "meeting",
    "report",
    "budget",
    "forecast",
    "quarter",
    "sales",
    "region",
    "team",
    "deadline",
    "review",
    "release",
    "feature",
    "bug",
    "fix",
    "deploy",
    "server",
    "database",
    "backup",
    "restore",
    "migration",
    "plan",
]


def user_message(round_number: int) -> str:
    """The user's message of round `round_number` (1-based): the same text for every system."""
    rng = random.Random(round_number)
    body = " ".join(rng.choice(_WORDS) for _ in range(28))
    return f"Round {round_number} question: {body}?"


def assistant_reply(user_text: str) -> str:
    rng = random.Random(user_text)
    body = " ".join(rng.choice(_WORDS) for _ in range(36))
    return f"Answer: {body}."


class FakeChatModel(BaseChatModel):
    """Replies to the last user message after `latency_s`; `last_input` is what it was last called with."""

    latency_s: float = 0.0
    model_name: str = "fake-chat"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        object.__setattr__(self, "last_input", None)
        object.__setattr__(self, "calls", 0)
        object.__setattr__(self, "tools", [])  # what bind_tools was given (the model-side stage prices them)

    @property
    def _llm_type(self) -> str:
        return "benchmark-fake-chat"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FakeChatModel:
        object.__setattr__(self, "tools", list(tools))
        return self

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        object.__setattr__(self, "last_input", messages)
        object.__setattr__(self, "calls", self.calls + 1)
        last_user = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        text = assistant_reply(str(last_user.text) if last_user else "")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise NotImplementedError("the benchmark runs every system asynchronously")

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        return self._answer(messages)


class SummarizerStats:
    """Calls and input tokens of a summarizer (thread-safe enough: one writer at a time per model).

    `keep_prompts`: each call's prompt and its answer's tokens are kept too (the model-side stage prices them)."""

    def __init__(self) -> None:
        self.calls = 0
        self.input_tokens = 0
        self.keep_prompts = False
        self.prompts: list[list[BaseMessage]] = []
        self.output_tokens: list[int] = []

    def record(self, messages: Sequence[BaseMessage]) -> None:
        self.calls += 1
        self.input_tokens += count_tokens_approximately(messages)
        if self.keep_prompts:
            self.prompts.append(list(messages))

    def answered(self, result: ChatResult) -> ChatResult:
        if self.keep_prompts:
            message = result.generations[0].message
            calls = getattr(message, "tool_calls", None) or []
            text = str(message.text) + "".join(json.dumps(call.get("args", {})) for call in calls)
            self.output_tokens.append(math.ceil(len(text) / 4))
        return result


class _CountedLatency:
    """A summarizer that records each call in `stats` and answers (`_answer`) after `latency_s`."""

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        raise NotImplementedError

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.stats.record(messages)
        return self.stats.answered(self._answer(messages))

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.stats.record(messages)
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        return self.stats.answered(self._answer(messages))


class BenchOfflineSummaryModel(_CountedLatency, OfflineSummaryModel):
    """memory_agent's summarizer in the benchmark: the offline extractive summarizer after `latency_s`."""

    latency_s: float = 0.0
    model_name: str = "offline-extractive-summarizer"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        object.__setattr__(self, "stats", SummarizerStats())

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        return OfflineSummaryModel._generate(self, messages)


_CONTENT = re.compile(r"<content>(.*?)</content>", re.DOTALL)


class FakeMiddlewareSummarizer(_CountedLatency, BaseChatModel):
    """SummarizationMiddleware's summarizer in the benchmark: after `latency_s`, one 90-character line for
    each of the last 14 messages it was given (the size of memory_agent's offline summary when it was asked for
    250 words; SummarizationMiddleware asks for no length)."""

    latency_s: float = 0.0
    model_name: str = "fake-middleware-summarizer"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        object.__setattr__(self, "stats", SummarizerStats())

    @property
    def _llm_type(self) -> str:
        return "benchmark-fake-summarizer"

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        prompt = "\n".join(str(m.text) for m in messages)
        contents = [c.strip() for c in _CONTENT.findall(prompt)] or [
            line for line in prompt.splitlines() if line.strip()
        ]
        lines = [f"- {c[:89]}" for c in contents[-14:]]
        return ChatResult(generations=[ChatGeneration(message=AIMessage("\n".join(lines)))])
