"""MemoryLoop: the event loop, on its own thread, that owns the connection pool and background summaries.

Owning one loop lets the same MemoryService serve `invoke` from a plain script, `ainvoke` from any event
loop (FastAPI's included), and keeps summarizer CPU work (HTTP, parsing) off the application's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class MemoryLoop:
    def __init__(self, name: str = "memory_agent") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run on the memory loop and block the calling thread until done."""
        if self.in_loop_thread:
            coro.close()
            raise RuntimeError("MemoryLoop.run() called from the memory loop itself; await the coroutine instead")
        return self.submit(coro).result()

    async def arun(self, coro: Coroutine[Any, Any, T], *, shield: bool = False) -> T:
        """Await from any event loop; the work runs on the memory loop.

        With `shield`, cancelling the caller does not cancel the work: a round end that has begun finishes
        (commit and dispatch) even when the request that started it is cancelled.
        """
        if self.in_loop_thread:
            return await (asyncio.shield(coro) if shield else coro)
        future = asyncio.wrap_future(self.submit(coro))
        return await (asyncio.shield(future) if shield else future)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()
