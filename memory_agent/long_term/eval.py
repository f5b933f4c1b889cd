"""Recall quality on a LoCoMo-format dataset: evidence recall@1/@5/@10 per path, block tokens, latency.

A dataset is LoCoMo's JSON: a list of samples (or one flat sample), each a two-speaker conversation in
numbered sessions (`session_N`, `session_N_date_time`) of turns (`speaker`, `dia_id` "DN:M", `text`) and `qa`
(question, evidence dia_ids, category; category 5 is adversarial and not scored). Each sample becomes one user,
each session one conversation, `speaker_a` the user and `speaker_b` the assistant. A result is a hit when its
provenance (the turns behind it) includes an evidence turn.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memory_agent import resources
from memory_agent.errors import InvalidInputError
from memory_agent.long_term.embeddings import index_items
from memory_agent.long_term.extract import Statement, extract_items
from memory_agent.long_term.items import is_single_valued, normalize_content
from memory_agent.long_term.recall import ALL_PATHS, RecallSettings, SearchPath, recall

PATHS: dict[str, tuple[SearchPath, ...]] = {
    "fts": ("fts",),
    "trgm": ("trgm",),
    "vector": ("vector",),
    "fused": ALL_PATHS,
}
KS = (1, 5, 10)
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"^session_(\d+)$")
EVAL_TENANT = "eval"


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass
class Session:
    number: int
    started_at: datetime
    turns: list[Turn]


@dataclass
class Question:
    question: str
    evidence: list[str]
    category: int | None


@dataclass
class Sample:
    sample_id: str
    speaker_a: str
    sessions: list[Session]
    questions: list[Question]


def parse_session_time(text: str | None, fallback: datetime) -> datetime:
    """LoCoMo dates are free text ("1:56 pm on 8 May, 2023"); unparseable ones fall back to a day after the last."""
    for pattern in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime((text or "").strip(), pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    return fallback


def parse_sample(raw: dict[str, Any], index: int) -> Sample:
    conversation = raw.get("conversation", raw)
    if "speaker_a" not in conversation:
        raise InvalidInputError(f"sample {index}: no speaker_a (is this a LoCoMo-format dataset?)")
    sessions: list[Session] = []
    clock = datetime(2023, 1, 1, tzinfo=UTC)
    for key in sorted((k for k in conversation if _SESSION.match(k)), key=lambda k: int(k.split("_")[1])):
        number = int(key.split("_")[1])
        clock = parse_session_time(conversation.get(f"{key}_date_time"), clock + timedelta(days=1))
        turns = [Turn(t["dia_id"], t["speaker"], t.get("text", "")) for t in conversation[key] if t.get("text")]
        sessions.append(Session(number, clock, turns))
    questions = []
    for qa in raw.get("qa", []):
        evidence = [f"D{s}:{t}" for s, t in _EVIDENCE.findall(" ".join(qa.get("evidence", [])))]
        questions.append(Question(qa["question"], evidence, qa.get("category")))
    return Sample(str(raw.get("sample_id", f"sample-{index}")), conversation["speaker_a"], sessions, questions)


def load_dataset(path: Path) -> list[Sample]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"cannot read the dataset {path}: {exc}") from exc
    samples = data if isinstance(data, list) else [data]
    return [parse_sample(raw, i) for i, raw in enumerate(samples)]


def scored(question: Question) -> bool:
    return question.category != 5 and bool(question.evidence)


async def store_conversation(
    conn: AsyncConnection[Any],
    conversation_id: str,
    turns: Sequence[tuple[str, str, datetime]],
    *,
    tenant_id: str,
    user_id: str,
) -> None:
    """Store (role, text, created_at) turns as the messages of a conversation of (tenant_id, user_id), rounds
    numbered by user turns."""
    keys = {"tenant_id": tenant_id, "user_id": user_id}
    queries = resources.queries()
    rows, round_number = [], 0
    for sequence, (role, text, created_at) in enumerate(turns):
        if role == "user" or round_number == 0:
            round_number += 1
        message = {"type": "human" if role == "user" else "ai", "data": {"content": text, "type": role}}
        rows.append(
            {
                **keys,
                "conversation_id": conversation_id,
                "sequence_number": sequence,
                "round_number": round_number,
                "role": role,
                "content": text,
                "message": Jsonb(message),
                "created_at": created_at,
            }
        )
    async with conn.transaction():
        await conn.execute(
            queries["eval_insert_conversation"],
            {
                **keys,
                "conversation_id": conversation_id,
                "next_sequence": len(rows),
                "round_count": round_number,
                "created_at": turns[0][2] if turns else datetime.now(UTC),
            },
        )
        async with conn.cursor() as cur:
            await cur.executemany(queries["eval_insert_message"], rows)


async def store_item(
    conn: AsyncConnection[Any],
    *,
    tenant_id: str,
    user_id: str,
    item_type: str,
    key: str,
    content: str,
    valid_from: datetime,
    valid_to: datetime | None = None,
    sources: Sequence[tuple[str, int]] = (),
    importance: float = 0.5,
    is_summary: bool = False,
    source_item_ids: Sequence[Any] = (),
    single_valued: bool = False,
) -> Any:
    """Write one item directly (single-valued: closing the current value of its key); returns its id, None when
    the same content was current already. Evaluation and tests only: items are the long-term writer's."""
    queries = resources.queries()
    content_norm = normalize_content(content)
    value_slot = "summary" if is_summary else "" if single_valued else hashlib.md5(content_norm.encode()).hexdigest()
    params = {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "item_type": item_type,
        "key": key,
        "content": content,
        "content_norm": content_norm,
        "value_slot": value_slot,
        "importance": importance,
        "valid_from": valid_from,
        "valid_to": valid_to,
        "is_summary": is_summary,
        "source_item_ids": list(source_item_ids),
        "now": valid_from,
    }
    async with conn.transaction():
        if single_valued:
            await conn.execute(queries["eval_close_item"], params)
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(queries["eval_insert_item"], params)
            row = await cur.fetchone()
            if row is None:
                return None
            for conversation_id, sequence in sources:
                await cur.execute(
                    queries["eval_insert_item_source"],
                    {
                        "user_id": user_id,
                        "tenant_id": tenant_id,
                        "item_id": row["item_id"],
                        "conversation_id": conversation_id,
                        "sequence_number": sequence,
                    },
                )
    return row["item_id"]


async def ingest_directly(conn: AsyncConnection[Any], sample: Sample) -> dict[tuple[str, int], str]:
    """Store a sample's sessions as messages rows and its items by the offline extraction; returns
    (conversation_id, sequence) → dia_id. The integrator swaps this for rounds through the real round path
    (offline summarizer, items written by the background job) via `evaluate(..., ingest=...)`."""
    provenance: dict[tuple[str, int], str] = {}
    for session in sample.sessions:
        conversation_id = f"{sample.sample_id}:session_{session.number}"
        turns = [
            (
                "user" if t.speaker == sample.speaker_a else "assistant",
                t.text,
                session.started_at + timedelta(seconds=i),
            )
            for i, t in enumerate(session.turns)
        ]
        await store_conversation(conn, conversation_id, turns, tenant_id=EVAL_TENANT, user_id=sample.sample_id)
        provenance.update({(conversation_id, i): t.dia_id for i, t in enumerate(session.turns)})
        statements = [Statement(i, role, text) for i, (role, text, _) in enumerate(turns)]
        for item_type, item in extract_items(statements).typed():
            await store_item(
                conn,
                tenant_id=EVAL_TENANT,
                user_id=sample.sample_id,
                item_type=item_type,
                key=item.key,
                content=item.content,
                valid_from=session.started_at,
                importance=item.importance,
                sources=[(conversation_id, s) for s in item.source_sequences],
                single_valued=is_single_valued(item_type, item),
            )
    return provenance


Ingest = Callable[[AsyncConnection[Any], Sample], Awaitable[dict[tuple[str, int], str]]]


@dataclass
class PathScore:
    hits: dict[int, int] = field(default_factory=lambda: {k: 0 for k in KS})
    questions: int = 0

    def recall_at(self, k: int) -> float:
        return self.hits[k] / self.questions if self.questions else 0.0


@dataclass
class EvalReport:
    paths: dict[str, PathScore]
    questions: int
    mean_tokens: float
    latency_p50_ms: float
    latency_p95_ms: float
    settings: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "recall": {name: {f"@{k}": round(s.recall_at(k), 4) for k in KS} for name, s in self.paths.items()},
            "mean_block_tokens": round(self.mean_tokens, 1),
            "latency_ms": {"p50": round(self.latency_p50_ms, 2), "p95": round(self.latency_p95_ms, 2)},
            "settings": self.settings,
        }

    def table(self) -> str:
        lines = [
            f"Evidence recall on {self.questions} questions",
            "path    | @1    | @5    | @10",
            "--------|-------|-------|------",
        ]
        for name, score in self.paths.items():
            lines.append(f"{name:<8}| " + " | ".join(f"{score.recall_at(k):.3f}" for k in KS))
        lines.append(
            f"mean block tokens (fused): {self.mean_tokens:.0f}; recall latency (fused) "
            f"p50 {self.latency_p50_ms:.2f} ms, p95 {self.latency_p95_ms:.2f} ms"
        )
        return "\n".join(lines)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))] if ordered else 0.0


async def evaluate(
    conn: AsyncConnection[Any],
    samples: Sequence[Sample],
    *,
    embedder: Embeddings | None = None,
    settings: RecallSettings | None = None,
    paths: Sequence[str] = tuple(PATHS),
    ingest: Ingest = ingest_directly,
) -> EvalReport:
    """Ingest every sample (one user each), then ask every scored question through each path."""
    settings = settings or RecallSettings()
    scores = {name: PathScore() for name in paths}
    tokens: list[int] = []
    latencies: list[float] = []
    for sample in samples:
        provenance = await ingest(conn, sample)
        if embedder is not None:
            await index_items(conn, tenant_id=EVAL_TENANT, user_id=sample.sample_id, embedder=embedder)
        for question in filter(scored, sample.questions):
            evidence = set(question.evidence)
            for name in paths:
                result = await recall(
                    conn,
                    tenant_id=EVAL_TENANT,
                    user_id=sample.sample_id,
                    query=question.question,
                    limit=max(KS),
                    embedder=embedder,
                    settings=settings,
                    paths=PATHS[name],
                )
                ranks = [
                    i
                    for i, hit in enumerate(result.results)
                    if evidence & {provenance.get(source) for source in hit.sources}
                ]
                score = scores[name]
                score.questions += 1
                for k in KS:
                    score.hits[k] += bool(ranks and ranks[0] < k)
                if name == "fused":
                    tokens.append(result.estimated_tokens)
                    latencies.append(result.latency_ms)
    questions = max((s.questions for s in scores.values()), default=0)
    return EvalReport(
        paths=scores,
        questions=questions,
        mean_tokens=statistics.fmean(tokens) if tokens else 0.0,
        latency_p50_ms=percentile(latencies, 50),
        latency_p95_ms=percentile(latencies, 95),
        settings={
            "text_search_config": settings.text_search_config,
            "or_terms": settings.or_terms,
            "embedder": getattr(embedder, "model", None) if embedder else None,
        },
    )
