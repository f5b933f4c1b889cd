"""The database: the only code that talks to PostgreSQL.

Owns the connection pool, transactions and driver-error mapping (backend.py runs every named query of
sql/), opening a database (connect.py) and the zero-setup embedded server (embedded.py).
May import: errors, settings, schemas, resources. Never conversation/, summarize/, jobs/, integrations/,
observability/, cli/ nor service.py.
"""
