"""Recall's date boost: a query that names a time ("what did they plan in September 2023", "last week") ranks the
turns of that time first.

The span comes from dates.py, read at the service's clock in its time zone. The user's turns stored in it are
searched on their own (`recall_dated_turns`, sql/queries/recall_dates.sql), best matches of the query's other
words first; the fused hits of that span move to the front, in their order (a hit stored later that names a time
in the span, "last month …", is of it too), then the span's turns the fusion did not find; the rest follow, in
their order. One statement more, only for a query with a date expression.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection, sql

from memory_agent import resources
from memory_agent.long_term.recall.block import RecallHit
from memory_agent.long_term.recall.dates import DateSpan, date_span
from memory_agent.long_term.recall.replies import shown_hits
from memory_agent.long_term.recall.settings import RecallSettings
from memory_agent.long_term.recall.transaction import in_recall_transaction, stored_vectors


@functools.cache
def _statement(stored: bool) -> sql.Composed:
    queries = resources.queries()
    fts = queries["recall_message_fts_stored" if stored else "recall_message_fts_computed"]
    return sql.SQL(queries["recall_dated_turns"]).format(
        message_fts=sql.SQL(fts), turn_context=sql.SQL(queries["recall_turn_context"])
    )


async def dated_hits(
    conn: AsyncConnection[Any], params: dict[str, Any], span: DateSpan, settings: RecallSettings
) -> list[RecallHit]:
    """The user's turns of `span` (recall's `params`: user, tenant, as_of, neighbours), as hits of path 'date'."""
    # In recall's transaction: the tenant row-level security filters by is named there.
    rows = await in_recall_transaction(
        conn,
        settings,
        _statement(stored_vectors(settings)),
        {
            "tenant_id": params["tenant_id"],
            "user_id": params["user_id"],
            "query": params["query"].replace(span.expression, " "),
            "config": params["config"],
            "span_start": span.start,
            "span_end": span.end,
            "as_of": params["as_of"],
            "candidates": params["fused_limit"],  # as many as the fused list holds: the block keeps far fewer
            "neighbours_before": params["neighbours_before"],
            "neighbours_after": params["neighbours_after"],
            "text_chars": params["text_chars"],
            "neighbour_chars": params["neighbour_chars"],
        },
    )
    return shown_hits(rows, settings)


def of_span(hit: RecallHit, span: DateSpan) -> bool:
    """Whether a hit is a turn of `span`: stored in it, or naming a time in it when it was stored ("last month I
    went to a convention", stored on 18 April, is of March), a time no longer than the span (a turn's "last year"
    is not of a month)."""
    if hit.kind != "turn" or hit.created_at is None:
        return False
    if hit.created_at in span:
        return True
    named = date_span(hit.text, hit.created_at.astimezone(span.start.tzinfo))
    return (
        named is not None
        and named.end - named.start <= span.end - span.start
        and named.start < span.end
        and span.start < named.end
    )


def boosted(hits: Sequence[RecallHit], dated: Sequence[RecallHit], span: DateSpan) -> list[RecallHit]:
    """`hits` with the turns of `span` first (of_span): the fused ones (marked path 'date' too), then `dated`'s
    others."""
    inside, outside = [], []
    for hit in hits:
        if of_span(hit, span):
            hit.paths = sorted({*hit.paths, "date"})
            inside.append(hit)
        else:
            outside.append(hit)
    found = {(hit.conversation_id, hit.sequences[0]) for hit in inside}
    extra = [hit for hit in dated if (hit.conversation_id, hit.sequences[0]) not in found]
    return [*inside, *extra, *outside]


def in_users_time(hits: Sequence[RecallHit], now: datetime) -> None:
    """Each turn's time in the zone of `now` (the user's): the block dates a turn by the day the user wrote it, the
    day a date expression of the user's names (read in UTC, 00:30 in Paris was the day before)."""
    for hit in hits:
        if hit.created_at is not None:
            hit.created_at = hit.created_at.astimezone(now.tzinfo)


async def with_date_boost(
    conn: AsyncConnection[Any],
    hits: list[RecallHit],
    params: dict[str, Any],
    settings: RecallSettings,
    now: datetime,
) -> list[RecallHit]:
    """`hits` re-ordered for the date expression of the query (at `now`; a clock without a time zone is read as
    UTC), in the order they came when it names no time; their times in `now`'s zone either way."""
    if now.tzinfo is None or now.utcoffset() is None:
        now = now.replace(tzinfo=UTC)
    span = date_span(params["query"], now)
    if span is not None:
        hits = boosted(hits, await dated_hits(conn, params, span, settings), span)
    in_users_time(hits, now)
    return hits
