"""Recall quality on a LoCoMo-format dataset: evidence recall@1/@5/@10 per path, block tokens, latency.

A dataset is LoCoMo's JSON: a list of samples (or one flat sample), each a two-speaker conversation in
numbered sessions (`session_N`, `session_N_date_time`) of turns (`speaker`, `dia_id` "DN:M", `text`) and `qa`
(question, evidence dia_ids, category; category 5 is adversarial and not scored). Each sample becomes one user,
each session one conversation, `speaker_a` the user and `speaker_b` the assistant. A result is a hit when its
provenance (the turns behind it) includes an evidence turn.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection

from memory_agent.long_term.embeddings import index_items
from memory_agent.long_term.eval_dataset import EVAL_TENANT, Sample, load_dataset, scored
from memory_agent.long_term.eval_ingest import Ingest, ingest_directly, store_conversation, store_item
from memory_agent.long_term.recall import ALL_PATHS, RecallSettings, SearchPath, recall

PATHS: dict[str, tuple[SearchPath, ...]] = {
    "fts": ("fts",),
    "trgm": ("trgm",),
    "vector": ("vector",),
    "fused": ALL_PATHS,
}
__all__ = ["EvalReport", "evaluate", "ingest_directly", "load_dataset", "store_conversation", "store_item"]

KS = (1, 5, 10)


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
