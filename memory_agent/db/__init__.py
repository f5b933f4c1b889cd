"""database access: the driver seam, the schema, the embedded server.

Three modules run statements. connector.py is the driver seam: the only code that touches psycopg cursors, with
the one driver-error mapping (driver_errors.py) and the one unit of work, `Connector.session()` (the pooled
connection, its tenant named one way, the transaction and pipeline). schema.py's `SchemaManager(connector)` holds
memory_agent's migrations (migrate.py: numbered files, sql/definitions/), procrastinate's schema
(migrate_procrastinate.py) and the Citus distribution (citus.py) as parts, and runs their statements. embedded/ is
the zero-setup server (lifetime.py runs the one statement of its first start). Opening a database (connect.py)
and the pool (pooled.py) go through those. Each tier names its own statements in its query object built on a
Connector (conversation/queries.py, summarize/queries.py, ...). The row key (tenant, user, the per-conversation
default scope) is schemas/keys.py.
May import: errors, settings, schemas, resources. Never conversation/, summarize/, jobs/, integrations/,
observability/, cli/ nor service/.
"""
