"""Recall's vector path in two passes (0025): the compact copies (signs of each vector minus its model's center),
ranked by Hamming distance, keep the nearest 4 × candidates for the exact cosine ranking. It finds what an exact
scan of the user's vectors finds; vectors stored before the compact copies existed are ranked exactly until the
embedding job writes their copies."""

from __future__ import annotations

import itertools
from typing import Any

import psycopg
from psycopg.rows import dict_row

from memory_agent.db.migrate import load_migrations
from memory_agent.db.schema import SchemaManager
from memory_agent.evaluation import StoredItem, store_conversation, store_item
from memory_agent.long_term import ItemScope
from memory_agent.long_term.embedders import HashingEmbeddings
from memory_agent.long_term.embeddings import index_items, index_pending, to_vector_literal
from memory_agent.long_term.recall import RecallSettings, recall
from memory_agent.service.backend import MemoryBackend
from tests.conftest import execute, query
from tests.long_term.recall_fixtures import at, conn  # noqa: F401 (conn is a fixture)
from tests.migration.old_releases import build_release

TENANT, USER = "t1", "ana"
SUBJECTS = ["sister", "landlord", "dentist", "neighbour", "piano teacher", "manager", "cousin", "coach"]
PLACES = ["Lisbon", "Osaka", "Nairobi", "Quebec", "Tromsø", "Cusco", "Hanoi", "Zagreb", "Perth", "Dakar"]
THINGS = ["bicycles", "orchids", "sourdough", "chess", "kayaks", "vinyl records"]
# 8 × 10 × 6 = 480 items: the first pass keeps 4 × candidates = 32 of them.
CONTENTS = [
    f"The user's {subject} in {place} collects {thing}"
    for subject, place, thing in itertools.product(SUBJECTS, PLACES, THINGS)
]
QUERIES = [
    "my dentist from Osaka and the orchids",
    "who in Tromsø likes chess?",
    "coach in Dakar with kayaks",
    "landlord Hanoi sourdough bread",
    "cousin's vinyl records in Perth",
    "piano teacher, Zagreb, bicycles",
    "the neighbour who lives in Cusco",
    "manager Quebec",
]
# The exact scan, and the distances of the items recall found (ties may come in either order: compared by distance).
EXACT = """
SELECT round((e.embedding <=> %(query)s::vector)::numeric, 6) AS distance FROM item_embeddings AS e
WHERE e.user_id = %(user_id)s AND e.model = %(model)s
ORDER BY distance
LIMIT %(limit)s
"""
FOUND = """
SELECT round((e.embedding <=> %(query)s::vector)::numeric, 6) AS distance FROM item_embeddings AS e
WHERE e.user_id = %(user_id)s AND e.model = %(model)s AND e.item_id = ANY(%(found)s)
ORDER BY distance
"""
FOUND_IDS = """
SELECT e.item_id, round((e.embedding <=> %(query)s::vector)::numeric, 6) AS distance FROM item_embeddings AS e
WHERE e.user_id = %(user_id)s AND e.model = %(model)s AND e.item_id = ANY(%(found)s)
"""


async def test_the_compact_first_pass_finds_the_nearest_an_exact_scan_finds(conn: Any) -> None:
    for n, content in enumerate(CONTENTS):
        await store_item(
            conn,
            scope=ItemScope(tenant_id=TENANT, user_id=USER),
            item=StoredItem(item_type="fact", key=f"fact_{n}", content=content, valid_from=at(0)),
        )
    embedder = HashingEmbeddings()
    assert await index_items(conn, tenant_id=TENANT, user_id=USER, embedder=embedder) == len(CONTENTS)
    # Every vector has its compact copy: the first pass ranks them all (none falls back to the exact ranking).
    (counts,) = await (
        await conn.execute("SELECT count(*) AS n, count(embedding_bits) AS bits FROM item_embeddings")
    ).fetchall()
    assert counts == {"n": len(CONTENTS), "bits": len(CONTENTS)}
    settings = RecallSettings(candidates=8, vector_min_similarity=-1, vectors_always=True)
    found_exact = 0
    for text in QUERIES:
        result = await recall(
            conn, tenant_id=TENANT, user_id=USER, query=text, paths=("vector",), embedder=embedder, settings=settings
        )
        found = [hit.item_ids[0] for hit in result.ranked]
        params = {
            "user_id": USER,
            "model": embedder.model,
            "query": to_vector_literal(embedder.embed_query(text)),
            "limit": settings.candidates,
        }
        exact = [row["distance"] for row in await (await conn.execute(EXACT, params)).fetchall()]
        distances = [
            row["distance"] for row in await (await conn.execute(FOUND, {**params, "found": found})).fetchall()
        ]
        assert len(found) == settings.candidates
        # Ranked by their exact distances, nearest first.
        by_id = {
            row["item_id"]: row["distance"]
            for row in await (await conn.execute(FOUND_IDS, {**params, "found": found})).fetchall()
        }
        assert [by_id[item] for item in found] == sorted(by_id.values()), text
        found_exact += sum(1 for distance in distances if distance <= exact[-1])
    # The first pass keeps 4 × candidates of 480 by their compact copies: (nearly) all of the exact nearest among
    # them. Hashing vectors, whose signs say less than a model's, are the harder case.
    print(f"exact nearest found: {found_exact} of {len(QUERIES) * settings.candidates}")
    assert found_exact >= 0.9 * len(QUERIES) * settings.candidates


async def test_a_vector_stored_before_the_compact_copies_is_ranked_exactly_then_gets_its_copy(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    build_release(url, 24)  # the schema before 0025 (vectors without compact copies), recorded as migrate does
    for migration in load_migrations():
        if migration.version <= 24:
            execute(url, "ALTER TABLE memory_agent.schema_migrations ADD COLUMN IF NOT EXISTS checksum TEXT")
            execute(
                url,
                "UPDATE memory_agent.schema_migrations SET checksum = %s WHERE version = %s",
                [migration.checksum, migration.version],
            )
    embedder = HashingEmbeddings()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as old:
        await old.execute("SET search_path TO memory_agent, public")
        item_id = await store_item(
            old,
            scope=ItemScope(tenant_id=TENANT, user_id=USER),
            item=StoredItem(
                item_type="preference", key="theme", content="The user prefers the dark theme", valid_from=at(0)
            ),
        )
        await store_conversation(
            old, "c1", [("user", "I sail on Lake Constance every summer.", at(0))], tenant_id=TENANT, user_id=USER
        )
        keys = {"user_id": USER, "tenant_id": TENANT, "model": embedder.model}
        await old.execute(
            "INSERT INTO item_embeddings (user_id, tenant_id, item_id, model, embedding)"
            " VALUES (%(user_id)s, %(tenant_id)s, %(item_id)s, %(model)s, %(embedding)s::vector)",
            {
                **keys,
                "item_id": item_id,
                "embedding": to_vector_literal(embedder.embed_query("The user prefers the dark theme")),
            },
        )
        await old.execute(
            "INSERT INTO message_embeddings (user_id, tenant_id, conversation_id, sequence_number, model, embedding)"
            " SELECT user_id, tenant_id, conversation_id, sequence_number, %(model)s, %(embedding)s::vector"
            " FROM messages WHERE user_id = %(user_id)s",
            {**keys, "embedding": to_vector_literal(embedder.embed_query("I sail on Lake Constance every summer."))},
        )

    pool = MemoryBackend.create_pool(url, max_size=1)
    await pool.open(wait=True)
    try:
        await SchemaManager(MemoryBackend(pool)).migrate()  # the upgrade: 0025 and what follows
        async with pool.connection() as conn:
            conn.row_factory = dict_row
            bits = "SELECT embedding_bits IS NULL AS missing FROM {} "
            for table in ("item_embeddings", "message_embeddings"):
                assert await (await conn.execute(bits.format(table))).fetchall() == [{"missing": True}]
            # Without its compact copy, the vector is still found (ranked exactly).
            settings = RecallSettings(vector_min_similarity=-1, vectors_always=True)
            for text, kind in (("darkish thematic?", "item"), ("sailing a lake", "turn")):
                result = await recall(
                    conn,
                    tenant_id=TENANT,
                    user_id=USER,
                    query=text,
                    paths=("vector",),
                    embedder=embedder,
                    settings=settings,
                )
                assert kind in [hit.kind for hit in result.ranked], text
            # The periodic catch-up finds the user and writes the copies: the item's vector is not embedded again;
            # the turn's, made from the turn alone, is made again from its text with its context (0028).
            assert await index_pending(conn, embedder) == 1
            assert await index_pending(conn, embedder) == 0
    finally:
        await pool.close()
    expected = (
        "SELECT e.embedding_bits = binary_quantize(e.embedding - v.center) FROM memory_agent.{} AS e"
        " JOIN memory_agent.vector_centers AS v USING (model)"
    )
    for table in ("item_embeddings", "message_embeddings"):
        assert query(url, expected.format(table)) == [(True,)], table
