"""The memory inspector: server-rendered pages under /inspect/ of `memory-agent serve` (auth.py: the key and the
tenant; users.py, conversations.py: the pages; erase.py: forgetting from a page; html.py: the markup)."""

from memory_agent.api.inspector import conversations, erase, users  # noqa: F401  (each adds its routes)
from memory_agent.api.inspector.auth import router

__all__ = ["router"]
