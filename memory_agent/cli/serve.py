"""`memory-agent serve` (the HTTP API under uvicorn) and `memory-agent api-key create | list | revoke`.

Both need the `api` extra (fastapi, uvicorn): without it they say how to install it, no traceback. The key
commands open the database only (no summary model is made, so nothing warns about a missing OpenAI key).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import typer

T = TypeVar("T")


def api_extra() -> str:
    from memory_agent.resources import install_hint

    return f"the HTTP API needs the api extra: {install_hint('api')}"


def _require_api_extra() -> None:
    """Exit 2 with the install line when fastapi or uvicorn is missing."""
    import importlib.util

    missing = [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        typer.echo(f"error: {api_extra()} ({', '.join(missing)} not installed)", err=True)
        raise typer.Exit(2)


def _on_keys(work: Callable[[Any], Coroutine[Any, Any, T]], settings: Any = None) -> T:
    """Run `work(conn)` in one transaction on the configured database (migrated first, like any service start)."""
    from memory_agent.cli.output import _opened

    with _opened(settings) as service:

        async def run() -> T:
            async with service.backend.session(transaction=True) as conn:
                return await work(conn)

        return service.loop.run(run())


def _checked_start() -> tuple[Any, Any]:
    """The settings and consolidation model the served app will use, after opening (and closing) the service it
    will open: a setting, model or database that cannot work stops `serve` here with one line and exit 2. Found
    in uvicorn's startup instead, it would be a traceback and exit 3."""
    from memory_agent.llm import default_chat_model
    from memory_agent.service import MemoryService
    from memory_agent.settings import MemorySettings

    settings = MemorySettings()
    consolidation_model = default_chat_model(settings, "consolidation")
    with MemoryService.from_settings(settings):
        pass
    return settings, consolidation_model


def create_key(tenant_id: str, settings: Any = None) -> str:
    """A new API key of `tenant_id` in the configured database."""
    from memory_agent.api.keys import create_api_key

    return _on_keys(lambda conn: create_api_key(conn, tenant_id), settings)


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every interface)."),
        port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on."),
    ) -> None:
        """Serve the HTTP API (OpenAPI at /docs) over the service MEMORY_AGENT_* configures."""
        _require_api_extra()
        import uvicorn

        from memory_agent.api import create_app

        settings, consolidation_model = _checked_start()
        uvicorn.run(create_app(settings=settings, consolidation_model=consolidation_model), host=host, port=port)

    keys = typer.Typer(help="API keys of the HTTP API: one tenant each, stored hashed.", no_args_is_help=True)
    app.add_typer(keys, name="api-key")

    @keys.command("create")
    def create(tenant: str = typer.Option(..., "--tenant", help="The tenant the key reads and deletes in.")) -> None:
        """Create a key of a tenant and print it: it is shown once (only its hash is stored)."""
        _require_api_extra()
        typer.echo(create_key(tenant))

    @keys.command("list")
    def list_keys(
        tenant: str = typer.Option(None, "--tenant", help="Only this tenant's keys (default: every tenant's)."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    ) -> None:
        """List the keys by their prefix (the key itself is never stored), live or revoked."""
        _require_api_extra()
        from rich.console import Console

        from memory_agent.api.keys import list_api_keys
        from memory_agent.cli.output import _print_json, _rows

        rows = _on_keys(lambda conn: list_api_keys(conn, tenant))
        columns = {"key_prefix": "key", "tenant_id": "tenant", "created_at": "created", "revoked_at": "revoked"}
        if as_json:
            _print_json(rows)
        else:
            Console().print(_rows("API keys", rows, columns))

    @keys.command("revoke")
    def revoke(
        key: str = typer.Argument(..., help="The key's prefix, as `api-key list` shows it, or the whole key."),
    ) -> None:
        """Revoke a key: its requests answer 401 from now on. A prefix shared by several live keys is refused."""
        _require_api_extra()
        from memory_agent.api.keys import revoke_api_key

        revoked = _on_keys(lambda conn: revoke_api_key(conn, key))
        typer.echo(f"revoked {revoked['key_prefix']} of tenant {revoked['tenant_id']}")
