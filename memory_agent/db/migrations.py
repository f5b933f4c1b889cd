"""The migration files: memory_agent's numbered files with their checksums, the re-creatable definitions, and
procrastinate's own migration files (what db/migrate.py applies)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from memory_agent import resources

NO_TRANSACTION_MARKER = "-- memory_agent: no-transaction"
_MIGRATION_NAME = re.compile(r"^(?P<version>\d{4})_(?P<name>[a-z0-9_]+)\.sql$")
_PROCRASTINATE_NAME = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+)_(?P<step>\d+)_[a-z0-9_]+\.sql$")
_STATEMENT_END = re.compile(r";[ \t]*$", re.MULTILINE)

# sha256 of 0001-0005 as released, before schema_migrations had a checksum column: the backfill of databases
# migrated by those releases. A file that no longer hashes to this was edited after release.
RELEASED_CHECKSUMS = {
    1: "d2542b5fe42e05de65991b55d6c1c38fe2de990f0b5c4aa092ccf50c40b0cdfb",
    2: "1f786c27d973618e085b38cbb1ad294d99082bc88b932e3f4b9bf29b0ac629f6",
    3: "c11ef0f4b1cf201dd33998a20e111f168d107d9ffd94582a3542a2033d99957e",
    4: "fb50da504f33b4fa4675056fb49fb7597221459576a6207a7d48f3ba645d40d8",
    5: "2472a707d92992f070655240ea3bd5292977495781849cea9ed594f39d7cb0a2",
}

# A procrastinate schema created by a memory_agent release that did not record its level is dated by the newest
# of these functions it holds (each added by the migration named; pyproject requires procrastinate >= 3.0).
PROCRASTINATE_MARKERS = (
    ("procrastinate_retry_job_v2", "03.04.00_50_post_add_retry_failed_job_procedure.sql"),
    ("procrastinate_defer_jobs_v1", "03.02.00_50_post_batch_defer_jobs.sql"),
    ("procrastinate_register_worker_v1", "03.01.00_50_post_add_heartbeat.sql"),
    ("procrastinate_defer_job_v1", "03.00.00_50_post_cancel_notification.sql"),
)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    filename: str
    text: str
    checksum: str
    transactional: bool

    def statements(self) -> list[str]:
        """The file's statements, for a no-transaction file (split at `;` ending a line)."""
        parts = _STATEMENT_END.split(self.text)
        return [part.strip() for part in parts if _strip_comments(part).strip()]


@dataclass
class MigrationReport:
    """What one run applied (empty lists: the schema was up to date)."""

    applied: list[str] = field(default_factory=list)
    definitions: list[str] = field(default_factory=list)
    procrastinate: list[str] = field(default_factory=list)
    distributed: bool = False  # sql/distribution.sql applied (Citus)

    @property
    def versions(self) -> list[int]:
        return [int(name[:4]) for name in self.applied]


# What a `;` inside of does not end a statement: dollar-quoted bodies, string literals, comments.
_SQL_TOKEN = re.compile(r"\$(?:[A-Za-z_]\w*)?\$|'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/|;", re.DOTALL)


def split_statements(text: str) -> list[str]:
    """A SQL file's statements, one by one: Citus propagates a DDL statement to its workers with the text it came
    in, and a worker refuses a text of several commands, so on Citus a file runs statement by statement."""
    statements, start, position = [], 0, 0
    while (token := _SQL_TOKEN.search(text, position)) is not None:
        found = token.group(0)
        position = token.end()
        if found.startswith("$"):  # a dollar-quoted body runs to the same tag
            closing = text.find(found, position)
            position = len(text) if closing < 0 else closing + len(found)
        elif found == ";":
            statements.append(text[start:position])
            start = position
    statements.append(text[start:])
    return [statement.strip() for statement in statements if _strip_comments(statement).strip()]


_CONCURRENT_INDEX = re.compile(
    r'^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(?:"((?:[^"]|"")+)"|(\w+))',
    re.IGNORECASE,
)
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


def concurrent_index(statement: str) -> str | None:
    """The index a `CREATE INDEX CONCURRENTLY IF NOT EXISTS` statement builds, as PostgreSQL names it (None: another
    statement). A build that failed or was cut short leaves the index invalid, and IF NOT EXISTS would skip it from
    then on: the runner drops such an index before the statement runs again."""
    found = _CONCURRENT_INDEX.match(_BLOCK_COMMENT.sub(" ", _strip_comments(statement)))
    if found is None:
        return None
    quoted, plain = found.groups()
    return quoted.replace('""', '"') if quoted is not None else plain.lower()


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def checksum(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_migrations(directory: Path | None = None) -> list[Migration]:
    """The numbered files of sql/migrations/ (or `directory`), in version order."""
    found = []
    for path in sorted((directory or resources.migrations_dir()).glob("[0-9][0-9][0-9][0-9]_*.sql")):
        match = _MIGRATION_NAME.match(path.name)
        if match is None:
            raise ValueError(f"migration file name {path.name!r} must look like 0001_name.sql")
        data = path.read_bytes()
        text = data.decode("utf-8")
        head = text.lstrip().splitlines()[:5]
        found.append(
            Migration(
                version=int(match["version"]),
                name=match["name"],
                filename=path.name,
                text=text,
                checksum=checksum(data),
                transactional=not any(line.strip() == NO_TRANSACTION_MARKER for line in head),
            )
        )
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"two migrations share a version number: {versions}")
    return found


def definition_files() -> list[tuple[str, str, str]]:
    return [(name, text, checksum(text.encode("utf-8"))) for name, text in resources.definitions()]


def procrastinate_key(filename: str) -> tuple[int, int, int, int]:
    match = _PROCRASTINATE_NAME.match(filename)
    if match is None:
        raise ValueError(f"unexpected procrastinate migration file name {filename!r}")
    return (int(match["major"]), int(match["minor"]), int(match["patch"]), int(match["step"]))


def procrastinate_migrations() -> list[Path]:
    """procrastinate's own migration files, oldest first."""
    from procrastinate.schema import SchemaManager

    paths = [p for p in Path(SchemaManager.get_migrations_path()).glob("*.sql") if _PROCRASTINATE_NAME.match(p.name)]
    return sorted(paths, key=lambda p: procrastinate_key(p.name))
