"""Who a long-term row belongs to.

A row belongs to a (tenant, user) and, inside it, to a project and an environment; a cluster adds the item's
type and key. Callers hand over a psycopg AsyncConnection whose search_path reaches the memory_agent schema (the
backend's pool sets it); statements are the named queries of sql/queries/long_term.sql, run through
memory_agent.db.connector.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory_agent.errors import InvalidInputError
from memory_agent.schemas.keys import validate_identity

Row = dict[str, Any]
MAX_PARTITION_CHARS = 256  # the settings' max_length of project and environment


@dataclass(frozen=True)
class ItemScope:
    """Whose long-term items: a (tenant, user) and, inside it, a project and an environment."""

    tenant_id: str
    user_id: str
    project: str = ""
    environment: str = ""

    def __post_init__(self) -> None:
        # Checked once, when built: the functions that take a scope do not check it again.
        check_identity(self.tenant_id, self.user_id)
        check_partition(self.project, self.environment)


@dataclass(frozen=True)
class ItemOrigin:
    """Where items come from: memory version `memory_id` of `conversation_id` (both None: from outside a
    conversation), and how sure their writer is of them."""

    conversation_id: str | None = None
    memory_id: int | None = None
    confidence: float = 1.0


@dataclass(frozen=True)
class Cluster:
    """The items a cluster summary stands for: one (tenant, user, project, environment, type, key)."""

    tenant_id: str
    user_id: str
    project: str
    environment: str
    item_type: str
    key: str

    def params(self) -> Row:
        return {
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "project": self.project,
            "environment": self.environment,
            "item_type": self.item_type,
            "key": self.key,
        }


def check_identity(tenant_id: Any, user_id: Any) -> None:
    """The row's owner, by the one rule of ids (conversation/identity.py): an empty id would silently pool
    callers' rows, an over-long one fail in an index key."""
    validate_identity(tenant_id, "tenant_id")
    validate_identity(user_id, "user_id")


def check_partition(project: Any, environment: Any) -> None:
    """A project and an environment (MEMORY_AGENT_PROJECT, _ENVIRONMENT): strings, empty for none."""
    for name, value in (("project", project), ("environment", environment)):
        if not isinstance(value, str) or len(value) > MAX_PARTITION_CHARS or "\x00" in value:
            raise InvalidInputError(
                f"{name} must be a string of at most {MAX_PARTITION_CHARS} characters, got {value!r}"
            )


def check_now(now: Any, name: str = "now") -> datetime:
    """The writer's clock (or a time read at, `name`): an aware datetime (a naive one would be read in the
    server's time zone)."""
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(f"{name} must be a timezone-aware datetime, got {now!r}")
    return now
