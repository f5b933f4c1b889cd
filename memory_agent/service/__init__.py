"""MemoryService: the public entry point. It opens and closes everything (lifecycle.py) and delegates the rest.

May import every package below it; nothing of memory_agent imports it but api/, cli/, langgraph_server and the
package's own __init__ (integrations/ reach it through the RoundMemory protocol).
"""

from memory_agent.service.memory import MemoryService

__all__ = ["MemoryService"]
