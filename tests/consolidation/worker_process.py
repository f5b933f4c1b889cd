"""A procrastinate worker running the consolidation tasks, for the crash test.

    python -m tests.consolidation.worker_process DATABASE_URL BLOCK_PERIOD MARKER

BLOCK_PERIOD (daily, weekly, monthly, or '' for none): the model call of that period writes MARKER and then
blocks until the process is killed. With no block the worker runs the jobs it finds and exits (wait=False).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import procrastinate
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from memory_agent.consolidation import ConsolidationRunner
from memory_agent.consolidation.schedule import register_tasks
from memory_agent.llm import OfflineConsolidationModel
from memory_agent.service.backend import MemoryBackend
from memory_agent.settings import MemorySettings

QUEUE = "memory_agent"


class BlockingModel(OfflineConsolidationModel):
    block_period: str = ""
    marker: str = ""

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        material = str(messages[-1].text)
        if self.block_period and material.startswith(f"Period: {self.block_period} "):
            Path(self.marker).write_text(material.splitlines()[0], encoding="utf-8")
            await asyncio.Event().wait()  # until SIGKILL
        return self._generate(messages, *args, **kwargs)


async def main(url: str, block_period: str, marker: str) -> None:
    pool = MemoryBackend.create_pool(url, "memory_agent")
    await pool.open(wait=True)
    try:
        app = procrastinate.App(connector=procrastinate.PsycopgConnector())
        model = BlockingModel(block_period=block_period, marker=marker)
        register_tasks(app, ConsolidationRunner(pool, model, MemorySettings(consolidation_enabled=True)), queue=QUEUE)
        async with app.open_async(pool=pool):
            await app.run_worker_async(queues=[QUEUE], wait=bool(block_period), install_signal_handlers=False)
    finally:
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
