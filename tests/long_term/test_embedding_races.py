"""The embedding job against forgetting: it embeds between transactions, so a forget can commit while the model
answers. A vector is written only onto the row that still holds the text embedded, under the user's forget lock:
an erased turn's vector never lands on the turn a later round stored at its key, and a forgotten item costs its
own vector only."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from typing import Any

import pytest

from memory_agent import with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import ItemOrigin, ItemScope, forget_item, remember
from memory_agent.long_term.embedders import HashingEmbeddings
from memory_agent.long_term.embeddings import CONTEXT_CHARS, index_items, turn_passage
from memory_agent.schemas.keys import UserKey
from tests.conftest import execute, query
from tests.long_term.conftest import at, items
from tests.long_term.test_forget import rounds
from tests.support import EchoChat


class HeldEmbeddings(HashingEmbeddings):
    """The hashing embedder, holding the first batch that holds `needle` until the test releases it."""

    def __init__(self, needle: str) -> None:
        super().__init__()
        self.needle = needle
        self.held: list[str] = []
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if not self.held and any(self.needle in text for text in texts):
            self.held = list(texts)
            self.asked.set()
            await self.release.wait()
        return self.embed_documents(texts)


async def embedded_while(embedder: HeldEmbeddings, job: Any, meanwhile: Any) -> int:
    """Run the indexing `job` until the embedder holds its batch, run `meanwhile` to its end, then let it answer."""
    running = asyncio.ensure_future(job)
    await asyncio.wait_for(embedder.asked.wait(), 30)
    await meanwhile()
    embedder.release.set()
    return await asyncio.wait_for(running, 30)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def stored_turn_vectors(url: str) -> list[tuple[str, list[float]]]:
    """Each stored turn vector with the text the job makes it from for the turns now stored at its key and before
    it (the turn with the turn before it: turn_passage)."""
    rows = query(
        url,
        "SELECT coalesce((m.message -> 'data' ->> 'name') || ': ', '') || m.content,"
        " (SELECT b.message -> 'data' ->> 'name' FROM messages AS b WHERE b.conversation_id = m.conversation_id"
        "  AND b.sequence_number < m.sequence_number AND b.role IN ('user', 'assistant') AND b.content <> ''"
        "  ORDER BY b.sequence_number DESC LIMIT 1),"
        " (SELECT right(b.content, %s) FROM messages AS b WHERE b.conversation_id = m.conversation_id"
        "  AND b.sequence_number < m.sequence_number AND b.role IN ('user', 'assistant') AND b.content <> ''"
        "  ORDER BY b.sequence_number DESC LIMIT 1),"
        " e.embedding::text"
        " FROM message_embeddings AS e JOIN messages AS m USING (user_id, conversation_id, sequence_number)"
        " ORDER BY e.conversation_id, e.sequence_number",
        [CONTEXT_CHARS],
    )
    return [
        (turn_passage({"content": own, "previous_name": name, "previous_tail": tail}), json.loads(vector))
        for own, name, tail, vector in rows
    ]


@pytest.mark.parametrize("erasure", ["delete_conversation", "forget_user"])
async def test_an_erased_turn_s_vector_never_lands_on_the_turn_a_later_round_stored_at_its_key(
    open_memory, database_url, conn, erasure
):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    memory = await open_memory(model=OfflineSummaryModel())  # no embedder: the test runs the job itself
    app = with_memory(EchoChat().graph, memory)
    await rounds(app, "thread", [f"the code word is {canary}", f"again {canary} please"])
    assert await memory.drain(timeout=10)
    embedder = HeldEmbeddings(canary)

    async def erase_and_run_the_thread_again() -> None:
        if erasure == "delete_conversation":
            assert await memory.delete_conversation("thread", user_id="ana")
        else:
            await memory.long_term.forget_user("ana")
        assert query(database_url, "SELECT count(*) FROM messages WHERE strpos(content, %s) > 0", [canary]) == [(0,)]
        # The same thread id again: its turns take the erased turns' keys (sequence numbers start over).
        await rounds(app, "thread", ["what is the weather like", "and tomorrow"])
        assert await memory.drain(timeout=10)

    job = index_items(conn, tenant_id="default", user_id="ana", embedder=embedder)
    await embedded_while(embedder, job, erase_and_run_the_thread_again)

    erased = [vector for text, vector in zip(embedder.held, embedder.embed_documents(embedder.held)) if canary in text]
    assert len(erased) == 4  # the two turns that said it, and the replies made with them (the turn before)
    stored = stored_turn_vectors(database_url)
    for text, vector in stored:
        # Every stored vector is the vector of the text stored at its key, none the erased text's.
        assert cosine(vector, embedder.embed_query(text)) == pytest.approx(1.0, abs=1e-5), text
        assert all(cosine(vector, gone) < 0.99 for gone in erased), text
    # The new turns the job skipped are embedded by the next indexing, with their own text.
    await index_items(conn, tenant_id="default", user_id="ana", embedder=HashingEmbeddings())
    stored = stored_turn_vectors(database_url)
    assert len(stored) == 4
    assert all(cosine(vector, embedder.embed_query(text)) == pytest.approx(1.0, abs=1e-5) for text, vector in stored)


async def write_items(conn: Any, canary: str) -> None:
    facts = [("allergies", f"The user is allergic to {what} {canary}", {"single_valued": False}) for what in "abc"]
    await remember(
        conn,
        scope=ItemScope(tenant_id="acme", user_id="ana"),
        source=ItemOrigin(conversation_id=None, memory_id=None),
        items=items(facts=facts),
        now=at(0),
    )


async def test_an_item_forgotten_while_its_batch_is_embedded_costs_its_own_vector_only(conn, connect, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    await write_items(conn, canary)
    ids = [row[0] for row in query(database_url, "SELECT item_id FROM items ORDER BY item_id")]
    assert len(ids) == 3
    embedder = HeldEmbeddings(canary)

    async def forget_the_second() -> None:
        report = await forget_item(await connect(), UserKey("acme", "ana"), ids[1])
        assert report.items_deleted == (ids[1],)

    written = await embedded_while(
        embedder, index_items(conn, tenant_id="acme", user_id="ana", embedder=embedder), forget_the_second
    )
    assert written == 2
    assert query(database_url, "SELECT item_id FROM item_embeddings ORDER BY item_id") == [(ids[0],), (ids[2],)]


async def test_an_item_whose_text_changed_while_it_was_embedded_gets_no_vector_of_the_old_text(conn, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    await write_items(conn, canary)
    first = query(database_url, "SELECT min(item_id) FROM items")[0][0]
    embedder = HeldEmbeddings(canary)

    async def rewrite_the_first() -> None:
        # As a cluster summary refreshed in place: same item id, new text (its refresh drops the vector it has).
        execute(
            database_url, "UPDATE items SET content = 'The user is allergic to nothing' WHERE item_id = %s", [first]
        )

    written = await embedded_while(
        embedder, index_items(conn, tenant_id="acme", user_id="ana", embedder=embedder), rewrite_the_first
    )
    assert written == 2
    assert first not in [row[0] for row in query(database_url, "SELECT item_id FROM item_embeddings")]
    # The next indexing embeds the new text.
    assert await index_items(conn, tenant_id="acme", user_id="ana", embedder=HashingEmbeddings()) == 1
    ((vector,),) = query(database_url, "SELECT embedding::text FROM item_embeddings WHERE item_id = %s", [first])
    expected = HashingEmbeddings().embed_query("The user is allergic to nothing")
    assert cosine(json.loads(vector), expected) == pytest.approx(1.0, abs=1e-5)


async def test_the_job_s_write_waits_for_a_forget_of_the_user_in_progress(conn, connect, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    await write_items(conn, canary)
    embedder = HeldEmbeddings(canary)
    forgetting = await connect()
    job = conn.info.backend_pid

    async def hold_the_forget_lock() -> None:
        await forgetting.execute("BEGIN")
        await forgetting.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(concat_ws(chr(31), 'memory_agent.forget', 'ana', 'acme'), 0))"
        )

    running = asyncio.ensure_future(index_items(conn, tenant_id="acme", user_id="ana", embedder=embedder))
    await asyncio.wait_for(embedder.asked.wait(), 30)
    await hold_the_forget_lock()
    embedder.release.set()
    # The write waits on the forget's lock (what every background writer does), whatever it found to write.
    watching = await connect()

    async def wait_event() -> Any:
        cursor = await watching.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", [job])
        return (await cursor.fetchone() or [None])[0]

    for _ in range(500):
        if await wait_event() == "advisory":
            break
        await asyncio.sleep(0.01)
    assert await wait_event() == "advisory" and not running.done()
    await forgetting.execute("DELETE FROM items WHERE user_id = 'ana'")
    await forgetting.execute("COMMIT")
    assert await asyncio.wait_for(running, 30) == 0
    assert query(database_url, "SELECT count(*) FROM item_embeddings") == [(0,)]
