"""The ids of a user document as they are written back: old id → new id of one table, each old id checked.

An id is an integer (JSON true is not one) and a record defines its id once: a second record under the same id
would take the references meant for the first. An id the document names without its row (a forgotten item a batch
summary stands for) gets a fresh id of its table, naming no row here.
"""

from __future__ import annotations

from typing import Any

import psycopg

from memory_agent.errors import InvalidInputError
from memory_agent.transfer.queries import QUERIES as Q


def checked_id(value: Any, where: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{where}: field {name!r} is {value!r}, not an integer id")
    return value


class Ids:
    """Old id → new id of one table (`known`, shared with the import's report)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], table: str, column: str, known: dict[int, int]) -> None:
        self.conn, self.table, self.column, self.known = conn, table, column, known
        self.defined: set[int] = set()

    def define(self, old: Any, new: int, where: str, name: str) -> None:
        """The record at `where` is `old`, written as `new`."""
        old = checked_id(old, where, name)
        if old in self.defined:
            raise InvalidInputError(f"{where}: field {name!r} is {old}, the id of an earlier record of the document")
        self.defined.add(old)
        self.known[old] = new

    def check_new(self, old: Any, where: str, name: str) -> None:
        """Before `old`'s record is written: an integer no earlier record defined."""
        if checked_id(old, where, name) in self.defined:
            raise InvalidInputError(f"{where}: field {name!r} is {old}, the id of an earlier record of the document")

    def of_record(self, old: Any, where: str, name: str) -> int:
        """The new id of a record the document defined (a reference that must name one of its records)."""
        if checked_id(old, where, name) not in self.defined:
            raise InvalidInputError(f"{where}: field {name!r} ({old!r}) names no {self.table} record of the document")
        return self.known[old]

    async def one(self, old: Any, where: str, name: str) -> int | None:
        if old is None:
            return None
        old = checked_id(old, where, name)
        if old not in self.known:
            self.known[old] = await Q.new_id(self.conn, self.table, self.column)
        return self.known[old]

    async def many(self, old: Any, where: str, name: str) -> list[int] | None:
        if old is None:
            return None
        if not isinstance(old, list):
            raise InvalidInputError(f"{where}: field {name!r} is {old!r}, not a list of integer ids")
        return [await self.one(value, where, name) for value in old]  # type: ignore[misc]
