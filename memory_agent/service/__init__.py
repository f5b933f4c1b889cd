"""MemoryService: the public entry point. It opens and closes everything (_lifecycle.py) and hands out the tiers'
facades (`conversations`, `long_term`, `transfers`: _transfers.py); its own methods span the tiers.

May import every package below it; nothing of memory_agent imports it but api/, cli/, langgraph_server and the
package's own __init__ (integrations/ reach it through the RoundMemory protocol).
"""

from memory_agent.service._memory import MemoryService
from memory_agent.service._transfers import Transfers

__all__ = ["MemoryService", "Transfers"]
