"""`memory-agent eval recall`: recall quality on a LoCoMo-format dataset, in a database of its own."""

from __future__ import annotations

import asyncio
import json
import uuid
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
) -> Any:
    """Evaluate on a new database of `server_url` (migrated, dropped at the end): the dataset's users never mix
    with real ones. The recall settings and the embedder are the service's (MEMORY_AGENT_RECALL_*,
    MEMORY_AGENT_EMBEDDINGS) unless given here."""
    import psycopg

    from memory_agent.db.backend import MemoryBackend
    from memory_agent.db.connector import execute_query
    from memory_agent.evaluation import evaluate, load_dataset
    from memory_agent.long_term.embedders import embedder_from_setting
    from memory_agent.settings import MemorySettings

    samples = load_dataset(dataset)
    service_settings = MemorySettings()
    settings = service_settings.recall.replace(
        text_search_config=text_search_config or service_settings.recall.text_search_config, or_terms=or_terms
    )
    if embedder is not None and embedder not in ("none", "hashing", "e5"):
        raise typer.BadParameter(f"unknown embedder {embedder!r}: use one of e5, hashing, none")
    chosen = embedder_from_setting(embedder or service_settings.long_term.embeddings)
    name = f"memory_agent_eval_{uuid.uuid4().hex[:10]}"
    params = psycopg.conninfo.conninfo_to_dict(server_url)
    async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as admin:
        await execute_query(admin, psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    try:
        url = psycopg.conninfo.make_conninfo("", **{**params, "dbname": name})
        pool = MemoryBackend.create_pool(url)
        await pool.open(wait=True)
        try:
            backend = MemoryBackend(pool)
            await backend.setup()
            return await evaluate(backend, samples, embedder=chosen, settings=settings, per_path=per_path)
        finally:
            await pool.close()
    finally:
        async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as admin:
            await execute_query(
                admin, psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(psycopg.sql.Identifier(name))
            )


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
    database_url: str | None = typer.Option(
        None,
        help="A PostgreSQL server URL (a scratch database is made and dropped); default: a temporary embedded server.",
    ),
) -> None:
    """Evidence recall@1/@5/@10 per LoCoMo category through the round start's recall, in the block too; block
    tokens, search latency p50/p95, the paths that found the evidence."""
    try:
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
            )
        )
    except MemoryAgentError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(report.as_dict(), indent=1) if as_json else report.table())


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
