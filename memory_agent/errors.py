"""The exceptions memory_agent raises. Every message says what to do about it."""

from __future__ import annotations


class MemoryAgentError(Exception):
    """Base class of every error memory_agent raises."""


class InvalidInputError(MemoryAgentError, ValueError):
    """A round, message or thread id that cannot be stored as given. Nothing was written."""


class ConversationOwnerError(InvalidInputError):
    """A round named a user (or tenant) other than the one its thread id belongs to: nothing was read or written."""


class ConfigurationError(MemoryAgentError):
    """A setting or argument that cannot work (bad URL, unknown mode, missing model)."""


class DatabaseUnavailableError(MemoryAgentError):
    """PostgreSQL could not be reached or failed mid-statement. Nothing of the round was written."""


class SummarizationError(MemoryAgentError):
    """The summarizer model failed or returned something unusable. Recorded on the memory row, never
    raised inside a user's round."""


class ServiceClosedError(MemoryAgentError):
    """The MemoryService was closed before or while the call ran. A round end that had begun either
    committed whole or wrote nothing."""


class RoundInProgressError(MemoryAgentError):
    """Another round of the same conversation is running and the multitask strategy is `reject`."""


class JobFailedError(MemoryAgentError):
    """A background job (a summary, a consolidation run, the periodic safety net) did not do its work. Its rows
    say why where they can (a memory row `failed` with its error). `retryable`: running the job again can
    succeed (the database or the model was away), so the job queue retries it; else it ends `failed`."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


# Model clients' errors that say the server or the network was away (openai's and httpx's class names: neither
# package is imported here, and both are optional).
_TRANSIENT_CLIENT_ERRORS = frozenset({"APIConnectionError", "APITimeoutError", "TransportError"})
_TRANSIENT_HTTP_STATUS = frozenset({408, 409, 429})


def is_transient(exc: BaseException) -> bool:
    """Whether the call that raised `exc` may succeed if made again unchanged: the database or a model server was
    unreachable, timed out, overloaded or rolled back a conflicting transaction. Bad input, a configuration, an
    SQL statement the server refuses or a model answer that does not parse fail the same way every time. An
    error raised `from` another is judged by its cause."""
    import psycopg  # a dependency of the package; imported here so that this module stays import-light

    if isinstance(exc, JobFailedError):
        return exc.retryable
    if isinstance(exc, (InvalidInputError, ConfigurationError, psycopg.errors.ProgramLimitExceeded)):
        return False
    # psycopg's OperationalError covers a lost connection, a pool timeout, a cancelled statement, a lock timeout and
    # the rolled-back transactions (serialization failure, deadlock).
    if isinstance(exc, (DatabaseUnavailableError, psycopg.OperationalError)):
        return True
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status >= 500 or status in _TRANSIENT_HTTP_STATUS
    if any(cls.__name__ in _TRANSIENT_CLIENT_ERRORS for cls in type(exc).__mro__):
        return True
    return exc.__cause__ is not None and is_transient(exc.__cause__)
