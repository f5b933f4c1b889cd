"""The LangGraph store's keys and values, checked before any statement runs: how a (namespace, key) maps to an
item's columns (see store_rows.py), the limits PostgreSQL's index and jsonb set, and the text a value is searched
by. Pure functions: nothing here touches the database."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import ListNamespacesOp, MatchCondition
from langgraph.store.base.embed import get_text_at_path

from memory_agent.errors import InvalidInputError
from memory_agent.long_term.scope import Row
from memory_agent.schemas.items import ITEM_LISTS, ItemType
from memory_agent.schemas.keys import validate_user_id

# The key a search with a query gives an item that was not put through the store (store_recall.py): a UUID (LangMem
# updates and deletes by UUID) of version 8 (RFC 9562's custom layout) holding the item id in its last 48 bits.
DERIVED_ITEM_PREFIX = "6d656d6f-7279-8000-8000-"  # "memory" in hex
DERIVED_ITEM_KEY = re.compile(rf"^{DERIVED_ITEM_PREFIX}([0-9a-f]{{12}})$")


def derived_item_key(item_id: int) -> str:
    return f"{DERIVED_ITEM_PREFIX}{item_id:012x}"


STORE_SLOT_PREFIX = "store:"
_TYPE_OF_CATEGORY: dict[str, ItemType] = {**ITEM_LISTS, **{t: t for t in ITEM_LISTS.values()}}


@dataclass(frozen=True)
class StoreKey:
    """One (namespace, key) of the store, for one tenant."""

    tenant_id: str
    namespace: tuple[str, ...]
    key: str

    @property
    def user_id(self) -> str:
        return self.namespace[1]

    def params(self) -> Row:
        return {
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "project": "",
            "environment": "",
            "item_type": item_type_of(self.namespace),
            "key": self.key,
            "value_slot": STORE_SLOT_PREFIX + ".".join(self.namespace),
            "namespace": list(self.namespace),
        }


def item_type_of(namespace: tuple[str, ...]) -> ItemType:
    return _TYPE_OF_CATEGORY.get(namespace[0], "fact")


# A key and the namespace joined by '.' (the row's value_slot) sit in the items' unique key beside the user and
# tenant ids: PostgreSQL refuses an index entry past ~2.7 kB, so each gets at most 512 bytes of it.
MAX_KEY_BYTES = 512
MAX_NAMESPACE_BYTES = 512
# JSON nesting of a value: deeper values are refused before they reach the encoder (Python's recursion limit,
# ~1,000 levels, failed with RecursionError) or the server.
MAX_VALUE_DEPTH = 100


def checked_text(what: str, text: str, max_bytes: int | None = None) -> str:
    """`text` as PostgreSQL can store it, else InvalidInputError naming the limit: no NUL (text and jsonb refuse
    it), no lone surrogate (UTF-8 cannot encode one), at most `max_bytes` in UTF-8."""
    if "\x00" in text:
        raise InvalidInputError(f"{what} contains a NUL character, which PostgreSQL cannot store")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} contains a lone surrogate ({text[exc.start]!r} at character {exc.start}), which is not valid "
            "Unicode and cannot be stored"
        ) from None
    if max_bytes is not None and size > max_bytes:
        raise InvalidInputError(f"{what} is {size} bytes long in UTF-8; at most {max_bytes} bytes are allowed")
    return text


def user_of(namespace: tuple[str, ...], what: str = "namespace") -> str:
    """The user a namespace belongs to (its second label); every store call names one."""
    if len(namespace) < 2:
        raise InvalidInputError(
            f"{what} {namespace!r} names no user: store namespaces are (category, user_id, ...), e.g. "
            "('memories', user_id)"
        )
    validate_user_id(namespace[1], "the user label (namespace[1])")
    for position, label in enumerate(namespace):
        if not isinstance(label, str):
            raise InvalidInputError(f"{what} label {position} must be a string, got {type(label).__name__}")
        checked_text(f"{what} label {position}", label)
    checked_text(f"{what} (its labels joined by '.')", ".".join(namespace), MAX_NAMESPACE_BYTES)
    return namespace[1]


def store_key(tenant_id: str, namespace: tuple[str, ...], key: Any) -> StoreKey:
    user_of(namespace)
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"a store key must be a non-empty string, got {key!r}")
    checked_text("the store key", key, MAX_KEY_BYTES)
    return StoreKey(tenant_id, tuple(namespace), key)


def content_of(value: Mapping[str, Any], index: Sequence[str] | None = None) -> str:
    """The text a value is searched by: the text at the `index` paths (BaseStore's put(index=[...]): "field",
    "a.b", "list[*].text"), else its "content" field, else the whole value as JSON."""
    if index:
        found = [text for path in index for text in get_text_at_path(dict(value), path) if text.strip()]
        if found:
            return "\n".join(found).replace("\x00", "")
    content = value.get("content", value)
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, sort_keys=True)
    return text or json.dumps(dict(value), ensure_ascii=False, sort_keys=True)


def check_value(value: Any, what: str = "a store value") -> dict[str, Any]:
    """A JSON object PostgreSQL's jsonb can hold, as plain dicts and lists; InvalidInputError naming the limit
    otherwise (nothing is written): nested at most MAX_VALUE_DEPTH levels, every string and key without NUL or
    lone surrogates."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{what} must be a dict, got {type(value).__name__}")
    # Walked without recursion: a value nested thousands of levels deep must be refused, not crash the check.
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, (Mapping, list, tuple)):
            if depth > MAX_VALUE_DEPTH:
                raise InvalidInputError(f"{what} is nested more than {MAX_VALUE_DEPTH} levels deep")
            if isinstance(node, Mapping):
                for key in node:
                    if isinstance(key, str):
                        checked_text(f"a key of {what}", key)
                children = list(node.values())
            else:
                children = list(node)
            pending.extend((child, depth + 1) for child in children)
        elif isinstance(node, str):
            checked_text(f"a string of {what}", node)
    try:
        return json.loads(json.dumps(dict(value), ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} must be JSON-serializable: {exc}") from None


def index_of(index: Any) -> list[str] | None:
    """put's `index`: None (the value's "content", or the whole value) or the paths whose text is searched.
    False is refused: every item's text is searched and recalled (there is no unindexed item)."""
    if index is None:
        return None
    if index is False:
        raise InvalidInputError(
            "MemoryStore searches and recalls every item's text, so index=False cannot be honoured; put without "
            "index, or with index=[paths] naming the fields to search"
        )
    if not isinstance(index, list | tuple) or not index or not all(isinstance(p, str) and p for p in index):
        raise InvalidInputError(f"index must be None or a non-empty list of field paths, got {index!r}")
    return list(index)


def user_of_conditions(conditions: tuple[MatchCondition, ...] | None) -> str:
    for condition in conditions or ():
        path = tuple(condition.path)
        if condition.match_type == "prefix" and len(path) >= 2 and path[1] != "*":
            return user_of(path, "prefix")
    raise InvalidInputError(
        "list_namespaces needs a prefix naming the user, e.g. prefix=('memories', user_id): no store call reads "
        "across users"
    )


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want in ("*", got) for want, got in zip(path, labels))


def matching_namespaces(namespaces: list[tuple[str, ...]], op: ListNamespacesOp) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for namespace in namespaces:
        if not all(namespace_matches(namespace, condition) for condition in op.match_conditions or ()):
            continue
        shown = namespace[: op.max_depth] if op.max_depth is not None else namespace
        if shown not in found:
            found.append(shown)
    return found[op.offset : op.offset + op.limit]
