"""MemoryBackend, the design's name for what the service holds of the database: a Connector on the pool (its unit
of work and statements, db/connector.py) with the two conversation-memory query objects built on it,
`conversations` (ConversationQueries) and `summaries` (SummaryQueries). Parts, not bases: the tiers take the query
object they need; the pool is made by `create_pool` and the schema handled by db/schema.py's SchemaManager."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from memory_agent.conversation.queries import ConversationQueries
from memory_agent.db.connector import Connector, Row
from memory_agent.db.pooled import create_pool
from memory_agent.summarize.queries import SummaryQueries

__all__ = ["MemoryBackend", "Row"]


class MemoryBackend(Connector):
    """A Connector on the memory_agent schema, with the conversation tier's statements (`conversations`) and the
    summary job's (`summaries`) on it."""

    create_pool = staticmethod(create_pool)

    def __init__(self, pool: AsyncConnectionPool, schema: str = "memory_agent") -> None:
        super().__init__(pool, schema)
        self.conversations = ConversationQueries(self)
        self.summaries = SummaryQueries(self)
