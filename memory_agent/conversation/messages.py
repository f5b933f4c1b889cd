"""A round's messages at the boundary: what may be stored, and how it is stored.

Validation raises InvalidInputError naming the bad message before anything is written; serialization
turns LangChain messages into the (role, content, message dict) rows of the `messages` table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, message_to_dict

from memory_agent.errors import InvalidInputError

MAX_CONVERSATION_ID_BYTES = 1024
MAX_MESSAGE_ID_BYTES = 512  # message ids are in an index key too


def storable_text(text: str) -> str:
    """`text` as PostgreSQL can store it: NUL (which `text` columns refuse) becomes U+FFFD, and a lone
    surrogate (which UTF-8 cannot encode) becomes `?`. For model output and error messages, which must
    always reach their row."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def role_of(message: BaseMessage) -> str:
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, SystemMessage):
        return "system"
    return message.type


def _utf8_size(text: str, what: str) -> int:
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
    size = _utf8_size(value, what)
    if size > max_bytes:
        # Bytes, not characters: the id is in every index key, whose size PostgreSQL limits.
        raise InvalidInputError(
            f"{what} is {size} bytes long in UTF-8 ({len(value)} characters); at most {max_bytes} bytes are allowed"
        )
    return value


def validate_conversation_id(conversation_id: Any) -> str:
    return check_key_part(conversation_id, "thread_id", MAX_CONVERSATION_ID_BYTES)


def _check_message(message: Any, position: int) -> BaseMessage:
    """A LangChain message whose content is a string or a list of content blocks."""
    if not isinstance(message, BaseMessage):
        raise InvalidInputError(
            f"message {position} is a {type(message).__name__}, not a LangChain message "
            "(HumanMessage, AIMessage, ToolMessage, ...)"
        )
    content = message.content
    if isinstance(content, str):
        return message
    if isinstance(content, list) and all(isinstance(block, (str, dict)) for block in content):
        return message
    raise InvalidInputError(
        f"message {position} ({type(message).__name__}) has content of type {type(content).__name__}; "
        "content must be a string or a list of content blocks"
    )


# A NUL in any string of a message: JSON writes it as \u0000, and a literal backslash before "u0000" as \\.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def serialize_round(messages: Sequence[Any]) -> tuple[list[str], list[str], list[str]]:
    """(roles, contents, message JSON texts) ready to store; raises InvalidInputError naming the bad message."""
    if not messages:
        raise InvalidInputError("a round needs a user message (HumanMessage); none was given")
    roles, contents, payloads = [], [], []
    for position, message in enumerate(messages):
        _check_message(message, position)
        what = f"message {position} ({type(message).__name__})"
        payload = json.dumps(message_to_dict(message), default=str, ensure_ascii=False)  # JSON types only
        if "\\u0000" in payload and _JSON_NUL.search(payload):  # the substring test first: far cheaper
            raise InvalidInputError(
                f"{what} contains a NUL character, which PostgreSQL cannot store; remove it before sending the message"
            )
        _utf8_size(payload, what)
        if message.id is not None and _utf8_size(str(message.id), f"{what} id") > MAX_MESSAGE_ID_BYTES:
            raise InvalidInputError(f"{what} has an id over {MAX_MESSAGE_ID_BYTES} bytes; use a shorter id")
        roles.append(role_of(message))
        contents.append(str(message.text))
        payloads.append(payload)
    return roles, contents, payloads


def check_user_messages(messages: Sequence[BaseMessage]) -> None:
    """A round carries at least one user message, and no empty one."""
    if not any(isinstance(m, HumanMessage) for m in messages):
        raise InvalidInputError("a round needs a user message (HumanMessage); none was given")
    for position, message in enumerate(messages):
        if (
            isinstance(message, HumanMessage)
            and not str(message.text).strip()
            and not (isinstance(message.content, list) and message.content)
        ):
            raise InvalidInputError(f"message {position} (HumanMessage) is empty")


def validate_round_input(messages: Any, *, need_user: bool = True) -> list[BaseMessage]:
    """The messages a caller starts a round with: LangChain messages, at least one from the user."""
    if not isinstance(messages, (list, tuple)):
        raise InvalidInputError(f"a round's input must be a list of messages, got {type(messages).__name__}")
    checked = [_check_message(message, position) for position, message in enumerate(messages)]
    if need_user:
        check_user_messages(checked)
    return checked
