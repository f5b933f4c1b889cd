"""A statement's text before it runs (memory_agent/db/connector.py runs it): a query name resolved to its SQL, and a
long statement's placeholders numbered once. Nothing here touches a connection."""

from __future__ import annotations

import functools
import re

from psycopg import sql

from memory_agent import resources

Statement = str | sql.Composable | bytes

_QUERIES = resources.queries()

# psycopg finds a statement's %(name)s placeholders anew at every call when the statement is longer than this (it
# caches shorter ones: psycopg._queries.MAX_CACHED_STATEMENT_LENGTH), a cost recall's 15 kB statement paid on
# every call (docs/measurements/code.md). Such a statement is numbered once here ($1, $2, ...) and sent as it is.
PARSED_EVERY_CALL = 4096
_PLACEHOLDER = re.compile(rb"%\((\w+)\)s|%%")


@functools.lru_cache(maxsize=32)
def numbered(text: bytes) -> tuple[bytes, tuple[str, ...]]:
    """`text` with each %(name)s as $n (one number per name) and %% as %, and the names in their numbers' order."""
    names: dict[str, int] = {}

    def number(match: re.Match[bytes]) -> bytes:
        if match.group(1) is None:
            return b"%"
        return b"$%d" % names.setdefault(match.group(1).decode(), len(names) + 1)

    return _PLACEHOLDER.sub(number, text), tuple(names)


def statement_text(statement: Statement) -> sql.Composable | bytes | str:
    """The SQL of `statement`: a query of sql/queries/ by its name, else the statement itself."""
    if isinstance(statement, str):
        try:
            return _QUERIES[statement]
        except KeyError:
            raise KeyError(f"no query named {statement!r} in sql/queries/") from None
    return statement
