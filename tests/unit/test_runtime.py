"""MemoryLoop.arun: results, errors and cancellation cross between the caller's loop and the memory loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memory_agent.errors import ServiceClosedError
from memory_agent.runtime import MemoryLoop


@pytest.fixture
def memory_loop():
    loop = MemoryLoop(name="test_memory_loop")
    yield loop
    loop.stop()


async def test_the_work_runs_on_the_memory_loop_and_its_result_or_error_comes_back(memory_loop):
    async def where() -> str:
        return threading.current_thread().name

    async def fails() -> None:
        raise ValueError("from the memory loop")

    assert await memory_loop.arun(where()) == "test_memory_loop"
    with pytest.raises(ValueError, match="from the memory loop"):
        await memory_loop.arun(fails())


async def test_a_cancelled_caller_cancels_the_work_unless_shielded(memory_loop):
    outcomes: dict[str, str] = {}
    started = {name: threading.Event() for name in ("plain", "shielded")}
    release = threading.Event()

    async def work(name: str) -> None:
        started[name].set()
        try:
            while not release.is_set():
                await asyncio.sleep(0.005)
            outcomes[name] = "finished"
        except asyncio.CancelledError:
            outcomes[name] = "cancelled"
            raise

    for name, shield in (("plain", False), ("shielded", True)):
        caller = asyncio.ensure_future(memory_loop.arun(work(name), shield=shield))
        await asyncio.to_thread(started[name].wait, 5)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
    release.set()
    for _ in range(200):
        if len(outcomes) == 2:
            break
        await asyncio.sleep(0.01)
    assert outcomes == {"plain": "cancelled", "shielded": "finished"}


async def test_calls_after_stop_and_calls_cut_short_by_stop_say_the_service_is_closed():
    memory_loop = MemoryLoop()
    running = threading.Event()

    async def forever() -> None:
        running.set()
        await asyncio.sleep(3600)

    caller = asyncio.ensure_future(memory_loop.arun(forever()))
    await asyncio.to_thread(running.wait, 5)
    await asyncio.to_thread(memory_loop.stop)
    with pytest.raises(ServiceClosedError, match="closed while this call was running"):
        await caller
    with pytest.raises(ServiceClosedError, match="is closed"):
        await memory_loop.arun(forever())
