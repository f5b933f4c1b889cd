"""MemoryLoop: the event loop that owns the connection pool and background summaries.

By default (event_loop "own") it runs on a thread of its own: the same MemoryService serves `invoke` from a plain
script, `ainvoke` from any event loop (FastAPI's included), and summarizer work (HTTP, parsing) does not run on
the application's loop. Every round then makes two trips between threads (its start and its end), and the two
threads take turns at the interpreter lock. With event_loop "caller" it is the loop that ran `aopen()`: a round
awaited on that loop runs its statements there, with no trip (measured: docs/measurements/code.md), and calls
from other threads or loops travel to it as they would to the own thread, while it runs.
PeriodicTask: background steps every few seconds on that loop (the inline sweep, the young tables' statistics).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from memory_agent.errors import ServiceClosedError

T = TypeVar("T")

CLOSED = "the MemoryService is closed; open it again (or use a new one) to run rounds"
CLOSED_WHILE_RUNNING = "the MemoryService was closed while this call was running; nothing more of it ran"
NOT_RUNNING = (
    "the event loop this MemoryService was opened on (MEMORY_AGENT_EVENT_LOOP=caller) is not running, so nothing "
    "can run on it; call the service from that loop while it runs, or use MEMORY_AGENT_EVENT_LOOP=own"
)


class MemoryLoop:
    def __init__(self, name: str = "memory_agent", *, attach: asyncio.AbstractEventLoop | None = None) -> None:
        """A loop on a thread of its own, or (`attach`) the running loop of the calling thread."""
        self._lock = threading.Lock()
        self._closed = False
        self.owns_thread = attach is None
        if attach is not None:
            self.loop = attach
            self._thread = threading.current_thread()
            return
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _refuse(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Under the lock: a closed service, or an attached loop that stopped, runs nothing."""
        if self._closed:
            coro.close()
            raise ServiceClosedError(CLOSED)
        if not self.owns_thread and (self.loop.is_closed() or not self.loop.is_running()):
            coro.close()
            raise ServiceClosedError(NOT_RUNNING)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        # Under the lock: a call either runs (and stop() cancels it) or is refused, never left waiting forever.
        with self._lock:
            self._refuse(coro)
            return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run on the memory loop and block the calling thread until done."""
        if self.in_loop_thread and (self.owns_thread or self.loop.is_running()):
            coro.close()
            if not self.owns_thread:
                raise RuntimeError(
                    "a blocking call (invoke, a sync method) on the thread of the event loop this MemoryService "
                    "runs on (MEMORY_AGENT_EVENT_LOOP=caller) would wait for that loop forever; await the async "
                    "form (ainvoke), call it from another thread, or use MEMORY_AGENT_EVENT_LOOP=own"
                )
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

        A round makes two of these trips (start, end), so they carry no concurrent.futures.Future: the task is
        started on the memory loop and settles a future of the caller's loop directly, cheaper than
        `run_coroutine_threadsafe` + `wrap_future` (docs/measurements/code.md).
        """
        caller = asyncio.get_running_loop()
        if caller is self.loop:
            return await (asyncio.shield(coro) if shield else coro)
        done: asyncio.Future[T] = caller.create_future()
        started: list[asyncio.Task[T]] = []

        def settle(task: asyncio.Task[T]) -> None:  # on the caller's loop
            if done.cancelled():  # the caller gave up: the outcome is read here so it is not reported unread
                if not task.cancelled():
                    task.exception()
                return
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        def finished(task: asyncio.Task[T]) -> None:  # on the memory loop
            if not caller.is_closed():
                caller.call_soon_threadsafe(settle, task)

        def start() -> None:  # on the memory loop
            task = self.loop.create_task(coro)
            started.append(task)
            task.add_done_callback(finished)

        # Under the lock, as submit(): the call either starts (and stop() cancels it) or is refused.
        with self._lock:
            self._refuse(coro)
            self.loop.call_soon_threadsafe(start)
        try:
            return await (asyncio.shield(done) if shield else done)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._closed and done.cancelled() and not (current and current.cancelling()):
                raise ServiceClosedError(CLOSED_WHILE_RUNNING) from None
            if not shield:  # the caller gave up: so does the work (`start` ran first: the loop's FIFO)
                with contextlib.suppress(RuntimeError):  # the memory loop closed meanwhile
                    self.loop.call_soon_threadsafe(lambda: started[0].cancel())
            raise

    async def _cancel_the_rest(self) -> None:
        current = asyncio.current_task()
        rest = [task for task in asyncio.all_tasks() if task is not current]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def stop(self) -> None:
        """Refuse new calls, cancel what is still running (its callers get ServiceClosedError), stop. An attached
        loop is the application's: it is left running, and its other tasks alone."""
        with self._lock:
            if self._closed or self.loop.is_closed():
                return
            self._closed = True
        if not self.owns_thread:
            return
        if not self.in_loop_thread and self._thread.is_alive():
            # A task that refuses to end: the loop stops anyway.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._cancel_the_rest(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()


class PeriodicTask:
    """`steps` one after another every `interval_s` seconds, as a task on the loop that starts it (0: off).

    Each step is (what it is, a coroutine function); a step that fails is logged on `logger` as "<what> failed"
    and the next step and the next tick still run (the database may be briefly away). Used for the inline
    executor's stale-row sweep and the young tables' statistics (sql/definitions: analyze_young_tables).
    """

    def __init__(
        self, interval_s: float, steps: list[tuple[str, Callable[[], Awaitable[Any]]]], logger: logging.Logger
    ) -> None:
        self.interval_s = interval_s
        self.steps = steps
        self.logger = logger
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.interval_s > 0 and self.steps:
            # A fresh context: the steps inherit nothing of whatever call opened the service.
            self._task = asyncio.get_running_loop().create_task(self._run(), context=contextvars.Context())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            for what, step in self.steps:
                try:
                    await step()
                except Exception as exc:
                    self.logger.warning("%s failed: %s", what, exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)  # a cancelled caller still sees its cancel
            self._task = None
