"""Recall quality on a LoCoMo-format dataset, measured the way an app runs it.

A dataset is LoCoMo's JSON: a list of samples (or one flat sample), each a two-speaker conversation in
numbered sessions (`session_N`, `session_N_date_time`) of turns (`speaker`, `dia_id` "DN:M", `text`) and `qa`
(question, evidence dia_ids, category; category 5 is adversarial). Each sample becomes one user, each session one
conversation (`speaker_a` the user, `speaker_b` the assistant, each turn carrying its speaker's name as a chat
message's `name`). With a service (`memory`: what `eval recall` runs), every turn is stored by its `with_memory`
rounds and the summaries, items and vectors are the service's background work, its periodic catch-up run once
after (rounds.py); without one (tests of recall itself), the sample is written into the tables (`ingest`) and
indexed as the summary job indexes.

Each question is then asked as the first message of a new conversation of that user, through `round_recall`:
the statement, settings, scope switch, guardrails and block a round start uses. A result is a hit when its
provenance (the turns behind it, neighbours shown with it included) holds an evidence turn; the hit's own turn
is counted beside it (scores.py). @k is read on the ranked list (the first k of the fused ranking, up to 10);
"in block" on what the guardrails let into the block the model gets (at most `max_turns` turns and
`max_tokens`), counting only the turns it shows whole (a neighbour cut at `max_neighbour_chars` is not). Categories 1-4 are scored so; the fraction of evidence turns found @5 and @10 is over all five
(the published form). `evidence_key` (question → dia ids) corrects the dataset's evidence.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from langchain_core.embeddings import Embeddings

from memory_agent.db.connector import Connector
from memory_agent.errors import InvalidInputError
from memory_agent.evaluation.dataset import EVAL_TENANT, Question, Sample, load_dataset, scored
from memory_agent.evaluation.ingest import Ingest, ingest_directly, store_conversation, store_item
from memory_agent.evaluation.rounds import (
    ReplayClock,
    catch_up,
    last_turn_at,
    load_through_rounds,
    turns_without_vector,
)
from memory_agent.evaluation.scores import EvalReport, Score, first_evidence
from memory_agent.long_term.embeddings import index_items, model_name
from memory_agent.long_term.recall import RecallSettings, SearchPath, recall
from memory_agent.long_term.recall.round_start import round_recall
from memory_agent.schemas.keys import ConversationKey
from memory_agent.service import MemoryService

__all__ = ["EvalReport", "evaluate", "ingest_directly", "load_dataset", "store_conversation", "store_item"]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
PATHS: tuple[SearchPath, ...] = ("fts", "trgm", "vector")


async def _load(
    backend: Connector,
    sample: Sample,
    report: EvalReport,
    *,
    memory: MemoryService | None,
    ingest: Ingest,
    embedder: Embeddings | None,
) -> dict[tuple[str, int], str]:
    """The sample stored (through the service's rounds with `memory`, else by `ingest` and indexed), and for the
    service with an embedder, its turns without a vector counted after the drain and after the catch-up."""
    if memory is None:
        async with backend.session() as conn:
            provenance = await ingest(conn, sample)
            if embedder is not None:
                await index_items(conn, tenant_id=EVAL_TENANT, user_id=sample.sample_id, embedder=embedder)
        return provenance
    clock = memory.clock
    if not isinstance(clock, ReplayClock):
        raise TypeError("evaluate(memory=...) needs a service opened with clock=ReplayClock(...)")
    provenance = await load_through_rounds(memory, sample, clock)
    async with backend.session() as conn:
        drained = await turns_without_vector(conn, memory, sample.sample_id)
        await catch_up(memory)
        caught_up = await turns_without_vector(conn, memory, sample.sample_id)
    if memory.embedder is not None:
        missing = report.turns_without_vector
        missing["after_drain"] = missing.get("after_drain", 0) + drained
        missing["after_catch_up"] = missing.get("after_catch_up", 0) + caught_up
    return provenance


def corrected(question: Question, evidence_key: Mapping[str, Sequence[str]] | None) -> set[str]:
    """The question's evidence turns, as `evidence_key` gives them when it names the question."""
    if evidence_key is not None and question.question in evidence_key:
        return set(evidence_key[question.question])
    return set(question.evidence)


def check_evidence_key(samples: Sequence[Sample], evidence_key: Mapping[str, Sequence[str]]) -> None:
    """InvalidInputError for a question the samples lack or a dia id that is no turn of a conversation asking it:
    either would be scored as evidence never found, figures wrong without a word."""
    turns: dict[str, set[str]] = {}
    for sample in samples:
        ids = {turn.dia_id for session in sample.sessions for turn in session.turns}
        for question in sample.questions:
            turns.setdefault(question.question, set()).update(ids)
    for text, evidence in evidence_key.items():
        if text not in turns:
            raise InvalidInputError(
                f"the evidence key names a question the dataset does not have: {text!r} (the key's questions "
                "are the dataset's `question` texts, exactly)"
            )
        unknown = [dia_id for dia_id in evidence if dia_id not in turns[text]]
        if unknown:
            raise InvalidInputError(
                f"the evidence key's question {text!r}: {unknown[0]!r} is no turn of its conversation "
                "(a dia id such as 'D3:14' of a turn with text)"
            )


@dataclass(frozen=True)
class DirectLoad:
    """How an evaluation without a service loads and recalls: `ingest` writes the samples, `embedder` indexes them
    as the summary job would and embeds the questions, `settings` are recall's (default: RecallSettings())."""

    embedder: Embeddings | None = None
    settings: RecallSettings | None = None
    ingest: Ingest = ingest_directly


async def evaluate(
    backend: Connector,
    samples: Sequence[Sample],
    *,
    memory: MemoryService | None = None,
    direct: DirectLoad = DirectLoad(),
    per_path: bool = False,
    evidence_key: Mapping[str, Sequence[str]] | None = None,
) -> EvalReport:
    """Load every sample (one user each): through `memory`'s rounds when given (then its embedder and recall
    settings are the ones measured), else as `direct` says; then ask every question in a new conversation of its
    user through `round_recall`. `per_path` also measures each path alone."""
    if evidence_key is not None:
        check_evidence_key(samples, evidence_key)
    embedder, settings, ingest = direct.embedder, direct.settings, direct.ingest
    if memory is not None:
        backend, embedder, settings = memory.backend, memory.embedder, settings or memory.settings.recall
    settings = settings or RecallSettings()
    report = EvalReport(Score(), {}, {}, {}, {}, [], [], {})
    for sample in samples:
        provenance = await _load(backend, sample, report, memory=memory, ingest=ingest, embedder=embedder)
        # The questions come after the conversation: asked at its last turn's time, as a round of the app then
        # would be (the service's clock, which the round start's date expressions are read against).
        now = last_turn_at(sample)
        if memory is not None and now is not None:
            assert isinstance(memory.clock, ReplayClock)  # _load checked it
            memory.clock.now = now
            now = memory.clock()
        for question in sample.questions:
            evidence = corrected(question, evidence_key)
            if not evidence:
                continue
            key = ConversationKey(f"{sample.sample_id}:question-{uuid.uuid4().hex[:8]}", sample.sample_id, EVAL_TENANT)
            recalled = await round_recall(backend, key, question.question, settings, now=now, embedder=embedder)
            if recalled.result is None:
                raise RuntimeError(f"recall failed in the evaluation: {recalled.error}")
            result = recalled.result
            report.evidence_fraction.add(result.ranked, evidence, provenance)
            if not scored(question):
                continue
            rank = first_evidence(result.ranked, evidence, provenance)
            own = first_evidence(result.ranked, evidence, provenance, own=True)
            in_block = first_evidence(result.results, evidence, provenance, whole=True) is not None
            report.overall.add(rank, in_block, own)
            category = CATEGORIES.get(question.category or 0, f"category {question.category}")
            report.categories.setdefault(category, Score()).add(rank, in_block, own)
            if rank is not None:
                for path in result.ranked[rank].paths:
                    report.contributed[path] = report.contributed.get(path, 0) + 1
            report.retrieval_paths[result.retrieval_path] = report.retrieval_paths.get(result.retrieval_path, 0) + 1
            report.tokens.append(result.estimated_tokens)
            report.latencies.append(recalled.latency_ms or 0.0)
            if per_path:
                await _per_path(backend, report, sample, question.question, evidence, provenance, embedder, settings)
    report.categories = dict(sorted(report.categories.items()))
    report.settings = {
        "text_search_config": settings.text_search_config,
        "or_terms": settings.or_terms,
        "max_turns": settings.max_turns,
        "max_tokens": settings.max_tokens,
        "embedder": model_name(embedder) if embedder is not None else None,
        "loaded": "rounds through the service" if memory is not None else "written into the tables",
        "evidence_key": evidence_key is not None,
    }
    return report


async def _per_path(
    backend: Connector,
    report: EvalReport,
    sample: Sample,
    query: str,
    evidence: set[str],
    provenance: dict[tuple[str, int], str],
    embedder: Embeddings | None,
    settings: RecallSettings,
) -> None:
    """Each path alone (a diagnostic: not the round start's path)."""
    async with backend.session() as conn:
        for path in PATHS:
            alone = await recall(
                conn,
                tenant_id=EVAL_TENANT,
                user_id=sample.sample_id,
                query=query,
                embedder=embedder,
                settings=settings,
                paths=(path,),
            )
            rank = first_evidence(alone.ranked, evidence, provenance)
            own = first_evidence(alone.ranked, evidence, provenance, own=True)
            in_block = first_evidence(alone.results, evidence, provenance, whole=True) is not None
            report.per_path.setdefault(path, Score()).add(rank, in_block, own)
