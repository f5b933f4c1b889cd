"""`python -m memory_agent` is the `memory-agent` command."""

from memory_agent.cli.main import app

app()
