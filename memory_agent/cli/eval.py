"""`memory-agent eval recall`: recall quality on a LoCoMo-format dataset, in a database of its own."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from memory_agent.errors import MemoryAgentError

eval_app = typer.Typer(help="Measure memory_agent's quality on a dataset.", no_args_is_help=True)


async def run_recall_eval(
    server_url: str,
    dataset: Path,
    *,
    embedder: str = "hashing",
    text_search_config: str = "english",
    or_terms: bool = True,
) -> Any:
    """Evaluate on a new database of `server_url` (migrated, dropped at the end): the dataset's users never mix
    with real ones."""
    import psycopg

    from memory_agent.db.backend import MemoryBackend
    from memory_agent.long_term.embeddings import BundledE5Embeddings, HashingEmbeddings
    from memory_agent.long_term.eval import evaluate, load_dataset
    from memory_agent.long_term.recall import RecallSettings

    samples = load_dataset(dataset)
    settings = RecallSettings(text_search_config=text_search_config, or_terms=or_terms)
    embedders: dict[str, Callable[[], Any]] = {
        "hashing": HashingEmbeddings,
        "e5": BundledE5Embeddings,
        "none": lambda: None,
    }
    if embedder not in embedders:
        raise typer.BadParameter(f"unknown embedder {embedder!r}: use one of {sorted(embedders)}")
    chosen = embedders[embedder]()
    name = f"memory_agent_eval_{uuid.uuid4().hex[:10]}"
    params = psycopg.conninfo.conninfo_to_dict(server_url)
    async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as admin:
        await admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    try:
        url = psycopg.conninfo.make_conninfo("", **{**params, "dbname": name})
        pool = MemoryBackend.create_pool(url)
        await pool.open(wait=True)
        try:
            await MemoryBackend(pool).setup()
            async with pool.connection() as conn:
                return await evaluate(conn, samples, embedder=chosen, settings=settings)
        finally:
            await pool.close()
    finally:
        async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as admin:
            await admin.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(psycopg.sql.Identifier(name))
            )


@eval_app.command("recall")
def recall_command(
    dataset: Path = typer.Option(..., "--dataset", exists=True, dir_okay=False, help="A LoCoMo-format JSON file."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    embedder: str = typer.Option(
        "hashing", help="Vectors: 'hashing' (offline, deterministic), 'e5' (the embeddings extra) or 'none'."
    ),
    text_search_config: str = typer.Option("english", help="The text-search configuration to measure."),
    and_terms: bool = typer.Option(
        False, "--and-terms", help="AND the query's terms (the design's first choice) instead of OR."
    ),
    database_url: str | None = typer.Option(
        None,
        help="A PostgreSQL server URL (a scratch database is made and dropped); default: a temporary embedded server.",
    ),
) -> None:
    """Evidence recall@1/@5/@10 per path (fts, trgm, vector, fused), mean block tokens, recall latency p50/p95."""
    try:
        if database_url is None:
            from memory_agent.db.embedded import scratch_data_dir, start_embedded_postgres

            database_url = start_embedded_postgres(scratch_data_dir("memory_agent_eval_"), cleanup_mode="delete")
        report = asyncio.run(
            run_recall_eval(
                database_url, dataset, embedder=embedder, text_search_config=text_search_config, or_terms=not and_terms
            )
        )
    except MemoryAgentError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(report.as_dict(), indent=1) if as_json else report.table())


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
