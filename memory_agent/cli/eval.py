"""`memory-agent eval recall`: recall quality on a LoCoMo-format dataset, in a database of its own."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from memory_agent.errors import MemoryAgentError

eval_app = typer.Typer(help="Measure memory_agent's quality on a dataset.", no_args_is_help=True)


async def run_recall_eval(
    server_url: str,
    dataset: Path,
    *,
    embedder: str | None = None,
    text_search_config: str | None = None,
    or_terms: bool = True,
    per_path: bool = False,
    evidence_key: Path | None = None,
    summarizer: str = "offline",
) -> Any:
    """Evaluate on a new database of `server_url` (migrated, dropped at the end): the dataset's users never mix
    with real ones. The dataset is loaded as an app stores conversations: a MemoryService (the offline summarizer,
    the inline executor) stores every turn through `with_memory` rounds and does the background work. The recall
    settings and the embedder are the service's (MEMORY_AGENT_RECALL_*, MEMORY_AGENT_EMBEDDINGS) unless given
    here. `evidence_key`: a JSON object of question → evidence dia ids that replaces the dataset's. `summarizer`:
    "offline" (the offline extractive model) or "replay" (evaluation.replay: the facts and session summaries the
    dataset's own `observation` and `session_summary` fields hold, answered through the same summary calls)."""
    from memory_agent.evaluation import evaluate, load_dataset
    from memory_agent.evaluation.replay import ReplaySummaryModel
    from memory_agent.evaluation.rounds import ReplayClock, long_term_volume
    from memory_agent.llm import OfflineSummaryModel
    from memory_agent.long_term.embedders import embedder_from_setting
    from memory_agent.service import MemoryService
    from memory_agent.settings import MemorySettings
    from memory_agent.testing.queries import create_database, drop_database

    if summarizer not in ("offline", "replay"):
        raise typer.BadParameter(f"unknown summarizer {summarizer!r}: use offline or replay")
    samples = load_dataset(dataset)
    model = OfflineSummaryModel() if summarizer == "offline" else ReplaySummaryModel.from_file(dataset)
    key = load_evidence_key(evidence_key) if evidence_key is not None else None
    if embedder is not None and embedder not in ("none", "hashing", "e5"):
        raise typer.BadParameter(f"unknown embedder {embedder!r}: use one of e5, hashing, none")
    service_settings = MemorySettings()
    recall = service_settings.recall.replace(
        text_search_config=text_search_config or service_settings.recall.text_search_config, or_terms=or_terms
    )
    chosen = embedder_from_setting(embedder or service_settings.long_term.embeddings)
    settings = service_settings.replace(executor="inline", event_loop="caller", long_term=True).model_copy(
        update={"recall": recall}
    )
    name = f"memory_agent_eval_{uuid.uuid4().hex[:10]}"
    url = await asyncio.to_thread(create_database, server_url, name)
    try:
        clock = ReplayClock(datetime.now(UTC))
        service = MemoryService(settings, model=model, database_url=url, clock=clock, embeddings=chosen)
        async with service as memory:
            report = await evaluate(memory.backend, samples, memory=memory, per_path=per_path, evidence_key=key)
            async with memory.backend.session() as conn:
                report.volume = await long_term_volume(conn)
            report.settings["summarizer"] = summarizer
            if isinstance(model, ReplaySummaryModel):
                report.volume["replay"] = dict(sorted(model.stats.items()))
            return report
    finally:
        await asyncio.to_thread(drop_database, server_url, name)


def load_evidence_key(path: Path) -> dict[str, list[str]]:
    """A corrected evidence key: a JSON object of question text → the dia ids ("D3:14") of its evidence turns."""
    from memory_agent.errors import InvalidInputError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"cannot read the evidence key {path}: {exc}") from exc
    valid = isinstance(data, dict) and all(
        isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in data.values()
    )
    if not valid:
        raise InvalidInputError(
            f"the evidence key {path} must be a JSON object of question → list of dia ids, such as "
            '{"When did Ana move?": ["D3:14"]}'
        )
    return data


@eval_app.command("recall")
def recall_command(
    dataset: Path = typer.Option(..., "--dataset", exists=True, dir_okay=False, help="A LoCoMo-format JSON file."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    embedder: str | None = typer.Option(
        None,
        help="Vectors: 'e5' (the bundled model, the embeddings extra), 'hashing' (offline, deterministic) or "
        "'none'; default: MEMORY_AGENT_EMBEDDINGS, as the service would.",
    ),
    text_search_config: str | None = typer.Option(
        None, help="The text-search configuration to measure; default: MEMORY_AGENT_RECALL_TEXT_SEARCH_CONFIG."
    ),
    and_terms: bool = typer.Option(
        False, "--and-terms", help="AND the query's terms (the design's first choice) instead of OR."
    ),
    per_path: bool = typer.Option(False, "--per-path", help="Also measure each retrieval path alone."),
    evidence_key: Path | None = typer.Option(
        None,
        "--evidence-key",
        exists=True,
        dir_okay=False,
        help="A corrected evidence key: a JSON object of question → evidence dia ids, replacing the dataset's.",
    ),
    summarizer: str = typer.Option(
        "offline",
        help="The summarizer the service runs: 'offline' (extractive copies, items by rule) or 'replay' (the "
        "dataset's own LLM-written `observation` facts and `session_summary` texts, answered for the messages each "
        "summary is asked about).",
    ),
    database_url: str | None = typer.Option(
        None,
        help="A PostgreSQL server URL (a scratch database is made and dropped); default: a temporary embedded server.",
    ),
) -> None:
    """Evidence recall@1/@5/@10 per LoCoMo category through the round start's recall, in the block too; block
    tokens, search latency p50/p95, the paths that found the evidence."""
    try:
        if evidence_key is not None:  # before a server starts and the dataset loads for minutes
            from memory_agent.evaluation import load_dataset
            from memory_agent.evaluation.recall import check_evidence_key

            check_evidence_key(load_dataset(dataset), load_evidence_key(evidence_key))
        if database_url is None:
            from memory_agent.db.embedded import scratch_data_dir, start_embedded_postgres
            from memory_agent.settings import MemorySettings

            database_url = start_embedded_postgres(
                scratch_data_dir("memory_agent_eval_"),
                cleanup_mode="delete",
                install_dir=MemorySettings().database.embedded_install_dir,
            )
        report = asyncio.run(
            run_recall_eval(
                database_url,
                dataset,
                embedder=embedder,
                text_search_config=text_search_config,
                or_terms=not and_terms,
                per_path=per_path,
                evidence_key=evidence_key,
                summarizer=summarizer,
            )
        )
    except MemoryAgentError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(report.as_dict(), indent=1) if as_json else report.table())


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
