"""Recall searches with a bounded start of the message (MEMORY_AGENT_RECALL_MAX_QUERY_CHARS): a 100 KB message costs
what its first 2,000 characters cost, never seconds of trigram matching a round."""

from __future__ import annotations

import random
import string

from langchain_core.messages import AIMessage, HumanMessage

from memory_agent.evaluation import store_conversation
from memory_agent.long_term.recall import RecallSettings, bounded_query, recall
from tests.conftest import query
from tests.long_term.recall_fixtures import at, conn  # noqa: F401 (conn is a fixture)


def test_the_query_is_cut_after_a_word_within_the_limit():
    assert bounded_query("  short question  ", 100) == "short question"
    assert bounded_query("alpha beta gamma", 12) == "alpha beta"  # "gamma" would be cut: left out whole
    assert bounded_query("alpha beta gamma", 11) == "alpha beta"  # the cut falls on the space
    assert bounded_query("x" * 100_000, 2000) == "x" * 2000  # one word longer than the limit: cut where it is


async def test_a_100_kb_single_token_message_recalls_with_its_first_2000_characters(open_memory, database_url):
    memory = await open_memory()
    for n in range(3):
        await memory.conversations.finish_round(
            "earlier", [HumanMessage(f"my cat is called Miso {n}"), AIMessage("noted")], user_id="ana"
        )
    huge = "Miso" + "x" * 100_000
    messages, info = await memory.conversations.prepare_round("now", [HumanMessage(huge)], user_id="ana")
    await memory.conversations.finish_round("now", [HumanMessage(huge), AIMessage("ok")], info)
    ((used,),) = query(database_url, "SELECT query FROM round_metrics WHERE conversation_id = 'now'")
    assert used == huge[:2000]

    async def direct() -> str:
        async with memory.backend.session() as conn:
            result = await recall(
                conn, tenant_id="default", user_id="ana", query="cat " * 50_000, settings=RecallSettings()
            )
        return result.query

    used = await memory.loop.arun(direct())
    assert len(used) <= 2000 and used.startswith("cat cat")


def huge_turn(tail_word: str, size: int) -> str:
    """A turn of `size` characters: 20,000 of digit words (no trigram of a word of letters), then random words
    (incompressible: stored out of line as it is) with `tail_word` last, past full text's 100,000 characters."""
    rng = random.Random(7)
    head = " ".join(f"{n:05d}" for n in range(3400))
    tail = " ".join("".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range((size - len(head)) // 8))
    return f"{head} {tail} {tail_word}"


async def test_the_trigram_fallback_reads_a_bounded_slice_of_each_turn(conn):
    """A user's multi-MB turn costs recall's trigram fallback its first 10,000 characters (0027): a word past them
    is not matched by trigrams, and the statement fetches a few blocks of the turn's out-of-line storage, not the
    turn (it read it whole at every recall that fell back: a minute for a user with a 50 MB turn)."""
    turns = [("user", "my cat is called Miso", at(0)), ("assistant", "noted", at(0))]
    turns += [("user", huge_turn("zyxwvut", 4_000_000), at(1)), ("assistant", "ok", at(1))]
    await store_conversation(conn, "huge", turns, tenant_id="t1", user_id="ana")
    cur = await conn.execute(
        "SELECT reltoastrelid::regclass::oid AS toast, pg_column_size(content) AS stored"
        " FROM pg_class, messages WHERE oid = 'messages'::regclass AND length(content) > 100000"
    )
    row = await cur.fetchone()
    assert row["stored"] > 3_000_000  # out of line, uncompressed: reading it whole fetches ~500 blocks
    fetched = "SELECT pg_stat_get_xact_blocks_fetched(%s) AS blocks"

    for query_text, found in (("Misso", True), ("zyxwvtu", False)):
        async with conn.transaction():  # the counter is the transaction's own
            before = (await (await conn.execute(fetched, [row["toast"]])).fetchone())["blocks"]
            result = await recall(conn, tenant_id="t1", user_id="ana", query=query_text, paths=("fts", "trgm"))
            blocks = (await (await conn.execute(fetched, [row["toast"]])).fetchone())["blocks"] - before
        assert result.fts_hits == 0  # full text missed: the trigram fallback ran
        assert blocks < 100, blocks  # slices of its first 40 kB (its whole text: ~2,000 block fetches)
        texts = [hit.text for hit in result.ranked]
        assert ("my cat is called Miso" in texts) is found
        assert not any(text.startswith("00000") for text in texts)  # its word past the prefix is not matched
