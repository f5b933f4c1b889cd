"""A process using the embedded server of DATA_DIR, as an application would.

Waits until the file GO exists (when given: lets a test start several at once), starts or joins the server,
prints {"uri": ..., "postmaster": <pid>, "started": <the server's start time>} as JSON, then keeps it until its
stdin closes and exits normally.
Usage: python -m tests.integration.embedded_user DATA_DIR MODE(stop|delete|keep) [GO]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import psycopg

from memory_agent.db.embedded import start_embedded_postgres


def main(data_dir: Path, mode: str, go: Path | None) -> None:
    while go is not None and not go.exists():
        time.sleep(0.005)
    install_dir = os.environ.get("MEMORY_AGENT_EMBEDDED_INSTALL_DIR")
    uri = start_embedded_postgres(
        data_dir, cleanup_mode=None if mode == "keep" else mode, install_dir=Path(install_dir) if install_dir else None
    )
    with psycopg.connect(uri) as conn:
        started = conn.execute("SELECT pg_postmaster_start_time()::text").fetchone()[0]  # type: ignore[index]
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    print(json.dumps({"uri": uri, "postmaster": postmaster, "started": started}), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]) if len(sys.argv) > 3 else None)
