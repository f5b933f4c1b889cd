"""The driver's errors as memory_agent's, in one place (memory_agent/db/connector.py maps every statement's)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from memory_agent.errors import DatabaseUnavailableError, InvalidInputError


@contextmanager
def driver_errors() -> Iterator[None]:
    """The driver's errors as ours: input past one of PostgreSQL's limits is the caller's (never retryable), a
    lost or refused server is DatabaseUnavailableError (retry). Anything else (a constraint, a lock the caller
    asked to fail fast on) stays the driver's, for the caller that expects it."""
    try:
        yield
    except psycopg.errors.ProgramLimitExceeded as exc:
        # An OperationalError to the driver, but the same input fails at every attempt: never "retry".
        raise InvalidInputError(
            f"PostgreSQL refused the input as past one of its limits ({exc.diag.message_primary}); nothing was "
            "written, and the same input would fail again (docs/reference/limits.md)"
        ) from exc
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailableError(
            f"PostgreSQL is unavailable ({type(exc).__name__}: {exc}); nothing was written, retry the call"
        ) from exc
