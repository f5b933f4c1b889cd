"""`memory-agent mcp`: the MCP server (memory_agent/mcp_server.py) over stdio or streamable HTTP.

Needs the `mcp` extra: without it the command says how to install it, no traceback. Over stdio, nothing but the
protocol is written to standard output (logs go to standard error).
"""

from __future__ import annotations

import os

import typer

MCP_EXTRA = "the MCP server needs the mcp extra: pip install -e '.[mcp]' (in a checkout of memory_agent)"


def register(app: typer.Typer) -> None:
    @app.command()
    def mcp(
        transport: str = typer.Option("stdio", help="stdio (a client starts this command) or streamable-http."),
        user_id: str = typer.Option(
            None, "--user-id", "--user", help="stdio: the one user served (default: MEMORY_AGENT_MCP_USER_ID)."
        ),
        tenant_id: str = typer.Option(
            None,
            "--tenant-id",
            "--tenant",
            help="stdio: the user's tenant (default: MEMORY_AGENT_MCP_TENANT_ID, else default).",
        ),
        host: str = typer.Option("127.0.0.1", help="streamable-http: address to listen on."),
        port: int = typer.Option(8001, min=1, max=65535, help="streamable-http: port to listen on."),
    ) -> None:
        """Serve a user's long-term memory to MCP clients: tools recall, remember, forget, list_memories.
        Over HTTP the tenant is the API key's (memory-agent api-key create) and each call names its user."""
        import importlib.util

        if importlib.util.find_spec("mcp") is None:
            typer.echo(f"error: {MCP_EXTRA}", err=True)
            raise typer.Exit(2)
        if transport not in ("stdio", "streamable-http"):
            typer.echo(f"error: --transport must be stdio or streamable-http, got {transport!r}", err=True)
            raise typer.Exit(2)
        from memory_agent.errors import MemoryAgentError
        from memory_agent.long_term.memory import user_scope
        from memory_agent.mcp_server import Identity, build_server, keyed_app
        from memory_agent.service import MemoryService

        if transport == "stdio":
            user = user_id or os.environ.get("MEMORY_AGENT_MCP_USER_ID")
            tenant = tenant_id or os.environ.get("MEMORY_AGENT_MCP_TENANT_ID") or None
            if not user:
                typer.echo("error: name the user served: --user-id or MEMORY_AGENT_MCP_USER_ID", err=True)
                raise typer.Exit(2)
            try:
                user_scope(user, tenant)
            except MemoryAgentError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(2) from None
            identity = Identity(user_id=user, tenant_id=tenant)
        else:
            if user_id or tenant_id:
                typer.echo("error: over HTTP the API key names the tenant and each call its user", err=True)
                raise typer.Exit(2)
            if importlib.util.find_spec("uvicorn") is None:
                typer.echo("error: HTTP needs the api extra too: pip install -e '.[mcp,api]'", err=True)
                raise typer.Exit(2)
            identity = Identity(user_id=None, tenant_id=None, by_key=True)
        try:
            with MemoryService.from_settings() as memory:
                server = build_server(memory, identity)
                if transport == "stdio":
                    server.run("stdio")
                else:
                    import uvicorn

                    uvicorn.run(keyed_app(memory, server, host=host), host=host, port=port, log_level="warning")
        except MemoryAgentError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
