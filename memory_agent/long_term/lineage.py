"""Lineage of derived rows, and the guard every writer of one passes before it writes.

A derived row (a consolidation note, a batch summary, a cluster summary) is made from sources read before a model
call: items, memory versions, notes. A forget of the user (forget.py) may erase some of them while the model
answers. So the writer, in the transaction that writes, takes the forget lock shared (a forget holds it exclusive
until it commits), then checks in a statement of its own that every source still exists: a forget that committed
meanwhile has erased one and the writer writes nothing; a forget that comes later waits for the writer's commit
and then finds the row through its lineage and erases it too. The database decides, whatever the processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from memory_agent.long_term.queries import QUERIES as Q


@dataclass
class Lineage:
    """What a derived row was made from: its direct sources, and the items and conversations behind them."""

    item_ids: set[int] = field(default_factory=set)
    memory_ids: set[int] = field(default_factory=set)
    note_ids: set[int] = field(default_factory=set)
    conversation_ids: set[str] = field(default_factory=set)

    def add(
        self,
        *,
        item_id: int | None = None,
        memory_id: int | None = None,
        note_id: int | None = None,
        item_ids: Iterable[int] | None = None,
        conversation_ids: Iterable[str] | None = None,
    ) -> None:
        for target, value in ((self.item_ids, item_id), (self.memory_ids, memory_id), (self.note_ids, note_id)):
            if value is not None:
                target.add(value)
        self.item_ids.update(item_ids or ())
        self.conversation_ids.update(conversation_ids or ())

    def params(self) -> dict[str, list[Any]]:
        """The lineage columns of a consolidation note (sorted: the same sources, the same row)."""
        return {
            "source_item_ids": sorted(self.item_ids),
            "source_memory_ids": sorted(self.memory_ids),
            "source_note_ids": sorted(self.note_ids),
            "source_conversation_ids": sorted(self.conversation_ids),
        }


async def sources_held(
    conn: psycopg.AsyncConnection[Any],
    scope: dict[str, Any],
    *,
    item_ids: Iterable[int] = (),
    memory_ids: Iterable[int] = (),
    note_ids: Iterable[int] = (),
    wait: bool = True,
) -> bool:
    """In the writer's transaction, right before it writes: whether it may (see the module docstring). False: a
    forget erased a source meanwhile, or (wait=False, for a writer holding locks a forget takes after this one) a
    forget of the user is in progress; write nothing."""
    who = {"tenant_id": scope["tenant_id"], "user_id": scope["user_id"]}
    if wait:
        await Q.share_forget_lock(conn, who)
    elif not await Q.try_share_forget_lock(conn, who):
        return False
    sources = {
        "item_ids": sorted(set(item_ids)),
        "memory_ids": sorted(set(memory_ids)),
        "note_ids": sorted(set(note_ids)),
    }
    return await Q.sources_present(conn, {**who, **sources})


async def ledger_user(conn: psycopg.AsyncConnection[Any], scope: dict[str, Any]) -> str:
    """Whom a model call made for the user is recorded under, in the transaction that records it: the user, or
    '' (no user) once forget_user erased them, so a call answered after the forget names nobody."""
    who = {"tenant_id": scope["tenant_id"], "user_id": scope["user_id"]}
    await Q.share_forget_lock(conn, who)
    return who["user_id"] if await Q.user_present(conn, who) else ""
