"""What `eval recall` reports: evidence recall @k (any hit, and the hit's own turn), in the block, per category
and per path alone; the fraction of evidence turns found over all five categories (the published form); block
tokens, latency, the paths that found the evidence, and how many turns lacked a vector."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_agent.long_term.recall.block import RecallHit

KS = (1, 5, 10)
FRACTION_KS = (5, 10)


@dataclass
class Score:
    """Any-hit @k (a hit whose provenance, neighbours shown with it included, holds an evidence turn), the hit's
    own turn @k (a turn hit's own sequence, an item's source turns: neighbours not counted), in the block."""

    hits: dict[int, int] = field(default_factory=lambda: {k: 0 for k in KS})
    own: dict[int, int] = field(default_factory=lambda: {k: 0 for k in KS})
    in_block: int = 0
    questions: int = 0

    def add(self, rank: int | None, in_block: bool, own_rank: int | None = None) -> None:
        self.questions += 1
        self.in_block += in_block
        for k in KS:
            self.hits[k] += rank is not None and rank < k
            self.own[k] += own_rank is not None and own_rank < k

    def recall_at(self, k: int) -> float:
        return self.hits[k] / self.questions if self.questions else 0.0

    def own_at(self, k: int) -> float:
        return self.own[k] / self.questions if self.questions else 0.0

    def as_dict(self) -> dict[str, Any]:
        figures: dict[str, Any] = {f"@{k}": round(self.recall_at(k), 4) for k in KS}
        figures["in_block"] = round(self.in_block / self.questions, 4) if self.questions else 0.0
        figures["own_turn"] = {f"@{k}": round(self.own_at(k), 4) for k in KS}
        figures["questions"] = self.questions
        return figures


@dataclass
class EvidenceFraction:
    """The published form (the LoCoMo paper's): the fraction of a question's evidence turns found among the first
    k hits' turns, averaged over the questions of all five categories."""

    found: dict[int, float] = field(default_factory=lambda: {k: 0.0 for k in FRACTION_KS})
    questions: int = 0

    def add(self, hits: Sequence[RecallHit], evidence: set[str], provenance: dict[tuple[str, int], str]) -> None:
        self.questions += 1
        for k in FRACTION_KS:
            seen = {provenance.get(source) for hit in hits[:k] for source in hit.sources}
            self.found[k] += len(evidence & seen) / len(evidence)

    def as_dict(self) -> dict[str, Any]:
        figures: dict[str, Any] = {
            f"@{k}": round(self.found[k] / self.questions, 4) if self.questions else 0.0 for k in FRACTION_KS
        }
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
    evidence_fraction: EvidenceFraction = field(default_factory=EvidenceFraction)
    # The evaluated user's turns without a vector when the questions were asked (app path with an embedder):
    # after the service's background work drained, and after its periodic catch-up too.
    turns_without_vector: dict[str, int] = field(default_factory=dict)
    # What the load wrote (summaries, item rows, cluster summaries, items per summary), when it was counted.
    volume: dict[str, Any] = field(default_factory=dict)

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
            "evidence_fraction_all_categories": self.evidence_fraction.as_dict(),
            "turns_without_vector": self.turns_without_vector,
            "volume": self.volume,
            "settings": self.settings,
        }

    def table(self) -> str:
        figures = self.as_dict()
        lines = [
            f"Evidence recall on {self.questions} questions, at round start (ranked list; 'block': in the block)",
            "category        | n    | @1    | @5    | @10   | block | own turn @1/@5/@10",
            "----------------|------|-------|-------|-------|-------|-------------------",
        ]
        rows = [*self.categories.items(), ("all", self.overall)]
        rows += [(f"{name} alone", score) for name, score in self.per_path.items()]
        for name, score in rows:
            ks = " | ".join(f"{score.recall_at(k):.3f}" for k in KS)
            block = score.in_block / score.questions if score.questions else 0.0
            own = "/".join(f"{score.own_at(k):.3f}" for k in KS)
            lines.append(f"{name:<16}| {score.questions:<5}| {ks} | {block:.3f} | {own}")
        fraction = figures["evidence_fraction_all_categories"]
        lines.append(
            f"evidence turns found (all five categories, {fraction['questions']} questions): "
            f"@5 {fraction['@5']:.3f}, @10 {fraction['@10']:.3f}"
        )
        if self.turns_without_vector:
            lines.append(f"turns without a vector when the questions were asked: {self.turns_without_vector}")
        tokens, latency = figures["block_tokens"], figures["latency_ms"]
        lines.append(
            f"block tokens mean {tokens['mean']:.0f}, p95 {tokens['p95']}, max {tokens['max']}; "
            f"search p50 {latency['p50']:.2f} ms, p95 {latency['p95']:.2f} ms"
        )
        lines.append(f"paths of the first evidence hit: {self.contributed}; retrieval paths: {self.retrieval_paths}")
        if self.volume:
            lines.append(f"written by the load: {self.volume}")
        lines.append(f"settings: {self.settings}")
        return "\n".join(lines)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))] if ordered else 0.0


def first_evidence(
    hits: Sequence[RecallHit],
    evidence: set[str],
    provenance: dict[tuple[str, int], str],
    *,
    own: bool = False,
    whole: bool = False,
) -> int | None:
    """The rank of the first hit whose provenance holds an evidence turn (None: no hit does); `own`: the hit's own
    turns only (a turn's own sequence, not the neighbours shown with it); `whole`: the turns whose text it shows
    whole only (a neighbour cut at the neighbour cap is not in the model's input, whatever its provenance says)."""
    for rank, hit in enumerate(hits):
        turns = own_turns(hit) if own else hit.shown_whole() if whole else hit.sources
        if evidence & {provenance.get(source) for source in turns}:
            return rank
    return None


def own_turns(hit: RecallHit) -> list[tuple[str, int]]:
    """A turn hit's own (conversation, sequence); any other hit's sources (an item's turns)."""
    if hit.kind == "turn" and hit.conversation_id is not None:
        return [(hit.conversation_id, sequence) for sequence in hit.sequences]
    return list(hit.sources)
