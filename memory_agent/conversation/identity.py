"""Who a round belongs to: the one validator of user and tenant ids, and where a run names its user.

A run names its user (and tenant) in one of three places, read in this order:

1. the LangGraph server's authenticated user: `config["configurable"]["langgraph_auth_user_id"]`, which the
   server sets from the auth handler of `langgraph.json` after any value a client sent; its tenant is the
   authenticated user's field named MEMORY_AGENT_TENANT_ID_KEY (absent: the default tenant). When the server
   has authenticated a user, nothing a client sends (context or configurable) can name another user or tenant.
2. the run's runtime context (LangGraph's `context_schema`, `graph.invoke(..., context=...)`, what
   `create_agent` passes to middleware as `runtime.context`): its field or key MEMORY_AGENT_USER_ID_KEY
   (default `user_id`) and MEMORY_AGENT_TENANT_ID_KEY (default `tenant_id`);
3. `config["configurable"]` under those same keys.

A blank or absent id is "no user": the round uses the conversation's own scope (`conversation:<thread id>`),
and a DEBUG line says so. A blank tenant beside a named user is refused (InvalidInputError): taken as absent it
would put the user's memory in the default tenant, shared with every user of that id whose tenant was blank too. That scope's prefix is reserved: a user id a caller gives (a run's config, the
service's methods, the HTTP API, the CLI, the store's namespaces) may not start with it, so no caller can name
a conversation's implicit scope and read its memory.

A run names its user's time zone (an IANA name) as `time_zone` in the runtime context or `config["configurable"]`
(round_time_zone); absent, MEMORY_AGENT_RECALL_TIME_ZONE, else the service clock's zone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from memory_agent.errors import InvalidInputError
from memory_agent.schemas.keys import MAX_IDENTITY_BYTES as MAX_IDENTITY_BYTES
from memory_agent.schemas.keys import validate_conversation_id, validate_identity, validate_user_id, zone_named

logger = logging.getLogger(__name__)

AUTH_USER_ID_KEY = "langgraph_auth_user_id"  # set by the LangGraph server from its auth handler
AUTH_USER_KEY = "langgraph_auth_user"
RUNTIME_KEY = "__pregel_runtime"  # where LangGraph's runner keeps a run's Runtime (langgraph.runtime.get_runtime)


def _field(source: Any, key: str) -> Any:
    """`source[key]` for a mapping (a TypedDict context, the server's user object), else its attribute (a
    dataclass or pydantic context)."""
    if source is None:
        return None
    if isinstance(source, Mapping) or callable(getattr(source, "get", None)):
        return source.get(key)
    return getattr(source, key, None)


def _named(value: Any) -> bool:
    """Whether a source names an id: None and blank strings are "no id"; anything else is checked later."""
    return value is not None and not (isinstance(value, str) and not value.strip())


def _refuse_blank_tenant(where: str, user_id: str) -> None:
    raise InvalidInputError(
        f"{where} is blank while the run names user {user_id[:80]!r}: a blank tenant would put that user's memory in "
        "the default tenant, beside every same-named user whose tenant was blank too; name the tenant, or leave the "
        "key out to use the default tenant on purpose"
    )


def _origin(where: str, value: Any, configurable: Mapping[str, Any], key: str) -> str:
    """Where an id came from, as an error names it: a LangGraph server copies `configurable` into the run's
    context, so a value found in both was sent in `configurable`."""
    if where != key and configurable.get(key) == value:
        return key
    return where


def round_identity(
    configurable: Mapping[str, Any], user_key: str = "user_id", tenant_key: str = "tenant_id"
) -> tuple[str, str | None, str | None]:
    """(thread id, user id, tenant id) of a run's `config["configurable"]`, in the order of the module docstring;
    None where no source names one."""
    if "thread_id" not in configurable:
        raise InvalidInputError(
            'memory_agent needs a conversation id: pass config={"configurable": {"thread_id": "<conversation id>"}}'
        )
    thread_id = validate_conversation_id(configurable["thread_id"])
    auth_user = configurable.get(AUTH_USER_ID_KEY)
    if _named(auth_user):
        tenant = _field(configurable.get(AUTH_USER_KEY), tenant_key)
        where = f"{AUTH_USER_KEY}.{tenant_key}"
        auth_user_id = validate_user_id(auth_user, AUTH_USER_ID_KEY)
        if tenant is not None and not _named(tenant):
            _refuse_blank_tenant(where, auth_user_id)
        return thread_id, auth_user_id, validate_identity(tenant, where) if tenant is not None else None
    context = getattr(configurable.get(RUNTIME_KEY), "context", None)
    user_id = tenant_id = None
    for where, source in ((f"context.{user_key}", context), (user_key, configurable)):
        value = _field(source, user_key)
        if _named(value):
            user_id = validate_user_id(value, _origin(where, value, configurable, user_key))
            break
    blank_at = None
    for where, source in ((f"context.{tenant_key}", context), (tenant_key, configurable)):
        value = _field(source, tenant_key)
        if _named(value):
            tenant_id = validate_identity(value, _origin(where, value, configurable, tenant_key))
            break
        if value is not None and blank_at is None:
            blank_at = where
    if tenant_id is None and blank_at is not None and user_id is not None:
        _refuse_blank_tenant(blank_at, user_id)
    if user_id is None:
        logger.debug("thread %r names no user: the round uses the conversation's own scope", thread_id)
    return thread_id, user_id, tenant_id


TIME_ZONE_KEY = "time_zone"


def round_time_zone(configurable: Mapping[str, Any]) -> str | None:
    """The user's time zone a run names (`time_zone` in its runtime context, else in `configurable`), checked;
    None where it names none (a blank value is none)."""
    context = getattr(configurable.get(RUNTIME_KEY), "context", None)
    for where, source in ((f"context.{TIME_ZONE_KEY}", context), (TIME_ZONE_KEY, configurable)):
        value = _field(source, TIME_ZONE_KEY)
        if _named(value):
            zone_named(value, _origin(where, value, configurable, TIME_ZONE_KEY))
            return str(value).strip()
    return None
