"""Test helpers: chat graphs, a summarizer whose completion the test releases, and a local OpenAI server."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import START, MessagesState, StateGraph
from pydantic import Field

from memory_agent import resources, with_memory
from memory_agent.llm.offline import OfflineSummaryModel, offline_items, offline_summary
from memory_agent.long_term.cluster_text import offline_cluster_summary_text

CLUSTER_PROMPT_START = resources.prompt("cluster_summary").split("\n", 1)[0]


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


class ScriptedSummaryModel(BaseChatModel):
    """A summary model that is not the offline one (so cluster summaries go through its own prompt): summary
    calls answer with the scripted tool-call arguments in turn, then as the offline summarizer would; cluster
    prompts answer with `cluster_text` (default: the offline cluster text), after raising `cluster_failures`
    times. Every prompt is recorded."""

    model_name: str = "scripted-test-summarizer"
    answers: list[dict[str, Any]] = Field(default_factory=list)
    cluster_text: str | None = None
    cluster_failures: int = 0
    prompts: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-test"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedSummaryModel:
        return self

    @property
    def cluster_prompts(self) -> list[str]:
        return [p for p in self.prompts if p.startswith(CLUSTER_PROMPT_START)]

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        text = "\n".join(str(m.text) for m in messages)
        self.prompts.append(text)
        if text.startswith(CLUSTER_PROMPT_START):
            if self.cluster_failures > 0:
                self.cluster_failures -= 1
                raise RuntimeError("cluster model exploded")
            members = [line[2:] for line in text.splitlines() if line.startswith("- ")]
            answer = self.cluster_text or offline_cluster_summary_text(members)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(answer))])
        args = self.answers.pop(0) if self.answers else {"summary": offline_summary(text), **offline_items(text)}
        call = {"name": "MemorySummaryOutput", "args": args, "id": f"call_{len(self.prompts)}"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=[call]))])


async def run_round(app: Any, thread: str, n: int) -> Any:
    """Round `n` of `thread`: the user says 'message <n>'."""
    return await app.ainvoke({"messages": [HumanMessage(f"message {n}")]}, {"configurable": {"thread_id": thread}})


async def round_after_summary_in_system_mode(open_memory: Any) -> tuple[Any, EchoChat, Any]:
    """(memory, chat, round 4's result) of thread 'sys' with injection_mode 'system': rounds 1-3, their summary
    completed, then round 4."""
    model = GatedSummaryModel()
    memory = await open_memory(model=model, injection_mode="system")
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    for n in (1, 2, 3):
        await run_round(app, "sys", n)
    model.release()
    assert await memory.drain(timeout=10)
    return memory, chat, await run_round(app, "sys", 4)
