"""One rule for ids in both tiers: an id a round accepts is an id the long-term tier accepts, and the same id is
refused by both (conversation/identity.py is the one validator)."""

from __future__ import annotations

import pytest

from memory_agent import InvalidInputError
from memory_agent.conversation.identity import MAX_IDENTITY_BYTES, validate_identity, validate_user_id
from memory_agent.long_term import ItemOrigin, ItemScope, list_items, remember
from memory_agent.schemas.keys import ConversationKey, UserKey
from tests.conftest import query
from tests.long_term.conftest import T0, items

ACCEPTED = (
    "u" * 300,  # 300 characters, 300 bytes
    "é" * 256,  # 256 characters, 512 bytes: at the limit
    "\U0001f600" * 128,  # 128 characters, 512 bytes
)
REFUSED = (
    "u" * (MAX_IDENTITY_BYTES + 1),
    "é" * 200 + "\U0001f600" * 30,  # 230 characters, 520 bytes
    " ",
    "a\x00b",
)


@pytest.mark.parametrize("user_id", ACCEPTED, ids=["ascii-300", "2-byte-at-limit", "4-byte-at-limit"])
async def test_an_id_a_round_accepts_the_long_term_tier_accepts(conn, database_url, user_id):
    assert validate_user_id(user_id) == user_id
    assert validate_identity(user_id, "tenant_id") == user_id
    structured = items(facts=[("home_city", "The user lives in Lyon")])
    await remember(
        conn,
        scope=ItemScope(tenant_id=user_id, user_id=user_id),
        items=structured,
        source=ItemOrigin(conversation_id=None, memory_id=None),
        now=T0,
    )
    assert [item.content for item in await list_items(conn, UserKey.checked(user_id, user_id))] == [
        "The user lives in Lyon"
    ]
    assert query(database_url, "SELECT count(*) FROM items WHERE user_id = %s", (user_id,)) == [(1,)]


@pytest.mark.parametrize("user_id", REFUSED, ids=["ascii-513", "mixed-520-bytes", "blank", "nul"])
async def test_an_id_a_round_refuses_the_long_term_tier_refuses_alike(conn, database_url, user_id):
    with pytest.raises(InvalidInputError) as by_round:
        validate_user_id(user_id)
    structured = items(facts=[("home_city", "The user lives in Lyon")])
    with pytest.raises(InvalidInputError) as by_long_term:
        await remember(
            conn,
            scope=ItemScope(tenant_id="acme", user_id=user_id),
            items=structured,
            source=ItemOrigin(conversation_id=None, memory_id=None),
            now=T0,
        )
    assert str(by_long_term.value) == str(by_round.value)
    with pytest.raises(InvalidInputError):
        await list_items(conn, UserKey.checked(user_id, "alice"))
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]


def test_the_default_tenant_and_the_implicit_scope_are_defined_once():
    from memory_agent.long_term import store

    key = ConversationKey.of("t1")
    assert (key.tenant_id, key.user_id) == (store.DEFAULT_TENANT_ID, "conversation:t1")
    with pytest.raises(InvalidInputError, match="reserved"):
        validate_user_id(key.user_id)
