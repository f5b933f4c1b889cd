"""memory_agent on Citus: the distribution of every table (sql/distribution.sql), applied by the migrator after
the migrations whenever the citus extension is installed in the database. A part of SchemaManager (schema.py, which
runs its statements), under the migrations' session lock and in their schema.

While a table of the schema is not distributed (a fresh schema, or a migration added one), the migrations'
transaction distributes it before it creates the views and functions of sql/definitions: created over a table
Citus does not know yet, each would be made on the coordinator alone, with a WARNING ("... has dependency to table
... that is not in Citus' metadata"). Created after it, they reach the workers as every later re-creation does; in
the same transaction, so no process ever finds the schema without them. The file runs again after them, for the
settings it gives the functions. The views a released migration creates (0003's)
are dropped for the definitions' in the same transaction: they are made on the coordinator alone, without the
warning (citus.enable_ddl_propagation off for that statement).
"""

from __future__ import annotations

import logging
from typing import Any

from memory_agent import resources

# The run's statements (db/schema.py's SchemaStatements), named without importing the module that holds this part.
SchemaStatements = Any

logger = logging.getLogger("memory_agent.migrate")


class CitusDistribution:
    """sql/distribution.sql in `schema`, through a migration run's SchemaStatements."""

    def __init__(self, schema: str) -> None:
        self.schema = schema

    async def distribute_tables(self, db: SchemaStatements) -> None:
        """sql/distribution.sql in the current transaction (the migrations'), before the definitions are created."""
        await db.run_script(resources.distribution(), split=True)

    async def distribute(self, db: SchemaStatements, *, changed: bool) -> bool:
        """Apply sql/distribution.sql when citus is installed and the definitions were re-created (`changed`: they
        lose what the file sets on them) or a table of the schema is not distributed yet; whether it was applied."""
        async with db.transaction():
            await db.enter_schema(create=False)
            if not await db.citus_installed():
                return False
            if not changed and not await db.undistributed():
                return False
            await db.run_script(resources.distribution(), split=True)
        logger.info("Applied memory_agent's Citus distribution to schema %s", self.schema)
        return True
