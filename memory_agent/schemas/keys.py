"""The key of every row: a tenant and a user (the distribution column), and the scope used when a round names none.

A round without a user id gets the per-conversation scope `conversation:<thread id>`: its rows are keyed as if
the thread were its own user, so nothing is shared across threads and each thread lands on one shard.
The rules of an id (check_key_part) live here, and a key is checked once, when it is built (UserKey.of,
UserKey.checked): the layers below take the key and do not check it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memory_agent.errors import InvalidInputError

DEFAULT_TENANT_ID = "default"
CONVERSATION_SCOPE_PREFIX = "conversation:"
MAX_CONVERSATION_ID_BYTES = 1024
# A user or tenant id sits beside the thread id in every key: half its room.
MAX_IDENTITY_BYTES = 512


def default_user_id(conversation_id: str) -> str:
    """The user id of a conversation whose rounds name no user: the conversation's own scope."""
    return CONVERSATION_SCOPE_PREFIX + conversation_id


def utf8_size(text: str, what: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} contains a lone surrogate ({text[exc.start]!r} at character {exc.start}), which is not "
            "valid Unicode and cannot be stored; encode the text correctly"
        ) from None


def check_key_part(value: Any, what: str, max_bytes: int) -> str:
    """A part of every row's key (a thread, user or tenant id; `what` names it): a non-empty string without NUL
    of at most `max_bytes` in UTF-8."""
    if not isinstance(value, str):
        raise InvalidInputError(
            f"{what} must be a non-empty string, got {type(value).__name__}; "
            f'pass config={{"configurable": {{"{what}": "..."}}}}'
        )
    if not value.strip():
        raise InvalidInputError(f"{what} must be a non-empty string, got an empty or blank one")
    if "\x00" in value:
        raise InvalidInputError(f"{what} contains a NUL character, which PostgreSQL text cannot store")
    size = utf8_size(value, what)
    if size > max_bytes:
        # Bytes, not characters: the id is in every index key, whose size PostgreSQL limits.
        raise InvalidInputError(
            f"{what} is {size} bytes long in UTF-8 ({len(value)} characters); at most {max_bytes} bytes are allowed"
        )
    return value


def validate_conversation_id(conversation_id: Any) -> str:
    return check_key_part(conversation_id, "thread_id", MAX_CONVERSATION_ID_BYTES)


def validate_identity(value: Any, what: str) -> str:
    """A tenant id (or any id beside a user's; `what` names its config key): a non-empty string of at most
    MAX_IDENTITY_BYTES in UTF-8, without NUL."""
    return check_key_part(value, what, MAX_IDENTITY_BYTES)


def validate_user_id(value: Any, what: str = "user_id") -> str:
    """A user id a caller gives: as validate_identity, and not in the reserved implicit-scope form."""
    user_id = validate_identity(value, what)
    if user_id.startswith(CONVERSATION_SCOPE_PREFIX):
        raise InvalidInputError(
            f"{what} {user_id[:80]!r} starts with {CONVERSATION_SCOPE_PREFIX!r}, which is reserved for the scope of "
            "conversations run without a user; choose a user id without that prefix"
        )
    return user_id


def zone_named(name: Any, what: str) -> ZoneInfo:
    """The time zone an IANA name gives ("Europe/Paris", "UTC"; `what` names where it came from, as an error says
    it): a user's time, in which recall reads "yesterday" or "last week" and dates the turns it shows."""
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        raise InvalidInputError(f"{what} must be a time zone name such as 'Europe/Paris' or 'UTC', got {name!r:.80}")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder of the zone database ("Europe")
        raise InvalidInputError(
            f"{what} {name!r:.80} is no time zone this machine knows: give an IANA name such as 'Europe/Paris', "
            "'America/New_York' or 'UTC'"
        ) from None


@dataclass(frozen=True)
class UserKey:
    """A user in a tenant, checked when built: what every long-term statement is scoped by."""

    tenant_id: str
    user_id: str

    @classmethod
    def of(cls, user_id: Any, tenant_id: Any = None) -> UserKey:
        """The key of a user a caller names (the service, the HTTP API, the CLI): no tenant → 'default'; a user id
        in the reserved implicit-scope form is refused."""
        user = validate_user_id(user_id)
        return cls(DEFAULT_TENANT_ID if tenant_id is None else validate_identity(tenant_id, "tenant_id"), user)

    @classmethod
    def checked(cls, tenant_id: Any, user_id: Any) -> UserKey:
        """The key of a row's owner as stored (a conversation's own scope included): both ids by the one rule of
        ids (an empty id would pool callers' rows, an over-long one fail in an index key)."""
        return cls(validate_identity(tenant_id, "tenant_id"), validate_identity(user_id, "user_id"))

    def params(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "user_id": self.user_id}


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

    @property
    def user(self) -> UserKey:
        """The conversation's owner (its ids were checked when the round's identity was read)."""
        return UserKey(self.tenant_id, self.user_id)

    def params(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "user_id": self.user_id, "conversation_id": self.conversation_id}
