"""What a LangGraph server (`langgraph dev`, LangSmith Deployment) loads through `langgraph.json`: one
MemoryService per server process for the graphs, and the store slot.

    {
      "graphs": {"chat": "./graphs/chat.py:graph"},
      "store": {"path": "./graphs/store.py:store"}
    }

`shared_memory()` opens the process's service on first use (the database of MEMORY_AGENT_*; an embedded
PostgreSQL when MEMORY_AGENT_DATABASE_URL is unset) and closes it at exit; graphs wrap themselves with it
(`with_memory(graph, shared_memory())`). `store` is the async context manager the server enters once for its
store slot: it yields a MemoryStore of the default tenant over the same service, so a deployed graph's
`runtime.store` / `get_store()` reads and writes the long-term items. The store block's `index` (the server's
vector index) and `ttl` (expiry of items) are the built-in store's: a custom store does not get them, so they
are refused here rather than silently not applied (recall's vectors: MEMORY_AGENT_EMBEDDINGS).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from memory_agent.errors import ConfigurationError
from memory_agent.long_term.store import MemoryStore
from memory_agent.service import MemoryService

# Where the LangGraph server hands langgraph.json's "store" block to the process it runs (JSON).
SERVER_STORE_CONFIG = "LANGGRAPH_STORE"
logger = logging.getLogger(__name__)

_lock = threading.Lock()
_memory: MemoryService | None = None


def shared_memory() -> MemoryService:
    """The server process's MemoryService, opened on first use and closed at exit (one pool for every graph and
    the store slot)."""
    global _memory
    with _lock:
        if _memory is None:
            memory = MemoryService.from_settings().open()
            atexit.register(memory.close)
            _memory = memory
        return _memory


def close_shared_memory() -> None:
    """Close the process's MemoryService, if open; the next shared_memory() opens a new one (tests, reloads)."""
    global _memory
    with _lock:
        memory, _memory = _memory, None
    if memory is not None:
        atexit.unregister(memory.close)
        memory.close()


def check_store_config(config: Mapping[str, Any] | None) -> None:
    """ConfigurationError for what langgraph.json's store block asks and MemoryStore cannot give."""
    refused = {
        "index": "a vector index of the server's embedding model: MemoryStore searches the value's text (full "
        "text and trigrams); recall's vectors are MEMORY_AGENT_EMBEDDINGS",
        "ttl": "expiry of items: MemoryStore keeps items until they are deleted or forgotten",
    }
    asked = [name for name in refused if config and config.get(name)]
    if asked:
        reasons = "; ".join(f'"{name}" ({refused[name]})' for name in asked)
        raise ConfigurationError(
            f"langgraph.json's store block sets {reasons}, which a custom store does not get from the server; "
            'remove them and keep "path"'
        )


def _server_store_config() -> dict[str, Any] | None:
    text = os.environ.get(SERVER_STORE_CONFIG)
    if not text:
        return None
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{SERVER_STORE_CONFIG} is not JSON: {exc}") from None
    return config if isinstance(config, dict) else None


@asynccontextmanager
async def store() -> AsyncIterator[MemoryStore]:
    """langgraph.json's store slot: a MemoryStore (default tenant) over the process's MemoryService. The server
    leaves it when it shuts down: the service closes then, and the embedded PostgreSQL it started stops (the
    worker of `langgraph dev`'s reloader ends without running exit hooks, which left it running)."""
    check_store_config(_server_store_config())
    memory = await asyncio.to_thread(shared_memory)  # the first open may start the embedded server: not on the loop
    try:
        yield MemoryStore.from_service(memory, text_search_config=memory.settings.recall.text_search_config)
    finally:
        await asyncio.to_thread(shut_down)


def shut_down() -> None:
    """Close the process's service and leave the embedded PostgreSQL, saying whether it stopped and, if it keeps
    running, how to stop it."""
    from memory_agent.db.embedded import release_embedded_postgres

    close_shared_memory()
    for data_dir, outcome in release_embedded_postgres().items():
        if outcome == "stopped":
            logger.info("memory_agent: stopped the embedded PostgreSQL of %s", data_dir)
        else:
            logger.warning(
                "memory_agent: the embedded PostgreSQL of %s keeps running (another process uses it, or it was "
                "started to be kept); `MEMORY_AGENT_DATA_DIR=%s memory-agent db stop` stops it",
                data_dir,
                data_dir,
            )
