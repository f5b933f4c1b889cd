"""`memory-agent mcp`: a user's long-term memory over the Model Context Protocol (the official `mcp` SDK).

Four tools — recall, remember, forget, list_memories — over an open MemoryService, so Claude Desktop, an IDE agent
or any MCP client recalls and keeps memories through the same code paths as a round (recall's guardrails, the
item writer's validity rules, forgetting with lineage). Whose memory a call reaches:
- over stdio, one identity fixed when the server starts (`--user-id` / `--tenant-id`): a client cannot name
  another user;
- over streamable HTTP, the tenant of the request's API key (`Authorization: Bearer mak_…`, the keys of
  `memory-agent serve`, checked on every request and again by every tool call) and the user a call names.
A bad call (an unknown user's item, a reserved `conversation:` scope, an empty query) is a tool error naming the
problem; the server keeps serving. A top layer like api/ and cli/; needs the `mcp` extra (and `api` for HTTP).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from memory_agent.errors import MemoryAgentError
from memory_agent.long_term import LongTermItem
from memory_agent.long_term.recall.search import RecallResult
from memory_agent.schemas.keys import zone_named
from memory_agent.service import MemoryService

SERVER_NAME = "memory-agent"
INSTRUCTIONS = (
    "Long-term memory of one user: call recall before answering a question that may depend on what the user said "
    "before, remember to keep a durable fact or preference the user states, forget to erase an item they ask you to "
    "drop, list_memories to show what is kept."
)
MAX_ITEM_ID = 2**63 - 1  # items.item_id is a bigint: a larger number would fail in the database, unnamed


@dataclass(frozen=True)
class Identity:
    """Whose memory a call reaches: `user_id` fixed (stdio) or None (each call names its user, over HTTP);
    `tenant_id` fixed, or None to take the tenant of the request's API key."""

    user_id: str | None
    tenant_id: str | None
    by_key: bool = False


def _item(item: LongTermItem) -> dict[str, Any]:
    return {
        "item_id": item.item_id,
        "type": item.item_type,
        "key": item.key,
        "content": item.content,
        "importance": item.importance,
        "valid_from": item.valid_from.isoformat(),
        "valid_to": item.valid_to.isoformat() if item.valid_to else None,
        "is_summary": item.is_summary,
        "sources": [
            {"conversation_id": s.conversation_id, "memory_id": s.memory_id, "sequence": s.sequence_number}
            for s in item.sources
        ],
    }


def _bearer(ctx: Context) -> str | None:
    headers = ctx.headers or {}
    value = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, key = value.partition(" ")
    return key.strip() if scheme.lower() == "bearer" and key.strip() else None


def build_server(memory: MemoryService, identity: Identity) -> MCPServer:
    """The MCP server over `memory` (open, owned by the caller) for `identity`."""
    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS)

    async def whose(ctx: Context, user_id: str | None) -> tuple[str, str | None]:
        """(user, tenant) of a call; ToolError when the call may not name that user."""
        tenant = identity.tenant_id
        if identity.by_key:
            from memory_agent.api.limits import lookup_tenant

            key = _bearer(ctx)
            tenant = await lookup_tenant(memory, key) if key else None
            if tenant is None:
                raise ToolError("the API key is missing, revoked or not valid (Authorization: Bearer <key>)")
        if identity.user_id is not None:
            if user_id is not None and user_id != identity.user_id:
                raise ToolError(
                    f"this server serves user {identity.user_id!r} only (--user-id); a call cannot name another"
                )
            return identity.user_id, tenant
        if not user_id:
            raise ToolError("user_id is required: name the user whose memory to use")
        return user_id, tenant

    async def guarded(work: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await work()
        except MemoryAgentError as exc:  # bad input and refusals: the caller's to fix, the server goes on
            raise ToolError(str(exc)) from exc

    @server.tool()
    async def recall(
        query: str, ctx: Context, user_id: str | None = None, limit: int = 10, time_zone: str | None = None
    ) -> str:
        """What the user said or is known to have stated, across their conversations and long-term items, best
        first: each hit with its kind (turn | item | summary), text, score, time and provenance (conversation and
        sequence, item ids). Nothing found: an empty list. `time_zone` (an IANA name such as "Europe/Paris") is the
        user's: "yesterday" in the query and the hits' times are read in it."""
        user, tenant = await whose(ctx, user_id)
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query must be a non-empty string")
        if not 1 <= limit <= 50:
            raise ToolError(f"limit must be between 1 and 50, got {limit!r}")

        async def run() -> RecallResult:
            now = memory.long_term.clock().astimezone(zone_named(time_zone, "time_zone")) if time_zone else None
            return await memory.long_term.recall(
                user, query, tenant_id=tenant, limit=limit, as_of=now, recent_fallback=False
            )

        found = await guarded(run)
        hits = [
            {
                "text": hit.text,
                "time": hit.created_at.isoformat() if hit.created_at else None,
                **hit.provenance(),
            }
            for hit in found.results
        ]
        return json.dumps(hits, default=str, ensure_ascii=False)

    @server.tool()
    async def remember(
        content: str,
        ctx: Context,
        user_id: str | None = None,
        key: str | None = None,
        item_type: str = "fact",
        importance: float = 0.5,
    ) -> str:
        """Keep a durable memory of the user (at most 500 characters). With `key` (e.g. home_city) a new value
        replaces the current one, history kept; without, each distinct content is kept beside the others.
        `item_type`: fact | preference | decision | todo | entity. Returns the item's id and what happened."""
        user, tenant = await whose(ctx, user_id)
        outcome = await guarded(
            lambda: memory.long_term.remember(
                user, content, tenant_id=tenant, key=key, item_type=item_type, importance=importance
            )
        )
        return json.dumps(
            {"item_id": outcome.item_id, "outcome": outcome.outcome, "closed_item_ids": list(outcome.closed_item_ids)}
        )

    @server.tool()
    async def forget(item_id: int, ctx: Context, user_id: str | None = None) -> str:
        """Erase one item of the user, with everything derived from it (cluster summaries regenerated without it).
        An id that is not the user's erases nothing and says so."""
        user, tenant = await whose(ctx, user_id)
        if not 1 <= item_id <= MAX_ITEM_ID:
            raise ToolError(f"item_id must be an item's id (a positive integer as list_memories shows), got {item_id}")
        report = await guarded(lambda: memory.long_term.forget_item(user, item_id, tenant_id=tenant))
        if not report.items_deleted:
            raise ToolError(f"no item {item_id} of this user: nothing erased")
        return json.dumps(
            {
                "items_deleted": list(report.items_deleted),
                "summaries_refreshed": list(report.summaries_refreshed),
                "summaries_deleted": list(report.summaries_deleted),
                "notes_deleted": list(report.notes_deleted),
                "batch_summaries_deleted": list(report.batch_summaries_deleted),
            }
        )

    @server.tool()
    async def list_memories(ctx: Context, user_id: str | None = None) -> str:
        """The user's current long-term items (cluster summaries included), most important first."""
        user, tenant = await whose(ctx, user_id)
        items = await guarded(lambda: memory.long_term.list_items(user, tenant_id=tenant))
        return json.dumps([_item(item) for item in items], ensure_ascii=False)

    return server


def keyed_app(memory: MemoryService, server: MCPServer, *, host: str) -> Any:
    """The streamable-HTTP app of `server`, behind the API keys of `memory-agent serve`: a request without a live
    key is answered 401 before the MCP layer reads it, and its body is bounded by MEMORY_AGENT_API_MAX_BODY_BYTES."""
    from starlette.responses import JSONResponse

    from memory_agent.api.limits import lookup_tenant

    inner = server.streamable_http_app(
        max_request_body_size=memory.settings.api.api_max_body_bytes, host=host, stateless_http=True
    )

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            scheme, _, key = headers.get("authorization", "").partition(" ")
            tenant = await lookup_tenant(memory, key.strip()) if scheme.lower() == "bearer" and key.strip() else None
            if tenant is None:
                response = JSONResponse(
                    {"detail": "an API key is required: Authorization: Bearer <key> (memory-agent api-key create)"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await inner(scope, receive, send)

    return app
