"""The tenant a piece of work runs for, for row-level security (sql/migrations/0008, sql/migrations/0020).

The tables carry policies `tenant_id = current_setting('memory_agent.tenant_id', true)`; they bind a role that
does not own the tables. Work that belongs to one tenant (a round, a summary, a user's reads and erasures) runs
inside `tenant_scope(tenant_id)`: a context variable, so it follows the work into the tasks it starts. When the
connected role is bound by the policies (detected at open: `row_security_active`), every connection the backend
hands out names that tenant for its session, or no tenant ('': no row at all) outside a scope; a role that owns
the tables pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_tenant: ContextVar[str | None] = ContextVar("memory_agent_tenant", default=None)


@contextmanager
def tenant_scope(tenant_id: str | None) -> Iterator[None]:
    """Run the block (and the tasks it starts) for `tenant_id` (None: for no tenant)."""
    token = _tenant.set(tenant_id)
    try:
        yield
    finally:
        _tenant.reset(token)


def current_tenant() -> str | None:
    """The tenant of the running work, None outside tenant_scope."""
    return _tenant.get()
