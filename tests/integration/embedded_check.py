"""Start the embedded server at a long data directory path and report, as JSON, what another local user could do.

Run in-process by the test (as whoever runs the suite) and, when that is root, as a fresh non-root OS user.
Usage: python -m tests.integration.embedded_check BASE_DIR
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_agent.db.embedded import remove_data_dir, secret_path, start_embedded_postgres, stop_embedded_postgres


def modes(path: Path) -> dict[str, int]:
    return {str(p): stat.S_IMODE(p.stat().st_mode) for p in [path, *path.parents]}


def check(base: Path) -> dict[str, object]:
    # Longer than a unix socket path may be (~107 bytes): the wheel moves the socket out of the data directory.
    data_dir = base / ("d" * 60) / ("e" * 60) / "pgdata"
    before = modes(base)
    uri = start_embedded_postgres(data_dir, cleanup_mode="delete")
    params = conninfo_to_dict(uri)
    socket_dir = Path(str(params["host"]))
    report: dict[str, object] = {
        "ancestor_modes_changed": {p: [m, modes(base)[p]] for p, m in before.items() if modes(base)[p] != m},
        "socket_outside_data_dir": not socket_dir.is_relative_to(data_dir),
        "socket_dir_mode": stat.S_IMODE(socket_dir.stat().st_mode),
        "secret_mode": stat.S_IMODE(secret_path(data_dir).stat().st_mode),
    }
    with psycopg.connect(uri) as conn:
        report["trust_rules"] = conn.execute(
            "SELECT count(*) FROM pg_hba_file_rules WHERE auth_method = 'trust'"
        ).fetchone()[0]  # type: ignore[index]
    without_password = make_conninfo(**{k: v for k, v in params.items() if k != "password"})
    try:
        psycopg.connect(without_password, connect_timeout=5).close()
        report["connects_without_password"] = True
    except psycopg.OperationalError as exc:
        report["connects_without_password"] = False
        report["refusal"] = str(exc)
    if os.geteuid() == 0:  # root can also try as a third user, as a local attacker would
        from memory_agent.db.embedded.install import server_bin_dir

        psql = str(server_bin_dir() / "psql")
        attempt = subprocess.run(
            ["runuser", "-u", "nobody", "--", psql, without_password, "-c", "SELECT 1"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        report["other_user"] = {"returncode": attempt.returncode, "stderr": attempt.stderr}
    stop_embedded_postgres(data_dir)
    remove_data_dir(data_dir)
    return report


if __name__ == "__main__":
    print(json.dumps(check(Path(sys.argv[1]))))
