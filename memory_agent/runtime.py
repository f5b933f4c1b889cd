"""MemoryLoop: the event loop, on its own thread, that owns the connection pool and background summaries.

Owning one loop lets the same MemoryService serve `invoke` from a plain script, `ainvoke` from any event
loop (FastAPI's included), and keeps summarizer CPU work (HTTP, parsing) off the application's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from memory_agent.errors import ServiceClosedError

T = TypeVar("T")

CLOSED = "the MemoryService is closed; open it again (or use a new one) to run rounds"
CLOSED_WHILE_RUNNING = "the MemoryService was closed while this call was running; nothing more of it ran"


class MemoryLoop:
    def __init__(self, name: str = "memory_agent") -> None:
        self.loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        # Under the lock: a call either runs (and stop() cancels it) or is refused, never left waiting forever.
        with self._lock:
            if self._closed:
                coro.close()
                raise ServiceClosedError(CLOSED)
            return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run on the memory loop and block the calling thread until done."""
        if self.in_loop_thread:
            coro.close()
            raise RuntimeError("MemoryLoop.run() called from the memory loop itself; await the coroutine instead")
        try:
            return self.submit(coro).result()
        except concurrent.futures.CancelledError:
            if self._closed:
                raise ServiceClosedError(CLOSED_WHILE_RUNNING) from None
            raise

    async def arun(self, coro: Coroutine[Any, Any, T], *, shield: bool = False) -> T:
        """Await from any event loop; the work runs on the memory loop.

        With `shield`, cancelling the caller does not cancel the work: a round end that has begun finishes
        (commit and dispatch) even when the request that started it is cancelled.
        """
        if self.in_loop_thread:
            return await (asyncio.shield(coro) if shield else coro)
        future = asyncio.wrap_future(self.submit(coro))
        try:
            return await (asyncio.shield(future) if shield else future)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._closed and future.cancelled() and not (task and task.cancelling()):
                raise ServiceClosedError(CLOSED_WHILE_RUNNING) from None
            raise

    async def _cancel_the_rest(self) -> None:
        current = asyncio.current_task()
        rest = [task for task in asyncio.all_tasks() if task is not current]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def stop(self) -> None:
        """Refuse new calls, cancel what is still running (its callers get ServiceClosedError), stop."""
        with self._lock:
            if self._closed or self.loop.is_closed():
                return
            self._closed = True
        if not self.in_loop_thread and self._thread.is_alive():
            # A task that refuses to end: the loop stops anyway.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._cancel_the_rest(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()
