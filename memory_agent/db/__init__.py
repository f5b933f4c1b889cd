"""database access: pool, migrations, named queries.

The only code that talks to PostgreSQL. Owns the connection pool, transactions and driver-error mapping
(backend.py runs every named query of sql/), opening a database (connect.py), the zero-setup embedded server
(embedded.py), the migrations (migrate.py: numbered files, sql/definitions/; migrate_procrastinate.py:
procrastinate's schema). The row key (tenant, user, the per-conversation default scope) is schemas/keys.py.
May import: errors, settings, schemas, resources. Never conversation/, summarize/, jobs/, integrations/,
observability/, cli/ nor service/.
"""
