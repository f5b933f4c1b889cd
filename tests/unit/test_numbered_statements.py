"""A long statement is numbered once ($1, $2, ...) instead of psycopg finding its placeholders at every call."""

from __future__ import annotations

import pytest

from memory_agent.db import statements


def test_each_name_has_one_number_and_percent_signs_are_unescaped() -> None:
    text, names = statements.numbered(b"SELECT %(a)s, %(b)s, %(a)s WHERE x <%% y AND z LIKE '10%%'")
    assert text == b"SELECT $1, $2, $1 WHERE x <% y AND z LIKE '10%'"
    assert names == ("a", "b")


def test_numbering_is_made_once_per_statement() -> None:
    statement = b"SELECT %(only)s" + b" " * statements.PARSED_EVERY_CALL
    statements.numbered.cache_clear()
    for _ in range(3):
        statements.numbered(statement)
    assert statements.numbered.cache_info().misses == 1


@pytest.mark.parametrize("statement", [b"SELECT %s", b"SELECT %(a)b"])
def test_other_placeholders_are_left_for_the_driver_to_refuse(statement: bytes) -> None:
    # Named statements use %(name)s only; anything else reaches PostgreSQL unchanged and fails there loudly.
    assert statements.numbered(statement)[0] == statement
