"""The docs: a short README whose snippets run, and a reference (generated from the code at every docs build)
that names every setting, CLI command, HTTP route, error class and public name. `make docs` builds the site
with warnings as errors; these tests check what the generator produces against the code, independently."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
import typer

import memory_agent
from memory_agent.errors import ConfigurationError
from memory_agent.settings import MemorySettings
from tools import docs_reference

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


# --- the README -------------------------------------------------------------------------------------------------


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 250


def test_the_two_commands_are_shown():
    assert "make demo" in README and "make test" in README


def python_blocks() -> list[str]:
    blocks, inside, lines = [], False, []
    for line in README.splitlines():
        if line.strip() == "```python":
            inside, lines = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(lines))
        elif inside:
            lines.append(line)
    return blocks


def test_diagrams_need_no_script():
    """Diagrams are text: a Mermaid block shows as raw code on a site without its CDN script, offline."""
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    assert [str(p.relative_to(ROOT)) for p in pages if "```mermaid" in p.read_text(encoding="utf-8")] == []


def test_readme_python_snippets_compile():
    blocks = python_blocks()
    assert blocks
    for block in blocks:  # top-level `async with` / `await` as in a notebook or an async main
        compile(block, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_readme_snippets_import_what_exists():
    for block in python_blocks():
        for module, names in re.findall(r"^from (memory_agent[\w.]*) import ([\w, ]+)$", block, re.M):
            imported = importlib.import_module(module)
            for name in (n.strip() for n in names.split(",")):
                assert hasattr(imported, name), f"README imports {name} from {module}, which has no such name"


# --- the generated reference -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "page, marker",
    [
        ("settings", "settings"),
        ("cli", "cli"),
        ("http", "http"),
        ("errors", "errors"),
        ("python", "python"),
        ("modules", "modules"),
    ],
)
def test_each_reference_page_holds_its_generated_section(page, marker):
    text = (ROOT / "docs" / "reference" / f"{page}.md").read_text(encoding="utf-8")
    assert f"<!-- reference: {marker} -->" in text


def leaf_fields(model: type, path: str = "") -> list[str]:
    """Every setting's attribute path, nested settings models walked into."""
    from pydantic import BaseModel

    paths = []
    for name, field in model.model_fields.items():  # type: ignore[attr-defined]
        nested = docs_reference._model_class(field.annotation)
        if nested is not None and issubclass(nested, BaseModel):
            paths += leaf_fields(nested, f"{path}{name}.")
        else:
            paths.append(path + name)
    return paths


def test_every_setting_is_in_the_reference():
    page = docs_reference.settings_reference()
    rows = docs_reference.settings()
    assert sorted(row.path for row in rows) == sorted(leaf_fields(MemorySettings))
    for row in rows:
        assert f"| `{row.env}`<br>`{row.path}` |" in page
        assert row.description, f"{row.env} has no description: give the field a pydantic description"


def test_every_documented_variable_is_read(monkeypatch):
    """Each variable the reference names is the one MemorySettings reads: set to nonsense, it either changes the
    setting or is refused by name."""
    nonsense = "∅ not a value ∅"
    for row in docs_reference.settings():
        with monkeypatch.context() as patch:
            patch.setenv(row.env, nonsense)
            try:
                value = MemorySettings()
                for part in row.path.split("."):
                    value = getattr(value, part)
            except ConfigurationError as exc:
                assert row.env in str(exc), f"{row.env}: refused without being named: {exc}"
                continue
            assert nonsense in str(value), f"{row.env} is not read into {row.path}"


def test_nested_settings_models_get_their_environment_names():
    from pydantic import AliasChoices, BaseModel, Field
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class Window(BaseModel):
        size: int = Field(default=14, ge=2, description="Messages a memory covers.")

    class Guards(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="APP_GUARD_")
        cooldown_s: float = Field(default=120.0, description="Cooldown.")

    class Root(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="APP_", env_nested_delimiter="__")
        window: Window = Window()
        guards: Guards = Field(default_factory=Guards)
        url: str | None = Field(default=None, validation_alias=AliasChoices("APP_DATABASE_URL", "DATABASE_URL"))

    rows = {row.path: row for row in docs_reference.settings(Root)}
    assert {path: row.env for path, row in rows.items()} == {
        "window.size": "APP_WINDOW__SIZE",
        "guards.cooldown_s": "APP_GUARD_COOLDOWN_S",
        "url": "APP_DATABASE_URL",
    }
    assert rows["window.size"].allowed == "≥ 2" and rows["window.size"].default == "`14`"
    assert rows["url"].default == "unset" and rows["url"].type == "text or unset"


def typer_commands(app: typer.Typer, words: tuple[str, ...] = ()) -> list[str]:
    """Every command line of a typer app, from its registrations (not from the generator's click walk)."""
    lines = []
    for command in app.registered_commands:
        name = command.name or command.callback.__name__.replace("_", "-")  # type: ignore[union-attr]
        lines.append(" ".join(("memory-agent", *words, name)))
    for group in app.registered_groups:
        assert group.name and group.typer_instance
        lines.append(" ".join(("memory-agent", *words, group.name)))
        lines += typer_commands(group.typer_instance, (*words, group.name))
    return lines


def test_every_cli_command_is_in_the_reference():
    from memory_agent.cli.main import app

    page = docs_reference.cli_reference()
    expected = typer_commands(app)
    assert len(expected) >= 15
    for line in expected:
        assert f"### `{line}`" in page, f"{line} is missing from the CLI reference"


def test_every_http_route_is_in_the_reference():
    from fastapi.routing import APIRoute

    from memory_agent.api import create_app

    page = docs_reference.http_reference()
    routes = [route for route in create_app().routes if isinstance(route, APIRoute)]
    assert routes
    for route in routes:
        for method in route.methods - {"HEAD"}:
            assert f"### `{method} {route.path}`" in page, f"{method} {route.path} is missing from the HTTP reference"


def test_every_error_class_is_in_the_reference():
    page = docs_reference.errors_reference()
    found = set()
    for info in pkgutil.walk_packages(memory_agent.__path__, "memory_agent."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, klass in inspect.getmembers(module, inspect.isclass):
            if issubclass(klass, BaseException) and klass.__module__ == info.name:  # MemoryAgentError's or not
                found.add(klass.__name__)
    assert {"MemoryAgentError", "InvalidInputError", "ConfigurationError"} <= found
    for name in found:
        assert f"### {name}\n" in page, f"{name} is missing from the errors reference"


def test_every_public_name_is_in_the_python_reference():
    page = docs_reference.python_reference()
    for name in memory_agent.__all__:
        assert f"### {name}\n" in page


def test_every_module_is_in_the_layout():
    page = docs_reference.modules_reference()
    for path in (ROOT / "memory_agent").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if not name.endswith("__main__"):
            assert f"`{name}`" in page, f"{name} is missing from the package layout"


def test_the_reference_pages_hold_the_tables_the_code_generates():
    """The tables are written into the pages (readable on a code host); a page behind the code fails here."""
    pages = docs_reference.pages_with_markers()
    assert {path.name for path in pages} >= {
        "settings.md",
        "cli.md",
        "http.md",
        "errors.md",
        "python.md",
        "http-api.md",
    }
    stale = [
        str(path.relative_to(ROOT))
        for path in pages
        if docs_reference.fill(text := path.read_text(encoding="utf-8")) != text
    ]
    assert stale == [], "run `python tools/docs_reference.py --write` and commit the pages"


def test_filling_a_page_twice_changes_nothing():
    once = docs_reference.fill("a\n<!-- reference: errors -->\nb")
    assert "<!-- end of reference: errors -->" in once and once.endswith("\nb")
    assert docs_reference.fill(once) == once


def test_an_unknown_marker_fails_the_build():
    with pytest.raises(ValueError, match="unknown reference marker 'setting'"):
        docs_reference.fill("<!-- reference: setting -->")


# --- links written for the repository ---------------------------------------------------------------------------


def test_links_are_made_right_for_the_site():
    rewrite = docs_reference.rewrite_links
    # from the README (the home page): a docs page, a published file, a repository file, a missing file
    assert rewrite("[a](docs/how-to/store.md#x)", "README.md") == "[a](how-to/store.md#x)"
    assert rewrite("[b](benchmarks/README.md)", "README.md") == "[b](benchmarks.md)"
    assert rewrite("[`graphs/chat.py`](graphs/chat.py)", "README.md") == "`graphs/chat.py`"
    assert rewrite("[the graph](graphs/chat.py)", "README.md") == "the graph (`graphs/chat.py`)"
    assert rewrite("[gone](graphs/gone.py)", "README.md") == "[gone](graphs/gone.py)"  # the strict build reports it
    # from a docs page and from benchmarks/README.md
    assert rewrite("[t](../concepts/tiers.md)", "docs/how-to/x.md") == "[t](../concepts/tiers.md)"
    # a page that moved into the folder of its kind: the changelog's older entries still reach it
    assert rewrite("[r](docs/recall.md) [s](docs/scaling.md#x)", "CHANGELOG.md") == (
        "[r](measurements/recall.md) [s](how-to/scaling.md#x)"
    )
    assert (
        rewrite("[c](../CHANGELOG.md) [r](../docs/measurements/recall.md)", "benchmarks/README.md")
        == "[c](changelog.md) [r](measurements/recall.md)"
    )
    assert rewrite("![plot](results/latest.png)", "benchmarks/README.md") == "![plot](benchmarks/latest.png)"
    assert (
        rewrite("[web](https://example.org/a.md) [here](#top)", "README.md")
        == "[web](https://example.org/a.md) [here](#top)"
    )


def test_the_nav_drops_missing_pages_and_lists_unlisted_ones(tmp_path):
    (tmp_path / "a.md").write_text("# A")
    (tmp_path / "new.md").write_text("# New")
    config = {
        "docs_dir": str(tmp_path),
        "nav": [{"Home": "index.md"}, {"Concepts": [{"A": "a.md"}, {"Gone": "gone.md"}]}],
    }
    nav = docs_reference.on_config(config)["nav"]
    assert nav == [
        {"Home": "index.md"},
        {"Concepts": [{"A": "a.md"}]},
        {"More": ["benchmarks.md", "changelog.md", "new.md"]},
    ]


# --- benchmarks/README.md ---------------------------------------------------------------------------------------


def test_the_benchmarks_readme_shows_the_latest_results():
    from benchmarks.report import readme_with_results

    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    latest = (ROOT / "benchmarks" / "results" / "latest.md").read_text(encoding="utf-8")
    assert readme_with_results(readme, latest) == readme
    assert "| Round overhead, median of" in readme


# --- no design documents from outside the repository -----------------------------------------------------------

OUTSIDE_DOCUMENTS = re.compile(
    r"\bthe seed\b|\bseed's\b|\bseeds?\b(?= (feature|name|plan))|sliding-window-design|memory-system-evolution-plan"
    r"|cluster-summarization-pipeline\.md|nightly-compaction-and-rollups\.md|periodic-rag-memory-summarization"
    r"|\bV1\.1-\d|\bV2-\d",
    re.I,
)


def shipped_texts() -> list[Path]:
    texts = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"]
    texts += sorted((ROOT / "memory_agent").rglob("*.py")) + sorted((ROOT / "docs").rglob("*.md"))
    texts += sorted((ROOT / "prompts").rglob("*")) + sorted((ROOT / "sql").rglob("*.sql"))
    released = re.compile(r"^\d{4}_")  # released migrations never change, whatever they say
    return [path for path in texts if path.is_file() and not released.match(path.name)]


def test_no_design_document_outside_the_repository_is_cited():
    cited = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in shipped_texts()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE_DOCUMENTS.search(line)
    ]
    assert cited == [], "say what the design is (docs/concepts/decisions.md) instead of citing it:\n" + "\n".join(cited)
