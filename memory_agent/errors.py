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
