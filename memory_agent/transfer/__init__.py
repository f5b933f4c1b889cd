"""A user's memory as one JSON document: read (document.py) and written back (load.py), for the right of access
and for moving a user to another database or tenant. Above both tiers: it reads and writes the rows of each, and
may import db, conversation and long_term; only the service, api and cli import it."""

from memory_agent.transfer.document import FORMAT, SCHEMA_VERSION, dumps, read_user
from memory_agent.transfer.load import ImportedUser, write_user

__all__ = ["FORMAT", "SCHEMA_VERSION", "ImportedUser", "dumps", "read_user", "write_user"]
