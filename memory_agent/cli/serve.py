"""`memory-agent serve` (the HTTP API under uvicorn) and `memory-agent api-key create` (a tenant's key)."""

from __future__ import annotations

from typing import Any

import typer


def create_key(tenant_id: str, settings: Any = None) -> str:
    """A new API key of `tenant_id` in the configured database (migrated first, like any service start)."""
    from memory_agent.api.keys import create_api_key
    from memory_agent.service import MemoryService

    with MemoryService.from_settings(settings) as service:

        async def create() -> str:
            async with service.backend.pool.connection() as conn, conn.transaction():
                return await create_api_key(conn, tenant_id)

        key: str = service.loop.run(create())
        return key


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every interface)."),
        port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on."),
    ) -> None:
        """Serve the HTTP API (OpenAPI at /docs) over the service MEMORY_AGENT_* configures."""
        import uvicorn

        from memory_agent.api import create_app

        uvicorn.run(create_app(), host=host, port=port)

    keys = typer.Typer(help="API keys of the HTTP API: one tenant each, stored hashed.", no_args_is_help=True)
    app.add_typer(keys, name="api-key")

    @keys.command("create")
    def create(tenant: str = typer.Option(..., "--tenant", help="The tenant the key reads and deletes in.")) -> None:
        """Create a key of a tenant and print it: it is shown once (only its hash is stored)."""
        from memory_agent.errors import MemoryAgentError

        try:
            key = create_key(tenant)
        except MemoryAgentError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(key)
