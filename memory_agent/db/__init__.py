"""database access: pool, migrations, named queries.

The only code that talks to PostgreSQL. connector.py is the one seam every package runs its statements through:
fetch one, fetch all, execute, on a given connection or a pooled one, with the one driver-error mapping; it owns
the pool's transactions. backend.py holds the conversation tier's statements; opening a database (connect.py),
the zero-setup embedded server (embedded.py), the migrations (migrate.py: numbered files, sql/definitions/;
migrate_procrastinate.py: procrastinate's schema). The row key (tenant, user, the per-conversation default scope)
is schemas/keys.py.
May import: errors, settings, schemas, resources. Never conversation/, summarize/, jobs/, integrations/,
observability/, cli/ nor service/.
"""
