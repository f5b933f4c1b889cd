"""The inspector's pages of a conversation: its memory version chain (windows, bases, status, generation time;
failed and stuck rows marked), its rounds, and what the model was given at one round — the same record
`memory-agent at THREAD N` reads (observability.context_at), the recalled block with each hit's provenance."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from memory_agent.api.deps import memory_of
from memory_agent.api.inspector.auth import Row, Seen, crumbs, html, login, not_found, owner_of, router, seen
from memory_agent.api.inspector.html import erase_button, esc, href, link, page, table, tag
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import MemoryAgentError
from memory_agent.observability import reads as observability
from memory_agent.schemas.keys import default_user_id


async def _owned(request: Request, conversation_id: str) -> tuple[Seen, str] | Response:
    """(who is looking, the conversation's user) for a conversation of the key's tenant; else the answer to give
    (the login form, or not found)."""
    who = await seen(request)
    if who is None:
        return login()
    user_id = await owner_of(request, who, conversation_id)
    if user_id is None:
        return not_found(who, f"No conversation {conversation_id!r} in this tenant.")
    return who, user_id


def _version_row(version: Row, stuck_after_s: float, now: datetime) -> tuple[tuple[str, ...], str]:
    status = version["status"]
    created = version["created_at"]
    stuck = status == "processing" and created is not None and (now - created).total_seconds() > stuck_after_s
    kind = "stuck" if stuck else status if status == "failed" else ""
    cells = (
        esc(version["memory_id"]),
        f"{esc(version['start_sequence'])}–{esc(version['end_sequence'])}",
        esc(version["base_memory_id"]) or "none",
        tag("stuck" if stuck else status, kind or status),
        esc(version["covers"]),
        esc(created),
        esc(version["generation_time_ms"]),
        esc(version["error"]),
    )
    return cells, kind


async def conversation(request: Request, conversation_id: str) -> Response:
    found = await _owned(request, conversation_id)
    if not isinstance(found, tuple):
        return found
    who, user_id = found
    memory = memory_of(request)

    async def read() -> tuple[Row, list[Row]]:
        return (
            await observability.conversation(memory.backend, conversation_id),
            await observability.version_chain(memory.backend, conversation_id),
        )

    with tenant_scope(who.tenant):
        summary, versions = await memory.loop.arun(read())
    now = datetime.now(UTC)
    stuck_after = memory.settings.jobs.processing_timeout_s
    served = summary.get("served_memory_id")
    rounds = " ".join(
        link(n, "conversations", conversation_id, "rounds", n) for n in range(1, (summary.get("rounds") or 0) + 1)
    )
    owner = "its own scope" if user_id == default_user_id(conversation_id) else link(user_id, "users", user_id)
    body = (
        f"<p>Owner: {owner}. {esc(summary.get('rounds'))} rounds, newest sequence "
        f"{esc(summary.get('newest_sequence'))}; served now: "
        + (f"memory {esc(served)}" if served else "no memory yet (the stored messages verbatim)")
        + f"; summary lag {esc(summary.get('summary_lag'))} messages.</p>"
        "<h2>Memory versions</h2>"
        + table(
            ("id", "window", "base", "status", "rounds covered", "created", "generation ms", "error"),
            (_version_row(v, stuck_after, now) for v in versions),
            "No memory version yet.",
        )
        + f"<h2>Rounds</h2><p>{rounds or 'none'}</p>"
        + "<h2>Erase</h2><p>"
        + erase_button(href("conversations", conversation_id, "forget"), "forget this conversation…")
        + "</p>"
    )
    trail = crumbs() if user_id == default_user_id(conversation_id) else crumbs((user_id, ("users", user_id)))
    return html(page(f"Conversation {conversation_id}", body, tenant=who.tenant, crumbs=trail))


def _recall_section(recall: Row | None) -> str:
    if recall is None:
        return '<h2>Recalled</h2><p class="note">No recalled block: the round recalled nothing.</p>'
    hits = table(
        ("kind", "provenance"),
        (
            ((esc(hit.get("kind")), esc(json.dumps({k: v for k, v in hit.items() if k != "kind"}, default=str))), "")
            for hit in recall["hits"]
        ),
        "No hits.",
    )
    return (
        f"<h2>Recalled block</h2><p>path {esc(recall['path'])}, {esc(recall['items'])} hits, ~{esc(recall['tokens'])} "
        f"tokens{', truncated' if recall['truncated'] else ''}</p><pre>{esc(recall['block'])}</pre>{hits}"
    )


@router.get("/conversations/{conversation_id:path}/rounds/{round_number}")
async def at_round(request: Request, conversation_id: str, round_number: int) -> Response:
    found = await _owned(request, conversation_id)
    if not isinstance(found, tuple):
        return found
    who, _ = found
    memory = memory_of(request)
    try:
        with tenant_scope(who.tenant):
            context = await memory.loop.arun(observability.context_at(memory.backend, conversation_id, round_number))
    except MemoryAgentError as exc:
        return not_found(who, str(exc))
    row: Any = context.round
    gap = f"{row['gap_start_sequence']}–{row['gap_end_sequence']}" if row["gap_size"] else "none"
    head = (
        f"<p>Path {esc(row['retrieval_path'])}; gap {esc(gap)}; input sequences {esc(row['input_first_sequence'])}–"
        f"{esc(row['input_last_sequence'])}; ~{esc(row['context_tokens'])} context tokens"
        f"{'; truncated' if row['truncated'] else ''}.</p>"
    )
    if context.memory is None:
        served = "<h2>Memory</h2><p>No memory served: the model got the stored messages verbatim.</p>"
    else:
        version = context.memory
        served = (
            f"<h2>Memory {esc(version['memory_id'])} (sequences {esc(version['start_sequence'])}–"
            f"{esc(version['end_sequence'])})</h2><pre>{esc(version['memory_text'])}</pre>"
        )
    messages = table(
        ("part", "seq", "round", "role", "content"),
        (
            (tuple(esc(m[k]) for k in ("part", "sequence_number", "round_number", "role", "content")), "")
            for m in context.messages
        ),
        "No messages.",
    )
    body = head + served + _recall_section(context.recall) + "<h2>Messages</h2>" + messages
    trail = crumbs((conversation_id, ("conversations", conversation_id)))
    return html(page(f"{conversation_id}, round {round_number}", body, tenant=who.tenant, crumbs=trail))


# After the round's route: a thread id may hold '/', and this route's path would take "trip/rounds/4" whole.
router.get("/conversations/{conversation_id:path}")(conversation)
