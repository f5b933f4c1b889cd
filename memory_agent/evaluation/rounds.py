"""A LoCoMo-format sample loaded the way an app stores a conversation: each session a thread of the sample's user,
every turn stored by a `with_memory` round of the service, the summaries (and the items, cluster summaries and
vectors they write) made by the service's own background work, then its periodic catch-up run once.

A round is a turn of the first speaker (the user, a HumanMessage with the speaker's name) and the other speaker's
turns up to the next one's (the assistant's answer, AIMessages the replaying graph gives back); a session that
opens with the other speaker has those turns ahead of its first user message in its first round. The service's
clock is the session's: turn `i` of a session is stored at its start plus `i` seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from psycopg import AsyncConnection

from memory_agent.evaluation.dataset import EVAL_TENANT, Sample, Session
from memory_agent.integrations.langgraph import with_memory
from memory_agent.long_term.embeddings import model_name, vectors_available
from memory_agent.service import MemoryService
from memory_agent.testing import queries as direct


@dataclass
class ReplayClock:
    """The service's clock during the load: the time of the turn being stored."""

    now: datetime

    def __call__(self) -> datetime:
        return self.now


@dataclass
class _Replies:
    """What the replaying graph answers with in the round being run."""

    queued: list[BaseMessage] = field(default_factory=list)


def _replaying_graph(replies: _Replies) -> Any:
    def respond(state: MessagesState) -> dict[str, Any]:
        answer, replies.queued = replies.queued, []
        return {"messages": answer}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    return builder.compile()


def _rounds(sample: Sample, session: Session) -> Iterator[tuple[int, list[BaseMessage], list[BaseMessage]]]:
    """(index of the round's first turn, its input, its replies) for each round of a session."""
    start, given, answered = 0, list[BaseMessage](), list[BaseMessage]()
    for index, turn in enumerate(session.turns):
        if turn.speaker == sample.speaker_a:
            if any(isinstance(m, HumanMessage) for m in given):
                yield start, given, answered
                start, given, answered = index, [], []
            given.append(HumanMessage(turn.text, name=turn.speaker))
        elif any(isinstance(m, HumanMessage) for m in given):
            answered.append(AIMessage(turn.text, name=turn.speaker))
        else:  # before the session's first user message: part of its first round's input
            given.append(AIMessage(turn.text, name=turn.speaker))
    if any(isinstance(m, HumanMessage) for m in given):
        yield start, given, answered


def last_turn_at(sample: Sample) -> datetime | None:
    """When the sample's last turn was stored (its session's start plus its index in seconds): "now" for the
    conversation, the clock its questions are asked at. None for a sample without a turn."""
    stored = [session for session in sample.sessions if session.turns]
    if not stored:
        return None
    last = max(stored, key=lambda session: session.started_at)
    return last.started_at + timedelta(seconds=len(last.turns) - 1)


def count_rounds(sample: Sample) -> int:
    """How many `with_memory` rounds load_through_rounds runs for `sample`."""
    return sum(1 for session in sample.sessions for _ in _rounds(sample, session))


async def load_through_rounds(memory: MemoryService, sample: Sample, clock: ReplayClock) -> dict[tuple[str, int], str]:
    """Store `sample` through `with_memory` rounds of `memory` (its user is the sample's, in the evaluation's
    tenant), wait for its background work, run its periodic catch-up; returns (conversation_id, sequence) → dia_id.
    A session without a turn of the first speaker stores nothing (a round needs a user message)."""
    replies = _Replies()
    app = with_memory(_replaying_graph(replies), memory)
    provenance: dict[tuple[str, int], str] = {}
    for session in sample.sessions:
        conversation_id = f"{sample.sample_id}:session_{session.number}"
        config = {"configurable": {"thread_id": conversation_id, "user_id": sample.sample_id, "tenant_id": EVAL_TENANT}}
        sent = 0
        for first, given, answered in _rounds(sample, session):
            clock.now = session.started_at + timedelta(seconds=first)
            replies.queued = answered
            await app.ainvoke({"messages": given}, config)
            for offset in range(len(given) + len(answered)):
                provenance[(conversation_id, sent + offset)] = session.turns[first + offset].dia_id
            sent += len(given) + len(answered)
    await memory.drain()
    async with memory.backend.session() as conn:
        stored = await stored_turns(conn, sample.sample_id)
    texts = {turn.dia_id: turn.text for session in sample.sessions for turn in session.turns}
    misplaced = [
        row
        for row in stored
        if texts.get(provenance.get((row["conversation_id"], row["sequence_number"]), "")) != row["content"]
    ]
    if misplaced or len(stored) != len(provenance):
        raise RuntimeError(
            f"sample {sample.sample_id}: {len(stored)} turns stored for {len(provenance)} sent, "
            f"{len(misplaced)} not where the evaluation expects them (first: {misplaced[:1]})"
        )
    return provenance


async def catch_up(memory: MemoryService) -> None:
    """The service's periodic background step (the stale-row sweep's companion: cluster summaries and vectors a
    summary job missed), run once now instead of at its next tick."""
    # The inline executor's periodic step (the evaluation's service runs it; a queue's runs in a worker).
    refresh = getattr(getattr(memory.executor, "jobs", None), "refresh_clusters", None)
    if refresh is None:
        raise TypeError("the evaluation's service needs the inline executor (MEMORY_AGENT_EXECUTOR=inline)")
    await refresh()


async def turns_without_vector(conn: AsyncConnection[Any], memory: MemoryService, user_id: str) -> int:
    """How many of the user's stored turns have no vector of the service's embedder (0 without one)."""
    if memory.embedder is None or not await vectors_available(conn):
        return 0
    scope = {"tenant_id": EVAL_TENANT, "user_id": user_id}
    return await direct.turns_without_vector(conn, scope, model_name(memory.embedder))


async def stored_turns(conn: AsyncConnection[Any], user_id: str) -> list[dict[str, Any]]:
    """The user's stored turns, in order (the load's check that each turn got the sequence it expects)."""
    return await direct.stored_turns(conn, {"tenant_id": EVAL_TENANT, "user_id": user_id})


async def long_term_volume(conn: AsyncConnection[Any]) -> dict[str, Any]:
    """What the evaluation's load wrote: completed summaries, item rows (every version) and cluster summaries, and
    items per summary."""
    row = await direct.long_term_volume(conn, EVAL_TENANT)
    summaries, items = int(row.get("summaries") or 0), int(row.get("items") or 0)
    return {
        "summaries": summaries,
        "items": items,
        "cluster_summaries": int(row.get("cluster_summaries") or 0),
        "items_per_summary": round(items / summaries, 2) if summaries else 0.0,
    }
