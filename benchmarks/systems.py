"""The three systems under test, each on its own database of one PostgreSQL server.

- memory_agent: `with_memory` around a one-node MessagesState graph that calls the fake chat model.
- full_history (a): the same one-node graph compiled with AsyncPostgresSaver; the model sees every message.
- summarization_middleware (b): `create_agent` + `SummarizationMiddleware(trigger=("tokens", 2000),
  keep=("messages", 6))` + AsyncPostgresSaver; the summarizer runs inline, before the model call.

Every system gets a connection pool of the same size (memory_agent's default, 10).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.graph import START, MessagesState, StateGraph
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from benchmarks.fakes import (
    BenchOfflineSummaryModel,
    FakeChatModel,
    FakeMiddlewareSummarizer,
    SummarizerStats,
    assistant_reply,
    user_message,
)
from memory_agent.conversation.query_rows import StoredRound, TriggerRule
from memory_agent.schemas.keys import ConversationKey

POOL_SIZE = 10
# How long a round may queue for a pooled connection. With 1,000 rounds in flight on 10 connections a
# round waits seconds, longer than memory_agent's default (5 s); every system gets the same 60 s.
POOL_WAIT_S = 60.0
MIDDLEWARE_TRIGGER_TOKENS = 2000
MIDDLEWARE_KEEP_MESSAGES = 6

# Checks over memory_agent's tables after the concurrent run (benchmark-only reads).
SUMMARY_LAG_SQL = """
SELECT c.conversation_id, c.next_sequence - 1 AS last_sequence,
       (SELECT max(m.end_sequence) FROM memory AS m
        WHERE m.user_id = c.user_id AND m.conversation_id = c.conversation_id AND m.status = 'completed')
           AS memory_end_sequence
FROM conversations AS c
WHERE c.conversation_id LIKE %s
"""
DUPLICATE_VERSIONS_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM memory WHERE status = 'completed' AND conversation_id LIKE %(prefix)s
                              GROUP BY conversation_id, start_sequence, end_sequence HAVING count(*) > 1) AS d)
     + (SELECT count(*) FROM (SELECT 1 FROM memory WHERE status = 'processing' AND conversation_id LIKE %(prefix)s
                              GROUP BY conversation_id HAVING count(*) > 1) AS p) AS duplicates,
       (SELECT count(*) FROM memory WHERE status = 'failed' AND conversation_id LIKE %(prefix)s) AS failed,
       (SELECT count(*) FROM memory WHERE status = 'completed' AND conversation_id LIKE %(prefix)s) AS completed
"""


def with_dbname(url: str, dbname: str) -> str:
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)


def create_database(server_url: str, prefix: str, template: str | None = None) -> tuple[str, str]:
    name = f"bench_{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    return name, with_dbname(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass(frozen=True)
class App:
    """What the app gives its chat model besides the conversation: a system prompt (first) and tools."""

    system_prompt: str | None = None
    tools: tuple[Any, ...] = ()


def chat_graph(model: FakeChatModel, checkpointer: Any = None, app: App | None = None) -> Any:
    """The one-node MessagesState graph shared by memory_agent and the full-history baseline: the app's system
    prompt before the state's messages, its tools bound (as an app's chat node does)."""
    app = app or App()
    bound = model.bind_tools(list(app.tools)) if app.tools else model
    head = [SystemMessage(app.system_prompt)] if app.system_prompt else []

    async def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke([*head, *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    return builder.compile(checkpointer=checkpointer)


def scripted_history(n_messages: int) -> list[BaseMessage]:
    """The first `n_messages` messages of the scripted conversation (user, assistant, user, ...)."""
    messages: list[BaseMessage] = []
    round_number = 0
    while len(messages) < n_messages:
        round_number += 1
        question = user_message(round_number)
        messages.append(HumanMessage(question))
        if len(messages) < n_messages:
            messages.append(AIMessage(assistant_reply(question)))
    return messages


class System:
    """One system under test: `round` runs one user turn; `load` is what a round start reads."""

    name = ""
    label = ""
    dbname = ""
    chat: FakeChatModel
    summarizer_stats: SummarizerStats

    async def open(self, server_url: str) -> None: ...

    async def close(self) -> None: ...

    def set_latency(self, latency_s: float) -> None: ...

    async def round(self, thread_id: str, round_number: int) -> None:
        await self.app.ainvoke(
            {"messages": [HumanMessage(user_message(round_number))]}, {"configurable": {"thread_id": thread_id}}
        )

    async def seed(self, thread_id: str, n_messages: int) -> None: ...

    async def load(self, thread_id: str) -> None: ...


class MemoryAgentSystem(System):
    name = "memory_agent"
    label = "memory_agent (with_memory)"

    def __init__(self, app: App | None = None, user_id: str | None = None, **settings: Any) -> None:
        self.settings = settings
        self.app_shape = app
        self.user_id = user_id  # a round of this user: recall on (the model-side stage)

    async def open(self, server_url: str) -> None:
        from memory_agent import MemoryService, MemorySettings, with_memory

        self.server_url = server_url
        self.dbname, url = create_database(server_url, "memory_agent")
        self.chat = FakeChatModel()
        self.summarizer = BenchOfflineSummaryModel()
        self.summarizer_stats = self.summarizer.stats
        settings = MemorySettings(
            database_url=url, pool_max_size=POOL_SIZE, connect_timeout_s=POOL_WAIT_S, **self.settings
        )
        self.memory = MemoryService.from_settings(settings, model=self.summarizer)
        await self.memory.aopen()
        self.app = with_memory(chat_graph(self.chat, app=self.app_shape), self.memory)

    async def round(self, thread_id: str, round_number: int) -> None:
        configurable = {"thread_id": thread_id, **({"user_id": self.user_id} if self.user_id else {})}
        await self.app.ainvoke({"messages": [HumanMessage(user_message(round_number))]}, {"configurable": configurable})

    async def close(self) -> None:
        await self.memory.aclose(timeout=60)
        drop_database(self.server_url, self.dbname)

    def set_latency(self, latency_s: float) -> None:
        self.chat.latency_s = latency_s
        self.summarizer.latency_s = latency_s

    async def drain(self, timeout: float = 300) -> bool:
        return await self.memory.drain(timeout=timeout)

    async def seed(self, thread_id: str, n_messages: int) -> None:
        """Store `n_messages` scripted messages, then one real summary ending two messages before the last."""
        from memory_agent.conversation.messages import serialize_round

        history = scripted_history(n_messages)
        rounds = [history[i : i + 2] for i in range(0, len(history), 2)]
        backend = self.memory.backend
        # No summary while seeding (a threshold no conversation reaches): the one summary is made below.
        seeding = TriggerRule(
            window=self.memory.settings.memory.rolling_window_size,
            summarize_after=2**31 - 1,
            min_new=1,
            timeout_s=self.memory.settings.jobs.processing_timeout_s,
            pick_up=False,
        )

        async def store() -> None:
            async with backend.session(transaction=True) as conn:
                for messages in rounds:
                    await backend.conversations.end_round(
                        conn,
                        ConversationKey.of(thread_id),
                        StoredRound(*serialize_round(messages)),
                        holder=None,
                        now=datetime.now(UTC),
                        rule=seeding,
                    )

        await self.memory.loop.arun(store())
        await self.memory.conversations.trigger_summarization_if_needed(thread_id, n_messages - 3)
        await self.drain()

    async def load(self, thread_id: str) -> None:
        _, info = await self.memory.conversations.prepare_round(thread_id, [HumanMessage(user_message(10**6))])
        await self.memory.conversations.release_round(info)  # a load without its round end: give the conversation back

    async def query(self, sql: str, params: Any) -> list[dict[str, Any]]:
        async def run() -> list[dict[str, Any]]:
            async with self.memory.backend.session() as conn:
                cur = await conn.execute(sql, params)
                return await cur.fetchall()

        return await self.memory.loop.arun(run())

    async def summary_lag(self, prefix: str) -> dict[str, float]:
        rows = await self.query(SUMMARY_LAG_SQL, [f"{prefix}%"])
        lags = [
            r["last_sequence"] - (r["memory_end_sequence"] if r["memory_end_sequence"] is not None else -1)
            for r in rows
        ]
        return {"mean": sum(lags) / len(lags) if lags else 0.0, "max": max(lags, default=0)}

    async def version_check(self, prefix: str) -> dict[str, int]:
        rows = await self.query(DUPLICATE_VERSIONS_SQL, {"prefix": f"{prefix}%"})
        return {k: int(v) for k, v in rows[0].items()}


class _SaverSystem(System):
    """A baseline whose state lives in AsyncPostgresSaver (one checkpoint per super-step)."""

    prefix = ""
    node = ""

    def __init__(self, app: App | None = None) -> None:
        self.app_shape = app or App()

    async def open(self, server_url: str) -> None:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        self.server_url = server_url
        self.dbname, url = create_database(server_url, self.prefix)
        self.pool = AsyncConnectionPool(
            url,
            max_size=POOL_SIZE,
            timeout=POOL_WAIT_S,
            open=False,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        )
        await self.pool.open(wait=True)
        self.saver = AsyncPostgresSaver(self.pool)
        await self.saver.setup()
        self.chat = FakeChatModel()
        self.build()

    def build(self) -> None: ...

    async def close(self) -> None:
        await self.pool.close()
        drop_database(self.server_url, self.dbname)

    def seed_messages(self, n_messages: int) -> list[BaseMessage]:
        return scripted_history(n_messages)

    async def seed(self, thread_id: str, n_messages: int) -> None:
        await self.app.aupdate_state(
            {"configurable": {"thread_id": thread_id}}, {"messages": self.seed_messages(n_messages)}, as_node=self.node
        )

    async def load(self, thread_id: str) -> None:
        await self.saver.aget_tuple({"configurable": {"thread_id": thread_id}})


class FullHistorySystem(_SaverSystem):
    name = "full_history"
    label = "(a) MessagesState + PostgresSaver, full history"
    prefix = "full_history"
    node = "chat"

    def build(self) -> None:
        self.summarizer_stats = SummarizerStats()  # never called: no summarizer
        self.app = chat_graph(self.chat, self.saver, self.app_shape)

    def set_latency(self, latency_s: float) -> None:
        self.chat.latency_s = latency_s


class MiddlewareSystem(_SaverSystem):
    name = "summarization_middleware"
    label = "(b) create_agent + SummarizationMiddleware + PostgresSaver"
    prefix = "middleware"
    node = "model"

    def build(self) -> None:
        from langchain.agents import create_agent
        from langchain.agents.middleware import SummarizationMiddleware

        self.summarizer = FakeMiddlewareSummarizer()
        self.summarizer_stats = self.summarizer.stats
        middleware = SummarizationMiddleware(
            model=self.summarizer,
            trigger=("tokens", MIDDLEWARE_TRIGGER_TOKENS),
            keep=("messages", MIDDLEWARE_KEEP_MESSAGES),
        )
        self.app = create_agent(
            model=self.chat,
            tools=list(self.app_shape.tools),
            system_prompt=self.app_shape.system_prompt,
            middleware=[middleware],
            checkpointer=self.saver,
        )

    def set_latency(self, latency_s: float) -> None:
        self.chat.latency_s = latency_s
        self.summarizer.latency_s = latency_s

    def seed_messages(self, n_messages: int) -> list[BaseMessage]:
        """What the middleware's state holds after `n_messages`: everything until the trigger, then a summary
        plus the last six messages."""
        history = scripted_history(n_messages)
        if count_tokens_approximately(history) <= MIDDLEWARE_TRIGGER_TOKENS:
            return history
        summary = self.summarizer._answer([HumanMessage("\n".join(str(m.text) for m in history[:-6]))])
        text = summary.generations[0].message.text
        return [HumanMessage(f"Here is a summary of the conversation to date:\n\n{text}"), *history[-6:]]


def all_systems(memory_settings: dict[str, Any] | None = None) -> list[System]:
    return [MemoryAgentSystem(**(memory_settings or {})), FullHistorySystem(), MiddlewareSystem()]
