"""Finds the SQL migrations, definitions, named queries and prompt files, in an installed wheel or in the source tree;
and where the package was installed from (for install hints that work)."""

from __future__ import annotations

import functools
import json
import re
from importlib import metadata, resources
from pathlib import Path
from typing import LiteralString

_QUERY_HEADER = re.compile(r"^-- (?P<name>[a-z_]+) --$", re.MULTILINE)


def _resource_dir(name: str) -> Path:
    # The wheel carries sql/ and prompts/ inside the package; a source checkout has them at the top.
    packaged = resources.files("memory_agent") / name
    if packaged.is_dir():
        return Path(str(packaged))
    source = Path(__file__).resolve().parent.parent / name
    if source.is_dir():
        return source
    raise FileNotFoundError(f"memory_agent resource folder {name!r} is missing from the installation")


def sql_dir() -> Path:
    return _resource_dir("sql")


def migrations_dir() -> Path:
    """sql/migrations/: the numbered schema files, applied once each, never changed once released."""
    return sql_dir() / "migrations"


def queries_dir() -> Path:
    """sql/queries/: one file of named statements per package (conversation, long_term, recall, ...)."""
    return sql_dir() / "queries"


def definitions_dir() -> Path:
    """sql/definitions/: the views and functions, re-created by `migrate` whenever their text changes."""
    return sql_dir() / "definitions"


def prompts_dir() -> Path:
    return _resource_dir("prompts")


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split a queries file into {name: statement}; the line after a header is its description."""
    queries: dict[str, LiteralString] = {}
    headers = list(_QUERY_HEADER.finditer(text))
    for header, following in zip(headers, [*headers[1:], None]):
        body = text[header.end() : following.start() if following else len(text)]
        lines = [line for line in body.strip().splitlines() if not line.startswith("--")]
        queries[header["name"]] = "\n".join(lines).strip().rstrip(";")
    return queries


@functools.cache
def queries() -> dict[str, LiteralString]:
    """Every named query of sql/queries/ (names are unique across files)."""
    merged: dict[str, LiteralString] = {}
    for path in sorted(queries_dir().glob("*.sql")):
        for name, statement in parse_queries(path.read_text(encoding="utf-8")).items():
            if name in merged:
                raise ValueError(f"query {name!r} is defined twice (second time in {path.name})")
            merged[name] = statement
    return merged


def definitions() -> list[tuple[str, str]]:
    """[(file name, sql)] of sql/definitions/, in name order: the views and functions, re-created when changed."""
    return [(path.name, path.read_text(encoding="utf-8")) for path in sorted(definitions_dir().glob("*.sql"))]


def distribution() -> str:
    """sql/distribution.sql: where every table lives on Citus (applied by `migrate` when citus is installed)."""
    return (sql_dir() / "distribution.sql").read_text(encoding="utf-8")


@functools.cache
def prompt(name: str) -> str:
    return (prompts_dir() / f"{name}.txt").read_text(encoding="utf-8")


def _direct_url() -> str | None:
    """The installation's direct_url.json (PEP 610): where pip installed it from; None from an index."""
    try:
        return metadata.distribution("memory-agent").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None


def install_source() -> str:
    """What `pip install` takes to install this package again: the checkout's directory when it was installed
    from one (or runs from one), else its name on a package index."""
    direct = _direct_url()
    url = str(json.loads(direct).get("url", "")) if direct else ""
    if url.startswith("file://"):
        return url.removeprefix("file://")
    checkout = Path(__file__).resolve().parent.parent
    if direct is None and (checkout / "pyproject.toml").is_file():
        return str(checkout)
    return "memory-agent"


def install_hint(extra: str) -> str:
    """The command that installs the optional dependencies of `extra`, from where this package came from. An
    editable installation (`make`'s, `pip install -e`) is told `-e`: without it pip would replace it with a copy,
    and edits of the checkout would no longer run."""
    direct = _direct_url()
    editable = bool(direct and json.loads(direct).get("dir_info", {}).get("editable"))
    return f"pip install {'-e ' if editable else ''}'{install_source()}[{extra}]'"
