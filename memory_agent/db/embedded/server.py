"""The embedded server's process: create a cluster, start it, read whether it runs, stop it.

Called with the data directory's lock held (embedded.py). The cluster is created with password authentication
from its first start (the secret kept 0600 beside the data directory); the server listens on a unix socket only,
in the data directory or, when that path is too long for a socket, in a new private directory under the temporary
directory (0700, owned by the server's OS user).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_agent.errors import ConfigurationError, DatabaseUnavailableError

HBA = """# memory_agent: password (scram-sha-256) for every connection; the secret is in <data dir>.secret (0600).
local   all   all                 scram-sha-256
host    all   all   127.0.0.1/32  scram-sha-256
host    all   all   ::1/128       scram-sha-256
"""
# The longest unix socket path (sun_path holds 108 bytes on Linux, 104 on macOS; with its NUL).
_SOCKET_PATH_MAX = 103
_PORT = 5432  # names the socket file only: the server opens no TCP port
_TIMEOUT_S = 120
_STALE_WAIT_S = 20


@dataclass(frozen=True)
class Running:
    """A running server, as its postmaster.pid says."""

    pid: int
    socket_dir: Path
    port: int

    def uri(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.socket_dir}&port={self.port}"


def secret_path(pgdata: Path) -> Path:
    return pgdata.parent / f"{pgdata.name}.secret"


def running_server(pgdata: Path) -> Running | None:
    """The server of `pgdata` if it runs and accepts connections (its pid alive, its socket present)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, PermissionError):
        return None
    if len(lines) < 8 or lines[7].strip() != "ready" or not lines[4].strip():
        return None
    pid, port, socket_dir = int(lines[0]), int(lines[3]), Path(lines[4].strip())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    if not _accepts(socket_dir / f".s.PGSQL.{port}"):
        return None  # a socket file left by a server that died (the pid may be another process's by now)
    return Running(pid, socket_dir, port)


def _accepts(socket_path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(5)
        try:
            probe.connect(str(socket_path))
        except OSError:
            return False
    return True


def run_program(bin_dir: Path, name: str, args: list[str], user: Any) -> None:
    """Run one of the server's programs (as the server's OS user when root); its output goes to temporary files,
    not pipes, which the server `pg_ctl start` leaves behind would hold open."""
    options: dict[str, Any] = {"cwd": "/"}
    if user is not None:
        options.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
    with tempfile.TemporaryFile() as output:
        try:
            subprocess.run(
                [str(bin_dir / name), *args],
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                timeout=_TIMEOUT_S,
                **options,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            output.seek(0)
            said = output.read().decode("utf-8", "replace").strip()
            raise DatabaseUnavailableError(f"the embedded PostgreSQL's {name} failed: {exc}; {said}") from exc


def init_cluster(bin_dir: Path, pgdata: Path, user: Any) -> None:
    """initdb with scram-sha-256 and a generated superuser password, so the server never runs with `trust`."""
    if pgdata.exists() and any(pgdata.iterdir()):
        raise ConfigurationError(
            f"MEMORY_AGENT_DATA_DIR {pgdata} is not empty and holds no PostgreSQL cluster (no PG_VERSION): "
            "choose an empty or new directory"
        )
    secret = secrets.token_urlsafe(32)
    secret_file = secret_path(pgdata)
    secret_file.unlink(missing_ok=True)  # a leftover of a data directory deleted by hand
    fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(secret)
    pgdata.mkdir(mode=0o700, exist_ok=True)
    pw_dir = Path(tempfile.mkdtemp(prefix="memory_agent_initdb_"))  # 0700
    try:
        pw_file = pw_dir / "pw"
        pw_file.write_text(secret, encoding="utf-8")
        if user is not None:
            for owned in (pgdata, pw_dir, pw_file):
                os.chown(owned, user.pw_uid, user.pw_gid)
        args = ["-D", str(pgdata), "--auth=scram-sha-256", "--encoding=utf8", "-U", "postgres"]
        run_program(bin_dir, "initdb", [*args, f"--pwfile={pw_file}"], user)
    finally:
        shutil.rmtree(pw_dir, ignore_errors=True)
    (pgdata / "pg_hba.conf").write_text(HBA, encoding="utf-8")


def start_server(bin_dir: Path, pgdata: Path, user: Any) -> Running:
    """Start the server of an initialised `pgdata` and wait until it accepts connections. After a server that
    was killed, PostgreSQL refuses to start while its old pid still shows (a zombie not yet reaped, backends
    still exiting): retried for up to _STALE_WAIT_S then."""
    deadline = time.monotonic() + _STALE_WAIT_S
    while True:
        stale = (pgdata / "postmaster.pid").exists()
        try:
            return _start_once(bin_dir, pgdata, user)
        except DatabaseUnavailableError:
            if not stale or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def _start_once(bin_dir: Path, pgdata: Path, user: Any) -> Running:
    (pgdata / ".handle_pids.json").unlink(missing_ok=True)  # the wheel's own bookkeeping, unused here
    socket_dir = _socket_dir(pgdata, user)
    options = f'-h "" -k "{socket_dir}" -p {_PORT}'
    log = pgdata / "log"
    run_program(
        bin_dir,
        "pg_ctl",
        ["-D", str(pgdata), "-w", "-t", str(_TIMEOUT_S), "-o", options, "-l", str(log), "start"],
        user,
    )
    running = running_server(pgdata)
    if running is None:
        raise DatabaseUnavailableError(f"the embedded PostgreSQL did not start; see its log {log}")
    return running


def stop_server(bin_dir: Path, pgdata: Path, user: Any) -> None:
    """Stop the server (fast: open sessions are ended) and remove a socket directory made for it."""
    running = running_server(pgdata)
    run_program(bin_dir, "pg_ctl", ["-D", str(pgdata), "-w", "-t", str(_TIMEOUT_S), "-m", "fast", "stop"], user)
    if running is not None and running.socket_dir != pgdata:
        shutil.rmtree(running.socket_dir, ignore_errors=True)


def _socket_dir(pgdata: Path, user: Any) -> Path:
    """The data directory, unless its socket path would be too long: then a new private directory."""
    if len(os.fsencode(pgdata / f".s.PGSQL.{_PORT}")) <= _SOCKET_PATH_MAX:
        return pgdata
    base = tempfile.gettempdir()
    if len(os.fsencode(base)) > 40:
        base = "/tmp"  # a long TMPDIR leaves no room for the socket's name
    socket_dir = Path(tempfile.mkdtemp(prefix="memory_agent_pg_", dir=base))  # 0700, a fresh name
    if user is not None:
        os.chown(socket_dir, user.pw_uid, user.pw_gid)
    return socket_dir
