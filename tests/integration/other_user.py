"""Running test code as another OS user (from root): the user, a Python it may run, and this checkout's code
and packages placed where that user can read them, as hard links (a copy where links are impossible)."""

from __future__ import annotations

import os
import pwd
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

TEST_USER = "memory_agent_tester"
ROOT = Path(__file__).resolve().parents[2]


def ensure_test_user() -> Path:
    """The test user (made once), its home kept 0700 as a home usually is."""
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "-s", "/bin/sh", TEST_USER], check=True, capture_output=True)
    home = Path(pwd.getpwnam(TEST_USER).pw_dir)
    home.chmod(0o700)
    return home


def interpreter_for(user: str) -> str:
    """This Python, or another of the same version, that `user` may execute (root's own may sit under /root)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(sys.executable), shutil.which(version), f"/usr/bin/{version}"]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            ["runuser", "-u", user, "--", candidate, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if probe.returncode == 0 and probe.stdout.strip() == str(tuple(sys.version_info[:2])):
            return candidate
    pytest.fail(f"no {version} that {user} may run: install one system-wide")


def link_tree(source: Path, target: Path) -> None:
    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, copy_function=link_or_copy, dirs_exist_ok=True)


def place_code(directory: Path) -> str:
    """This checkout's packages and the virtualenv's site-packages under `directory` (made 0755): the PYTHONPATH
    that imports them."""
    directory.mkdir(mode=0o755)
    code, packages = directory / "code", directory / "site"
    for name in ("memory_agent", "tests", "sql", "prompts"):
        link_tree(ROOT / name, code / name)
    for site_dir in site.getsitepackages():
        link_tree(Path(site_dir), packages)
    for made in [directory, *directory.rglob("*")]:
        if made.is_dir() and not made.is_symlink():
            made.chmod(0o755)  # made here; the linked files keep their own modes
    return os.pathsep.join([str(code), str(packages)])


def run_as(user: str, home: Path, pythonpath: str, args: list[str], timeout: float = 180) -> str:
    """Run `python args...` as `user` in `home`; its stdout's last line (it must succeed)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "PYTHONPATH": pythonpath}
    run = subprocess.run(
        ["runuser", "-u", user, "--", interpreter_for(user), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(home),
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().splitlines()[-1]


def user_workspace() -> tuple[Path, Path, str]:
    """The test user's home, a new directory of that user's in it, and the PYTHONPATH of this checkout's code
    placed there (the checkout itself may sit where that user cannot read)."""
    home = ensure_test_user()
    made = subprocess.run(
        ["runuser", "-u", TEST_USER, "--", "mktemp", "-d", "-p", str(home)], check=True, capture_output=True, text=True
    )
    work = Path(made.stdout.strip())
    return home, work, place_code(work / "venv")
