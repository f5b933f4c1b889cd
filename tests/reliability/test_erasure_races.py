"""Erasing a conversation while rounds of it run: locks are taken in one order, so neither side deadlocks."""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage, HumanMessage

from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import query


async def test_delete_conversation_racing_rounds_never_deadlocks(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), pool_max_size=8, multitask_timeout_s=60)
    thread = "raced"

    async def rounds(loop_number: int) -> None:
        for n in range(25):
            text = f"loop {loop_number} round {n}"
            messages, info = await memory.conversations.prepare_round(thread, [HumanMessage(text)])
            await memory.conversations.finish_round(thread, [HumanMessage(text), AIMessage(f"ok {text}")], info)

    async def deletes() -> list[bool]:
        done = []
        for _ in range(15):
            await asyncio.sleep(0.01)
            done.append(await memory.delete_conversation(thread))
        return done

    results = await asyncio.gather(*(rounds(i) for i in range(4)), deletes(), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, "\n".join(str(e.__cause__ or e) for e in errors)
    assert any(results[4]), "no delete found the conversation: the race was not exercised"
    # Whatever survived is consistent: every stored message belongs to a conversation row.
    assert query(
        database_url,
        "SELECT count(*) FROM messages AS m WHERE NOT EXISTS (SELECT 1 FROM conversations AS c "
        "WHERE c.user_id = m.user_id AND c.conversation_id = m.conversation_id)",
    ) == [(0,)]
