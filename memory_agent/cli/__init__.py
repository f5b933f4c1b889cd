"""The `memory-agent` command (main.py) and its command groups: demo, worker, and the observability
commands (inspect, at, stats), serve and api-key
(the HTTP API).

The top of the stack: may import anything in memory_agent; nothing imports it.
"""

from __future__ import annotations

import sys

INTERRUPTED = 130  # the shell's code for a command ended by SIGINT


def run() -> None:
    """The `memory-agent` command. Ctrl+C at any point (even while the command's modules load) ends it quietly
    with 130; errors are handled in main.py (one line, exit 2)."""
    try:
        from memory_agent.cli.main import app

        app(prog_name="memory-agent")
    except KeyboardInterrupt:
        print(file=sys.stderr)  # the next prompt starts on a line of its own, after the terminal's ^C
        sys.exit(INTERRUPTED)
