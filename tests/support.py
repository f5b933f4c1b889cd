"""Test helpers: chat graphs, a summarizer whose completion the test releases, and a local OpenAI server."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent.summarize.offline import OfflineSummaryModel


class EchoChat:
    """A compiled one-node chat graph that answers `reply <n>` and records what it was given."""

    def __init__(self) -> None:
        self.seen: list[list[BaseMessage]] = []

        def respond(state: MessagesState) -> dict[str, Any]:
            self.seen.append(list(state["messages"]))
            return {"messages": [AIMessage(f"reply {len(self.seen)}")]}

        builder = StateGraph(MessagesState)
        builder.add_node("respond", respond)
        builder.add_edge(START, "respond")
        self.graph = builder.compile()


class GatedSummaryModel(OfflineSummaryModel):
    """The offline summarizer, but every call waits until the test releases it."""

    model_name: str = "gated-test-summarizer"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        object.__setattr__(self, "_gate", threading.Semaphore(0))
        object.__setattr__(self, "_calls", [])

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self._gate.release()

    @property
    def calls(self) -> list[str]:
        return self._calls

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self._calls.append("\n".join(str(m.text) for m in messages))
        while not self._gate.acquire(blocking=False):
            await asyncio.sleep(0.005)
        return self._generate(messages, stop=stop)


class FailingSummaryModel(OfflineSummaryModel):
    """Raises on every call (counted)."""

    model_name: str = "failing-test-summarizer"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        object.__setattr__(self, "_count", [0])

    @property
    def count(self) -> int:
        return self._count[0]

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self._count[0] += 1
        raise RuntimeError("model exploded")
