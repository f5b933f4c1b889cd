"""The memory inspector: server-rendered pages under /inspect/ of `memory-agent serve` (auth.py: the key and the
tenant; users.py, conversations.py: the pages; erase.py: forgetting from a page; html.py: the markup)."""

# Each adds its routes; the erasures first: ids may hold '/', and a page's route would take '<id>/forget' whole.
from memory_agent.api.inspector import erase  # noqa: F401  # isort: skip
from memory_agent.api.inspector import conversations, users  # noqa: F401  # isort: skip
from memory_agent.api.inspector.auth import router

__all__ = ["router"]
