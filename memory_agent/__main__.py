"""`python -m memory_agent` is the `memory-agent` command."""

from memory_agent.cli import run

run()
