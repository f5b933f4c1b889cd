"""The key of every row: a tenant and a user (the distribution column), and the scope used when a round names none.

A round without a user id gets the per-conversation scope `conversation:<thread id>`: its rows are keyed as if
the thread were its own user, so nothing is shared across threads and each thread lands on one shard.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TENANT_ID = "default"
CONVERSATION_SCOPE_PREFIX = "conversation:"


def default_user_id(conversation_id: str) -> str:
    """The user id of a conversation whose rounds name no user: the conversation's own scope."""
    return CONVERSATION_SCOPE_PREFIX + conversation_id


@dataclass(frozen=True)
class ConversationKey:
    """A conversation and its owner: every statement on a conversation's rows is scoped by all three."""

    conversation_id: str
    user_id: str
    tenant_id: str = DEFAULT_TENANT_ID

    @classmethod
    def of(cls, conversation_id: str, user_id: str | None = None, tenant_id: str | None = None) -> ConversationKey:
        """The key of a round: no user → the conversation's own scope; no tenant → 'default'."""
        return cls(conversation_id, user_id or default_user_id(conversation_id), tenant_id or DEFAULT_TENANT_ID)
