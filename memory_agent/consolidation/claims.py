"""What a nightly writer holds before it writes: the claim of one note (so two runs of it make one model call),
and, in the transaction that writes, the user's forget lock and the schedule as the run left it.

A forget that drops notes moves the nightly schedule back before them (forget.sql: drop_derived); a run in flight
then sees covered_until differ from what it last wrote and writes nothing more: the next run starts before the
dropped notes and makes them again from what is left.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from typing import Any

import psycopg

from memory_agent.consolidation.queries import ConsolidationQueries
from memory_agent.long_term.lineage import sources_held

NIGHTLY = "nightly"


@asynccontextmanager
async def claimed_note(conn: psycopg.AsyncConnection[Any], key: dict[str, Any]) -> AsyncIterator[None]:
    """Hold the note's claim (a session advisory lock) for the block, model call included."""
    await ConsolidationQueries.claim_note(conn, key)
    try:
        yield
    finally:
        try:
            await ConsolidationQueries.release_note(conn, key)
        except BaseException:
            await conn.close()  # the lock must not go back to a pool with the connection: closing frees it
            raise


@dataclass(frozen=True)
class Covered:
    """The covered_until a nightly run last saw or wrote: a forget that dropped notes moved it back, and then
    the run writes nothing more (the next run starts before the dropped notes)."""

    until: date | None


async def schedule_held(conn: psycopg.AsyncConnection[Any], scope: dict[str, Any], covered: Covered | None) -> bool:
    """In the writer's transaction: wait for a forget of the user in progress, then whether the schedule is where
    the run left it (None: a manual run, not checked)."""
    await sources_held(conn, scope)
    if covered is None:
        return True
    return await ConsolidationQueries.covered_until(conn, scope, NIGHTLY) == covered.until
