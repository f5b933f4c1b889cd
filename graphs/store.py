"""The LangGraph server's store slot (langgraph.json: "store": {"path": "./graphs/store.py:store"}): a deployed
graph's `runtime.store` / `get_store()` is a MemoryStore over memory_agent's tables (see
docs/how-to/langgraph-server.md)."""

from memory_agent.langgraph_server import store

__all__ = ["store"]
