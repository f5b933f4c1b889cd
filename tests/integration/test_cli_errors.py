"""How the `memory-agent` command fails: one line naming the setting and the fix, exit 2, the traceback only with
--debug; misspelled MEMORY_AGENT_* variables named with their closest setting; Ctrl+C quiet, exit 130."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from memory_agent.resources import install_hint, install_source
from memory_agent.settings import unknown_variables


def run(*args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd(), **variables}
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_a_bad_setting_is_one_line_exit_2_and_debug_shows_the_traceback():
    bad = run("stats", MEMORY_AGENT_EMBEDDINGS="openai")
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) <= 2, bad.stderr
    assert "MEMORY_AGENT_EMBEDDINGS (got 'openai')" in lines[0] and "'hashing'" in lines[0]
    assert "Traceback" not in bad.stderr and bad.stdout == ""
    debug = run("--debug", "stats", MEMORY_AGENT_EMBEDDINGS="openai")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_misspelled_variables_are_named_with_the_closest_setting():
    environ = {
        "MEMORY_AGENT_MEMORY_ROLLING_WINDOW": "20",
        "MEMORY_AGENT_EMBEDING": "hashing",
        "MEMORY_AGENT_ZZZ": "1",
        "MEMORY_AGENT_RECALL": "false",  # a setting
        "MEMORY_AGENT_TEST_DSN": "x",  # the test suite's own
        "OTHER": "1",
        # A misspelled prefix was ignored without a word.
        "MEMORY_AGNET_EMBEDDINGS": "e5",
        "MEMORYAGENT_DATABASE_URL": "postgresql://x",
        "MEMORY_LIMIT": "1g",  # another program's
    }
    assert unknown_variables(environ) == [
        ("MEMORYAGENT_DATABASE_URL", "MEMORY_AGENT_DATABASE_URL"),
        ("MEMORY_AGENT_EMBEDING", "MEMORY_AGENT_EMBEDDINGS"),
        ("MEMORY_AGENT_MEMORY_ROLLING_WINDOW", "MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE"),
        ("MEMORY_AGENT_ZZZ", None),
        ("MEMORY_AGNET_EMBEDDINGS", "MEMORY_AGENT_EMBEDDINGS"),
    ]
    # Through the command: the warning, once, before the settings error it then reports.
    result = run("stats", MEMORY_AGENT_EMBEDING="hashing", MEMORY_AGENT_EMBEDDINGS="openai")
    warned = [line for line in result.stderr.splitlines() if "MEMORY_AGENT_EMBEDING " in line]
    assert len(warned) == 1 and "did you mean MEMORY_AGENT_EMBEDDINGS?" in warned[0], result.stderr


def test_ctrl_c_while_the_command_loads_ends_quietly_with_130():
    # A server that accepts and never answers: the command cannot finish before the signal (against the test's
    # own database, `stats` loads and ends within the half second, and exits 0 before Ctrl+C arrives).
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.getcwd(),
        "MEMORY_AGENT_DATABASE_URL": f"postgresql://nobody@127.0.0.1:{port}/none",
        "MEMORY_AGENT_CONNECT_TIMEOUT_S": "30",
    }
    # As a terminal starts it: a runner that started this suite in the background (`cmd &` without job control)
    # leaves SIGINT ignored, the command inherits that, and Ctrl+C could not reach it.
    as_from_a_terminal = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('memory_agent', run_name='__main__', alter_sys=True)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", as_from_a_terminal, "stats"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # the signal goes to the process group, as the terminal sends it
    )
    time.sleep(0.5)  # loading the command's modules takes ~2 s
    os.killpg(process.pid, signal.SIGINT)
    try:
        _, err = process.communicate(timeout=60)
    finally:
        silent.close()
    assert process.returncode == 130
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err


def test_install_hints_name_where_the_package_came_from():
    source = install_source()
    # Not on a package index yet: the checkout it was installed from, which pip can install again.
    assert source != "memory-agent" and (Path(source) / "pyproject.toml").is_file()
    assert install_hint("api").startswith("pip install ") and install_hint("api").endswith(f" '{source}[api]'")


def test_an_editable_installation_is_told_to_stay_editable(tmp_path, monkeypatch):
    # A distribution's metadata as pip writes it, found first on the path.
    info = tmp_path / "memory_agent-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: memory-agent\nVersion: 0.1.0\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for editable, hint in (
        (True, "pip install -e '/src/memory_agent[api]'"),
        (False, "pip install '/src/memory_agent[api]'"),
    ):
        direct = {"url": "file:///src/memory_agent", "dir_info": {"editable": editable}}
        (info / "direct_url.json").write_text(json.dumps(direct), encoding="utf-8")
        assert install_hint("api") == hint  # without -e, following it replaced `make`'s editable install


def test_every_variable_the_package_reads_is_known():
    """A MEMORY_AGENT_* variable read outside MemorySettings must be listed, or users setting it would be warned."""
    import re

    source = "\n".join(p.read_text(encoding="utf-8") for p in Path("memory_agent").rglob("*.py"))
    names = set(re.findall(r"MEMORY_AGENT_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_])", source))  # not prefixes (…_MEMORY_*)
    assert unknown_variables(dict.fromkeys(names, "x")) == []
