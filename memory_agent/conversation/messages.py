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
from memory_agent.schemas.keys import MAX_CONVERSATION_ID_BYTES as MAX_CONVERSATION_ID_BYTES
from memory_agent.schemas.keys import check_key_part as check_key_part
from memory_agent.schemas.keys import utf8_size as _utf8_size
from memory_agent.schemas.keys import validate_conversation_id as validate_conversation_id
from memory_agent.schemas.text import storable_text as storable_text

MAX_MESSAGE_ID_BYTES = 512  # message ids are in an index key too


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
