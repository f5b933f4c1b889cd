"""On a Citus cluster: what `stats`, `inspect`, `at` and `report` read (memory_agent.observability)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.observability import reads as queries
from memory_agent.observability.upgrade import upgrade_report
from tests.support import EchoChat


async def test_the_observability_reads(open_memory):
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    config = {"configurable": {"thread_id": "seen", "user_id": "ana", "tenant_id": "acme"}}
    for n in range(6):
        await app.ainvoke({"messages": [HumanMessage(f"I like apples {n}.")]}, config)
    await app.ainvoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "anonymous"}})
    assert await memory.drain(timeout=30)
    backend = memory.backend

    async def read() -> None:
        row = await queries.conversation(backend, "seen")
        assert row["rounds"] == 6
        assert (await queries.conversation(backend, "anonymous"))["rounds"] == 1  # the thread's own scope
        chain = await queries.version_chain(backend, "seen")
        assert chain and {v["status"] for v in chain} == {"completed"}
        at = await queries.context_at(backend, "seen", 6)
        assert at.memory is not None and [m["role"] for m in at.input] == ["user"]
        seen = await queries.message_visibility(backend, "seen", 0, "apples")
        assert [r["round_number"] for r in seen] == [1, 2, 3, 4, 5, 6]
        assert seen[0]["visibility"] == "input" and seen[-1]["visibility"] == "summarized"
        assert await queries.stuck_processing(backend, 0.0) == []
        health = await queries.health(backend)
        assert health.totals["conversations"] == 2
        assert [r["conversation_id"] for r in await queries.window_progression(backend, "seen")]
        assert await queries.weekly_report(backend)
        assert await upgrade_report(backend, tenant_id="acme")

    await memory.loop.arun(read())
