"""The key of every row: a tenant and a user (the distribution column), and the scope used when a round names none.

A round without a user id gets the per-conversation scope `conversation:<thread id>`: its rows are keyed as if
the thread were its own user, so nothing is shared across threads and each thread lands on one shard.
"""

from __future__ import annotations

DEFAULT_TENANT_ID = "default"
CONVERSATION_SCOPE_PREFIX = "conversation:"


def default_user_id(conversation_id: str) -> str:
    """The user id of a conversation whose rounds name no user: the conversation's own scope."""
    return CONVERSATION_SCOPE_PREFIX + conversation_id
