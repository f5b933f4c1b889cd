"""The package's layout, measured from outside: what issue "one seam per concern" asks to hold.

    python tools/layout.py           # every measure, with its target
    python tools/layout.py --check   # the same, exit status 1 when a target is missed

The measures (read from the source, except MemoryService's members and the classes' bases, read from the
imported package):
- modules that run statements: a module runs statements when it calls a Connector's fetch_all / fetch_one /
  execute_query / execute_many, one of the module-level statement functions of db/connector.py (under any name
  it imports them as), or a psycopg `execute` / `executemany`; counted in all and per first-level package
  (a sub-package, or a top-level module) outside db/;
- classes with two or more of the package's own classes as bases (mixins);
- pairs of first-level packages importing each other (imports under TYPE_CHECKING and inside functions count);
- MemoryService's public members;
- README.md's lines;
- modules over 320 lines.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "memory_agent"

# The statement-running calls (the Connector's methods and db/connector.py's module-level functions)...
CONNECTOR_CALLS = {"fetch_all", "fetch_one", "execute_query", "execute_many", "fetch_one_sync", "send"}
# ... and the driver's own.
DRIVER_CALLS = {"execute", "executemany"}

MOST_STATEMENT_MODULES = 12
MOST_MEMBERS = 25
MOST_README_LINES = 250
MOST_MODULE_LINES = 320


def source_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def unit_of(path: Path) -> str:
    """The first-level package a module belongs to: its sub-package, or itself for a top-level module."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0].removesuffix(".py")


def _imported_statement_names(tree: ast.AST) -> set[str]:
    """The names a module gives db/connector.py's statement functions (`fetch_all as fetch` -> fetch)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "memory_agent.db.connector":
            names.update(alias.asname or alias.name for alias in node.names if alias.name in CONNECTOR_CALLS)
    return names


def runs_statements(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    local = _imported_statement_names(tree) | (CONNECTOR_CALLS if path.name == "connector.py" else set())
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in CONNECTOR_CALLS | DRIVER_CALLS:
            return True
        if isinstance(node.func, ast.Name) and node.func.id in local:
            return True
    return False


def statement_modules() -> dict[str, list[str]]:
    """{first-level package: its modules that run statements}."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in source_modules():
        if runs_statements(path):
            found[unit_of(path)].append(str(path.relative_to(ROOT)))
    return dict(sorted(found.items()))


def _imports(path: Path) -> Iterator[str]:
    """Every memory_agent module a module imports, wherever the import stands (TYPE_CHECKING blocks included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(("memory_agent", *path.relative_to(PACKAGE).parts[:-1]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against the module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield ".".join([*base, *([node.module] if node.module else [])])
            elif node.module:
                yield node.module


def package_imports() -> dict[str, set[str]]:
    """{first-level package: the other first-level packages it imports}."""
    graph: dict[str, set[str]] = defaultdict(set)
    units = {unit_of(path) for path in source_modules()}
    for path in source_modules():
        unit = unit_of(path)
        for module in _imports(path):
            parts = module.split(".")
            if parts[0] == "memory_agent" and len(parts) > 1 and parts[1] in units and parts[1] != unit:
                graph[unit].add(parts[1])
    return graph


def import_cycles() -> list[tuple[str, str]]:
    """Pairs of first-level packages that import each other."""
    graph = package_imports()
    return sorted({tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph.get(b, ())})  # type: ignore[misc]


def _classes() -> Iterator[type]:
    import memory_agent

    names = ["memory_agent", *(info.name for info in pkgutil.walk_packages(memory_agent.__path__, "memory_agent."))]
    for name in sorted(names):
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if value.__module__ == name:
                yield value


def mixin_classes() -> list[str]:
    """Classes with two or more of memory_agent's own classes as bases."""
    found = []
    for klass in _classes():
        own = [base for base in klass.__bases__ if base.__module__.startswith("memory_agent")]
        if len(own) >= 2:
            found.append(f"{klass.__module__}.{klass.__qualname__}({', '.join(b.__name__ for b in own)})")
    return sorted(set(found))


def service_members() -> list[str]:
    from memory_agent.service import MemoryService

    return [name for name in dir(MemoryService) if not name.startswith("_")]


def readme_lines() -> int:
    return len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())


def long_modules() -> dict[str, int]:
    lengths = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in source_modules()}
    return {path: lines for path, lines in lengths.items() if lines > MOST_MODULE_LINES}


@dataclass
class Measure:
    name: str
    value: object
    target: str
    met: bool
    detail: list[str]


def measures() -> list[Measure]:
    statements = statement_modules()
    total = sum(len(modules) for modules in statements.values())
    crowded = {unit: modules for unit, modules in statements.items() if unit != "db" and len(modules) > 1}
    cycles = import_cycles()
    mixins = mixin_classes()
    members = service_members()
    readme = readme_lines()
    long = long_modules()
    return [
        Measure(
            "modules that run statements",
            total,
            f"<= {MOST_STATEMENT_MODULES}",
            total <= MOST_STATEMENT_MODULES,
            [f"{unit}: {len(modules)}" for unit, modules in statements.items()],
        ),
        Measure(
            "first-level packages outside db/ with more than one",
            len(crowded),
            "0",
            not crowded,
            [f"{unit}: {', '.join(modules)}" for unit, modules in crowded.items()],
        ),
        Measure("classes with two of the package's own bases", len(mixins), "0", not mixins, mixins),
        Measure(
            "pairs of first-level packages importing each other",
            len(cycles),
            "0",
            not cycles,
            [f"{a} <-> {b}" for a, b in cycles],
        ),
        Measure("MemoryService public members", len(members), f"<= {MOST_MEMBERS}", len(members) <= MOST_MEMBERS, []),
        Measure("README.md lines", readme, f"<= {MOST_README_LINES}", readme <= MOST_README_LINES, []),
        Measure(
            f"modules over {MOST_MODULE_LINES} lines",
            len(long),
            "0",
            not long,
            [f"{path}: {lines}" for path, lines in sorted(long.items())],
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a target is missed")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    missed = 0
    for measure in measures():
        missed += not measure.met
        print(f"{'ok    ' if measure.met else 'MISSED'} {measure.name}: {measure.value} (target {measure.target})")
        for line in measure.detail:
            print(f"         {line}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
