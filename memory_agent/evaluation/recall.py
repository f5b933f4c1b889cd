"""Recall quality on a LoCoMo-format dataset, measured through the round start's own code path.

A dataset is LoCoMo's JSON: a list of samples (or one flat sample), each a two-speaker conversation in
numbered sessions (`session_N`, `session_N_date_time`) of turns (`speaker`, `dia_id` "DN:M", `text`) and `qa`
(question, evidence dia_ids, category; category 5 is adversarial and not scored). Each sample becomes one user,
each session one conversation (`speaker_a` the user, `speaker_b` the assistant, each turn carrying its speaker's
name as a chat message's `name`), indexed as the background job indexes (vectors of items and turns when an
embedder is configured).

Each scored question is then asked as the first message of a new conversation of that user, through
`round_recall`: the statement, settings, scope switch, guardrails and block a round start uses. A result is a
hit when its provenance (the turns behind it, neighbours shown with it included) holds an evidence turn.
@k is read on the ranked list (the first k of the fused ranking, up to 10); "in block" on what the guardrails
let into the block the model gets (at most `max_turns` turns and `max_tokens`).
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings

from memory_agent.db.backend import MemoryBackend
from memory_agent.evaluation.dataset import EVAL_TENANT, Sample, load_dataset, scored
from memory_agent.evaluation.ingest import Ingest, ingest_directly, store_conversation, store_item
from memory_agent.long_term.embeddings import index_items, model_name
from memory_agent.long_term.recall import RecallSettings, SearchPath, recall
from memory_agent.long_term.recall.block import RecallHit
from memory_agent.long_term.recall.round_start import round_recall
from memory_agent.schemas.keys import ConversationKey

__all__ = ["EvalReport", "evaluate", "ingest_directly", "load_dataset", "store_conversation", "store_item"]

KS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
PATHS: tuple[SearchPath, ...] = ("fts", "trgm", "vector")


@dataclass
class Score:
    hits: dict[int, int] = field(default_factory=lambda: {k: 0 for k in KS})
    in_block: int = 0
    questions: int = 0

    def add(self, rank: int | None, in_block: bool) -> None:
        self.questions += 1
        self.in_block += in_block
        for k in KS:
            self.hits[k] += rank is not None and rank < k

    def recall_at(self, k: int) -> float:
        return self.hits[k] / self.questions if self.questions else 0.0

    def as_dict(self) -> dict[str, Any]:
        figures: dict[str, Any] = {f"@{k}": round(self.recall_at(k), 4) for k in KS}
        figures["in_block"] = round(self.in_block / self.questions, 4) if self.questions else 0.0
        figures["questions"] = self.questions
        return figures


@dataclass
class EvalReport:
    overall: Score
    categories: dict[str, Score]
    per_path: dict[str, Score]  # a path measured alone (diagnostic: not the round start's path)
    contributed: dict[str, int]  # the paths that found the first evidence hit in the top 10
    retrieval_paths: dict[str, int]
    tokens: list[int]
    latencies: list[float]
    settings: dict[str, Any]

    @property
    def questions(self) -> int:
        return self.overall.questions

    def as_dict(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "recall": self.overall.as_dict(),
            "categories": {name: score.as_dict() for name, score in self.categories.items()},
            "per_path": {name: score.as_dict() for name, score in self.per_path.items()},
            "contributed": self.contributed,
            "retrieval_paths": self.retrieval_paths,
            "block_tokens": {
                "mean": round(statistics.fmean(self.tokens), 1) if self.tokens else 0.0,
                "p95": percentile(self.tokens, 95),
                "max": max(self.tokens, default=0),
            },
            "latency_ms": {
                "p50": round(percentile(self.latencies, 50), 2),
                "p95": round(percentile(self.latencies, 95), 2),
            },
            "settings": self.settings,
        }

    def table(self) -> str:
        figures = self.as_dict()
        lines = [
            f"Evidence recall on {self.questions} questions, at round start (ranked list; 'block': in the block)",
            "category        | n    | @1    | @5    | @10   | block",
            "----------------|------|-------|-------|-------|------",
        ]
        rows = [*self.categories.items(), ("all", self.overall)]
        rows += [(f"{name} alone", score) for name, score in self.per_path.items()]
        for name, score in rows:
            ks = " | ".join(f"{score.recall_at(k):.3f}" for k in KS)
            block = score.in_block / score.questions if score.questions else 0.0
            lines.append(f"{name:<16}| {score.questions:<5}| {ks} | {block:.3f}")
        tokens, latency = figures["block_tokens"], figures["latency_ms"]
        lines.append(
            f"block tokens mean {tokens['mean']:.0f}, p95 {tokens['p95']}, max {tokens['max']}; "
            f"search p50 {latency['p50']:.2f} ms, p95 {latency['p95']:.2f} ms"
        )
        lines.append(f"paths of the first evidence hit: {self.contributed}; retrieval paths: {self.retrieval_paths}")
        lines.append(f"settings: {self.settings}")
        return "\n".join(lines)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))] if ordered else 0.0


def first_evidence(hits: Sequence[RecallHit], evidence: set[str], provenance: dict[tuple[str, int], str]) -> int | None:
    """The rank of the first hit whose provenance holds an evidence turn (None: no hit does)."""
    for rank, hit in enumerate(hits):
        if evidence & {provenance.get(source) for source in hit.sources}:
            return rank
    return None


async def evaluate(
    backend: MemoryBackend,
    samples: Sequence[Sample],
    *,
    embedder: Embeddings | None = None,
    settings: RecallSettings | None = None,
    per_path: bool = False,
    ingest: Ingest = ingest_directly,
) -> EvalReport:
    """Ingest every sample (one user each), index it as the background job does, then ask every scored question
    in a new conversation of its user through `round_recall`. `per_path` also measures each path alone."""
    settings = settings or RecallSettings()
    report = EvalReport(Score(), {}, {}, {}, {}, [], [], {})
    for sample in samples:
        async with backend.connection() as conn:
            provenance = await ingest(conn, sample)
            if embedder is not None:
                await index_items(conn, tenant_id=EVAL_TENANT, user_id=sample.sample_id, embedder=embedder)
        for question in filter(scored, sample.questions):
            evidence = set(question.evidence)
            key = ConversationKey(f"{sample.sample_id}:question-{uuid.uuid4().hex[:8]}", sample.sample_id, EVAL_TENANT)
            recalled = await round_recall(backend, key, question.question, settings, embedder=embedder)
            if recalled.result is None:
                raise RuntimeError(f"recall failed in the evaluation: {recalled.error}")
            result = recalled.result
            rank = first_evidence(result.ranked, evidence, provenance)
            in_block = first_evidence(result.results, evidence, provenance) is not None
            report.overall.add(rank, in_block)
            category = CATEGORIES.get(question.category or 0, f"category {question.category}")
            report.categories.setdefault(category, Score()).add(rank, in_block)
            if rank is not None:
                for path in result.ranked[rank].paths:
                    report.contributed[path] = report.contributed.get(path, 0) + 1
            report.retrieval_paths[result.retrieval_path] = report.retrieval_paths.get(result.retrieval_path, 0) + 1
            report.tokens.append(result.estimated_tokens)
            report.latencies.append(recalled.latency_ms or 0.0)
            if per_path:
                async with backend.connection() as conn:
                    for path in PATHS:
                        alone = await recall(
                            conn,
                            tenant_id=EVAL_TENANT,
                            user_id=sample.sample_id,
                            query=question.question,
                            embedder=embedder,
                            settings=settings,
                            paths=(path,),
                        )
                        rank = first_evidence(alone.ranked, evidence, provenance)
                        in_block = first_evidence(alone.results, evidence, provenance) is not None
                        report.per_path.setdefault(path, Score()).add(rank, in_block)
    report.categories = dict(sorted(report.categories.items()))
    report.settings = {
        "text_search_config": settings.text_search_config,
        "or_terms": settings.or_terms,
        "max_turns": settings.max_turns,
        "max_tokens": settings.max_tokens,
        "embedder": model_name(embedder) if embedder is not None else None,
    }
    return report
