"""The docs site's reference, generated from the code at every build, and the site's mkdocs hooks.

A page under docs/ holds a marker such as `<!-- reference: settings -->`, and below it, up to
`<!-- end of reference: settings -->`, the tables generated here (every setting from MemorySettings and its nested settings models, every command of the
typer app, every route of the FastAPI app's OpenAPI document, every subclass of MemoryAgentError), written into the
page by `python tools/docs_reference.py --write` so the page reads whole on a code host too, and filled again at
every site build. The reference cannot drift from the code: tests/unit/test_docs.py fails when a page's tables
are not the ones the code generates now; `make docs` (in `make test`) builds the site with warnings as errors.

The hooks also keep the site whole while pages come and go: nav entries whose page is missing are dropped,
pages no nav entry names are listed under "More"; README.md is the home page and CHANGELOG.md and
benchmarks/README.md are pages; a link to a repository file outside the site becomes that file's path in code
(checked to exist), so links written for GitHub keep working in both places.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import posixpath
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

REPO = Path(__file__).resolve().parents[1]
CLI_NAME = "memory-agent"

# Repository files published as site pages (repository path -> site path).
PUBLISHED = {
    "README.md": "index.md",
    "CHANGELOG.md": "changelog.md",
    "benchmarks/README.md": "benchmarks.md",
}
# Files beside a published page that it shows (repository path -> site path).
PUBLISHED_ASSETS = {
    "benchmarks/results/latest.png": "benchmarks/latest.png",
}
MARKER = re.compile(r"<!--\s*reference:\s*([a-z_-]+)\s*-->(?:.*?<!--\s*end of reference:\s*\1\s*-->)?", re.DOTALL)


def cell(text: Any) -> str:
    """Text fit for one markdown table cell: one line, its pipes escaped (but in code spans, where the table
    extension leaves them alone and an escape would show)."""
    parts = " ".join(str(text).split()).split("`")
    return "`".join(part if inside % 2 else part.replace("|", "\\|") for inside, part in enumerate(parts))


# --- settings ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    env: str  # the environment variable
    path: str  # the attribute path on MemorySettings (nested models joined with '.')
    group: str  # the settings class that declares it
    type: str
    default: str
    allowed: str
    description: str


def _model_class(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (a nested group), if it holds one."""
    candidates = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    for candidate in (annotation, *candidates):
        if inspect.isclass(candidate) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{value}`" for value in args)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(arg) for arg in args if arg is not type(None)]
        return " or ".join(names) + (" or unset" if type(None) in args else "")
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is dict or annotation is dict:
        return "JSON object"
    if inspect.isclass(annotation):
        return {"str": "text", "int": "integer", "float": "number", "bool": "boolean", "Path": "path"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def _default(field: FieldInfo) -> str:
    factory = field.default_factory
    if factory is not None:
        doc = inspect.getdoc(factory) if inspect.isfunction(factory) else None
        if doc:  # computed per machine: say how, never show this machine's value
            return "computed: " + doc.split(".")[0]
        value = factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list):
        return f"`{json.dumps(value)}`"
    return f"`{value}`" if value != "" else "empty"


def _allowed(field: FieldInfo) -> str:
    bounds = []
    for item in field.metadata:
        for name, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "length ≥")):
            value = getattr(item, name, None)
            if value is not None:
                bounds.append(f"{sign} {value:,}" if isinstance(value, int | float) else f"{sign} {value}")
        for name, label in (("max_length", "length ≤"), ("pattern", "matches")):
            value = getattr(item, name, None)
            if value is not None:
                bounds.append(f"{label} `{value}`" if name == "pattern" else f"{label} {value}")
    return ", ".join(bounds)


def _env_name(field_name: str, field: FieldInfo, prefix: str) -> str:
    alias = field.validation_alias or field.alias
    choices = getattr(alias, "choices", None)
    if choices:
        alias = choices[0]
    return (alias if isinstance(alias, str) else prefix + field_name).upper()


def _declaring_class(model: type[BaseModel], name: str) -> type[BaseModel]:
    for klass in reversed(model.__mro__):
        if name in getattr(klass, "__annotations__", {}):
            return klass
    return model


def settings(model: type[BaseModel] | None = None, prefix: str | None = None, path: str = "") -> list[Setting]:
    """Every setting of MemorySettings, nested settings models included, in declaration order."""
    if model is None:
        from memory_agent.settings import MemorySettings

        model = MemorySettings
    config: Any = model.model_config
    if prefix is None:
        prefix = config.get("env_prefix", "")
    rows = []
    for name, field in model.model_fields.items():
        nested = _model_class(field.annotation)
        if nested is not None:
            own = nested.model_config.get("env_prefix")
            delimiter = config.get("env_nested_delimiter")
            if own:  # a settings class of its own, read from its own prefix
                rows += settings(nested, own, f"{path}{name}.")
                continue
            if delimiter:
                rows += settings(nested, f"{prefix}{name}{delimiter}", f"{path}{name}.")
                continue
        rows.append(
            Setting(
                env=_env_name(name, field, prefix),
                path=path + name,
                group=_declaring_class(model, name).__name__,
                type=_type_name(field.annotation),
                default=_default(field),
                allowed=_allowed(field),
                description=field.description or "",
            )
        )
    return rows


def settings_reference() -> str:
    """One table per settings group (`settings.<group>`, its class and docstring), in declaration order."""
    from memory_agent.settings import MemorySettings

    out: list[str] = []
    groups: dict[str, list[Setting]] = {}
    for row in settings():
        groups.setdefault(row.path.rpartition(".")[0], []).append(row)
    for path, members in groups.items():
        field = MemorySettings.model_fields.get(path)
        model = _model_class(field.annotation) if field is not None else None
        doc = " ".join((inspect.getdoc(model) or "").split()) if model is not None else ""
        doc = doc.partition(": ")[2] or doc  # the docstring after its "`settings.<group>`:"
        out += [
            f"### `settings.{path}` ({members[0].group})" if path else f"### {members[0].group}",
            "",
            *([doc[:1].upper() + doc[1:], ""] if doc else []),
            "| Variable | Default | Meaning |",
            "|---|---|---|",
        ]
        for row in members:
            kind = f"{row.type}{', ' + row.allowed if row.allowed else ''}"
            out.append(
                f"| `{row.env}`<br>`{row.path}` | {cell(row.default)} | {cell(row.description)} ({cell(kind)}) |"
            )
        out.append("")
    return "\n".join(out)


# --- the command line -------------------------------------------------------------------------------------------


def commands() -> list[tuple[str, Any]]:
    """(`memory-agent …` command line, click command) for every command of the typer app, groups included."""
    import typer.main

    from memory_agent.cli.main import app

    def walk(command: Any, words: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
        subcommands = getattr(command, "commands", None)
        yield " ".join((CLI_NAME, *words)), command
        for name in sorted(subcommands or {}):
            yield from walk(subcommands[name], (*words, name))

    return list(walk(typer.main.get_command(app), ()))


def _param_row(param: Any) -> str:
    if param.param_type_name == "argument":
        name = f"`{param.name.upper()}`"
    else:
        name = ", ".join(f"`{opt}`" for opt in (*param.opts, *param.secondary_opts))
    default = param.default
    shown = "required" if param.required else "" if default is None or callable(default) else f"`{default}`"
    descriptor = getattr(param, "type_descriptor", None)
    type_name = _type_name(descriptor.annotation) if descriptor is not None else getattr(param.type, "name", "")
    bounds = [
        f"{sign} {value}"
        for sign, value in (("≥", getattr(param, "min", None)), ("≤", getattr(param, "max", None)))
        if value is not None
    ]
    meaning = " ".join([getattr(param, "help", None) or "", f"({', '.join(bounds)})" if bounds else ""]).strip()
    return f"| {name} | {cell(type_name)} | {cell(shown)} | {cell(meaning)} |"


def cli_reference() -> str:
    out = []
    for line, command in commands():
        out += [f"### `{line}`", "", inspect.cleandoc(command.help or command.short_help or ""), ""]
        shell = ("help", "install_completion", "show_completion")  # typer's own options
        params = [p for p in command.params if p.name not in shell and not getattr(p, "hidden", False)]
        if getattr(command, "commands", None):
            out += ["Subcommands: " + ", ".join(f"`{line} {name}`" for name in sorted(command.commands)), ""]
        if params:
            out += ["| Argument or option | Type | Default | Meaning |", "|---|---|---|---|"]
            out += [_param_row(param) for param in params]
            out.append("")
    return "\n".join(out)


# --- the HTTP API -----------------------------------------------------------------------------------------------


def openapi() -> dict[str, Any]:
    from memory_agent.api import create_app

    return create_app().openapi()  # the routes only: no service is opened without the app's lifespan


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{name.lower()})"
    if schema.get("type") == "array":
        return "list of " + _schema_name(schema.get("items", {}))
    if "anyOf" in schema:
        return " or ".join(_schema_name(option) for option in schema["anyOf"])
    return f"`{schema.get('type', 'any')}`" + (f" ({schema['format']})" if "format" in schema else "")


def routes() -> list[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) for every route of the API's OpenAPI document."""
    return [(method.upper(), path, op) for path, ops in openapi()["paths"].items() for method, op in ops.items()]


def routes_table() -> str:
    """Every route in one table (method and path, its summary), for the how-to."""
    out = ["| Route | What it does |", "|---|---|"]
    for method, path, op in routes():
        anchor = f"{method} {path}".lower()
        anchor = re.sub(r"[^a-z0-9 _-]", "", anchor).replace(" ", "-")
        summary = (op.get("description") or op.get("summary") or "").strip().split("\n\n")[0]
        out.append(f"| [`{method} {path}`](../reference/http.md#{anchor}) | {cell(summary)} |")
    return "\n".join(out)


def http_reference() -> str:
    document = openapi()
    out = []
    for method, path, op in routes():
        out += [f"### `{method} {path}`", "", (op.get("description") or op.get("summary") or "").strip(), ""]
        params = op.get("parameters", [])
        if params:
            out += ["| Parameter | In | Required | Type | Meaning |", "|---|---|---|---|---|"]
            for param in params:
                out.append(
                    f"| `{param['name']}` | {param['in']} | {'yes' if param.get('required') else 'no'} | "
                    f"{_schema_name(param.get('schema', {}))} | {cell(param.get('description', ''))} |"
                )
            out.append("")
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body:
            out += [f"Body: {_schema_name(body['schema'])}", ""]
        out += ["| Status | Meaning | Body |", "|---|---|---|"]
        for status, response in op.get("responses", {}).items():
            schema = response.get("content", {}).get("application/json", {}).get("schema")
            out.append(
                f"| {status} | {cell(response.get('description', ''))} | {_schema_name(schema) if schema else ''} |"
            )
        out.append("")
    out += ["## Schemas", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        out += [f"### {name}", "", " ".join((schema.get("description") or "").split()), ""]
        out += ["| Field | Type | Required | Meaning |", "|---|---|---|---|"]
        required = set(schema.get("required", []))
        for field, spec in schema.get("properties", {}).items():
            out.append(
                f"| `{field}` | {_schema_name(spec)} | {'yes' if field in required else 'no'} | "
                f"{cell(spec.get('description', ''))} |"
            )
        out.append("")
    return "\n".join(out)


# --- errors -----------------------------------------------------------------------------------------------------


def error_classes() -> list[type[Exception]]:
    """MemoryAgentError and every subclass defined anywhere in memory_agent, depth first."""
    import memory_agent
    from memory_agent.errors import MemoryAgentError

    for module in pkgutil.walk_packages(memory_agent.__path__, "memory_agent."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)

    def walk(klass: type[Exception]) -> Iterator[type[Exception]]:
        yield klass
        for sub in sorted(klass.__subclasses__(), key=lambda k: k.__name__):
            if sub.__module__.startswith("memory_agent"):
                yield from walk(sub)

    return list(walk(MemoryAgentError))


def errors_reference() -> str:
    out = []
    for klass in error_classes():
        bases = ", ".join(f"`{base.__name__}`" for base in klass.__bases__)
        out += [
            f"### {klass.__name__}",
            "",
            f"`{klass.__module__}.{klass.__qualname__}`, a subclass of {bases}.",
            "",
            inspect.cleandoc(klass.__doc__ or ""),
            "",
        ]
    return "\n".join(out)


# --- the Python API -------------------------------------------------------------------------------------------


def _summary(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def _signature(obj: Any) -> str:
    for evaluated in (True, False):  # the annotations' names when they resolve, their text otherwise
        try:
            return str(inspect.signature(obj, eval_str=evaluated))
        except (NameError, TypeError, ValueError):
            continue
    return "(…)"


def public_names() -> list[tuple[str, Any]]:
    import memory_agent

    names = [*memory_agent.__all__, *sorted(memory_agent.DESIGN_NAMES)]
    return [(name, getattr(memory_agent, name)) for name in names]


def _members(klass: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties a class of memory_agent defines (its own or its memory_agent bases')."""
    seen = set()
    for base in klass.__mro__:
        if not base.__module__.startswith("memory_agent"):
            continue
        for name, member in vars(base).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(member, property | staticmethod | classmethod) or inspect.isfunction(member):
                yield name, member


def _member_rows(klass: type) -> list[str]:
    rows = []
    for member_name, member in sorted(_members(klass)):
        target = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        call = (
            ""
            if isinstance(member, property)
            else _signature(target).replace("(self, ", "(").replace("(self)", "()").replace("(cls, ", "(")
        )
        rows.append(f"| {cell(f'`{member_name}{call}`')} | {cell(_summary(target))} |")
    return ["| Member | What it does |", "|---|---|", *rows, ""] if rows else []


def facades() -> list[tuple[str, type]]:
    """The tiers' facades an open MemoryService hands out: (its attribute, its class)."""
    from memory_agent.service import MemoryService

    return [
        (name, inspect.signature(getattr(MemoryService, name).fget, eval_str=True).return_annotation)
        for name in ("conversations", "long_term", "transfers")
    ]


def python_reference() -> str:
    out = []
    for name, obj in public_names():
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            out += [f"### {name}", "", f"An error: see [Errors](errors.md#{name.lower()}).", ""]
            continue
        kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "value"
        head = f"{kind} {name}{_signature(obj) if kind == 'function' else ''}"
        out += [f"### {name}", "", f"`{head}`" if kind != "class" else f"`class {name}`", "", _summary(obj), ""]
        if inspect.isclass(obj) and issubclass(obj, BaseModel):
            out += ["| Field | Type | Meaning |", "|---|---|---|"]
            for field_name, field in obj.model_fields.items():
                out.append(
                    f"| `{field_name}` | {cell(_type_name(field.annotation))} | {cell(field.description or '')} |"
                )
            out.append("")
        elif inspect.isclass(obj):
            out += _member_rows(obj)
    for attribute, klass in facades():
        out += [f"### memory.{attribute}", "", f"`class {klass.__module__}.{klass.__name__}`", "", _summary(klass), ""]
        out += _member_rows(klass)
    return "\n".join(out)


# --- the package's layout ---------------------------------------------------------------------------------------


def modules() -> list[tuple[str, Any]]:
    """Every module of memory_agent (packages first, then their modules), imported."""
    import memory_agent

    names = ["memory_agent"] + [
        info.name
        for info in pkgutil.walk_packages(memory_agent.__path__, "memory_agent.")
        if not info.name.endswith("__main__")
    ]
    return [(name, importlib.import_module(name)) for name in sorted(names)]


def modules_reference() -> str:
    out = ["| Module | What it owns |", "|---|---|"]
    for name, module in modules():
        is_package = hasattr(module, "__path__")
        shown = f"**`{name}`**" if is_package else f"`{name}`"
        out.append(f"| {shown} | {cell(_summary(module))} |")
    return "\n".join(out) + "\n"


def imports_reference() -> str:
    """What each first-level part of memory_agent may import: the layer rules tests/unit/test_layers.py enforces."""
    from tests.unit.test_layers import FORBIDDEN, UNITS

    out = ["| Part | May import (besides itself) |", "|---|---|"]
    for unit in sorted(FORBIDDEN, key=lambda name: (len(UNITS - set(FORBIDDEN[name])), name)):
        allowed = sorted(UNITS - set(FORBIDDEN[unit]) - {unit, "__init__", "__main__"})
        shown = ", ".join(f"`{name}`" for name in allowed) or "nothing of memory_agent"
        out.append(f"| `{unit}` | {shown} |")
    return "\n".join(out) + "\n"


GENERATORS = {
    "settings": settings_reference,
    "cli": cli_reference,
    "http": http_reference,
    "errors": errors_reference,
    "python": python_reference,
    "routes": routes_table,
    "modules": modules_reference,
    "imports": imports_reference,
}


def fill(markdown: str) -> str:
    """The page with each reference marker replaced by its generated tables."""

    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown reference marker {name!r}; known: {', '.join(GENERATORS)}")
        tables = GENERATORS[name]().strip()
        return f"<!-- reference: {name} -->\n\n{tables}\n\n<!-- end of reference: {name} -->"

    return MARKER.sub(generate, markdown)


def pages_with_markers() -> list[Path]:
    """The docs pages that hold a reference marker."""
    return sorted(path for path in (REPO / "docs").rglob("*.md") if MARKER.search(path.read_text(encoding="utf-8")))


def write_pages() -> list[Path]:
    """Write each marked page's tables into it, as the code generates them now; the pages that changed."""
    changed = []
    for path in pages_with_markers():
        text = path.read_text(encoding="utf-8")
        filled = fill(text)
        if filled != text:
            path.write_text(filled, encoding="utf-8")
            changed.append(path)
    return changed


# --- links written for the repository -------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")


# Pages that moved into the folder of their kind: older text (the changelog's past entries) links to where they were.
MOVED = {
    "docs/privacy.md": "docs/concepts/privacy.md",
    "docs/design/decisions.md": "docs/concepts/decisions.md",
    "docs/models.md": "docs/how-to/models.md",
    "docs/embedded.md": "docs/how-to/embedded.md",
    "docs/langgraph-server.md": "docs/how-to/langgraph-server.md",
    "docs/scaling.md": "docs/how-to/scaling.md",
    "docs/limits.md": "docs/reference/limits.md",
    "docs/recall.md": "docs/measurements/recall.md",
}


def site_path(repo_path: str) -> str | None:
    """Where a repository file is on the site, if it is on it."""
    repo_path = MOVED.get(repo_path, repo_path)
    if repo_path in PUBLISHED:
        return PUBLISHED[repo_path]
    if repo_path in PUBLISHED_ASSETS:
        return PUBLISHED_ASSETS[repo_path]
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    return None


def rewrite_links(markdown: str, repo_path: str) -> str:
    """Links of a page written for the repository (relative to `repo_path`), made right for the site: a link to a
    page of the site points at it; a link to any other file of the repository becomes its path in code (a file that
    does not exist stays a link, so the strict build reports it)."""
    page_dir = posixpath.dirname(site_path(repo_path) or repo_path)

    def fix(match: re.Match[str], image: bool = False) -> str:
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
            return match.group(0)
        file, _, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), file))
        on_site = site_path(resolved)
        if on_site is not None:
            relative = posixpath.relpath(on_site, page_dir or ".")
            return f"{'!' if image else ''}[{text}]({relative}{'#' + anchor if anchor else ''})"
        if (REPO / resolved).exists() and not image:  # not on the site: name the file
            return f"`{resolved}`" if text.strip("`") in (resolved, file) else f"{text} (`{resolved}`)"
        return match.group(0)

    markdown = re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", lambda m: fix(m, image=True), markdown)
    return LINK.sub(fix, markdown)


# --- mkdocs hooks -----------------------------------------------------------------------------------------------


def _nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for entry in nav:
            yield from _nav_pages(entry)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_pages(value)


def _prune(nav: Any, present: set[str]) -> Any:
    """The nav without entries whose page does not exist (yet: pages added on other branches)."""
    if isinstance(nav, str):
        return nav if nav in present or "://" in nav else None
    if isinstance(nav, list):
        kept = [entry for entry in (_prune(entry, present) for entry in nav) if entry is not None]
        return kept or None
    if isinstance(nav, dict):
        kept_dict = {key: _prune(value, present) for key, value in nav.items()}
        kept_dict = {key: value for key, value in kept_dict.items() if value is not None}
        return kept_dict or None
    return nav


def on_config(config: Any) -> Any:
    docs_dir = Path(config["docs_dir"])
    present = {path.relative_to(docs_dir).as_posix() for path in docs_dir.rglob("*.md")}
    present |= set(PUBLISHED.values())
    if config.get("nav"):
        nav = _prune(config["nav"], present) or []
        listed = set(_nav_pages(nav))
        more = sorted(page for page in present if page not in listed)
        if more:
            nav.append({"More": more})
        config["nav"] = nav
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for repo_path, site in PUBLISHED.items():
        text = (REPO / repo_path).read_text(encoding="utf-8")
        files.append(File.generated(config, site, content=rewrite_links(text, repo_path)))
    for repo_path, site in PUBLISHED_ASSETS.items():
        files.append(File.generated(config, site, abs_src_path=str(REPO / repo_path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    src = page.file.src_uri
    repo_path = next((repo for repo, site in PUBLISHED.items() if site == src), None)
    if repo_path is None:
        markdown = rewrite_links(markdown, "docs/" + src)
    return fill(markdown)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write"]:  # the reference tables into the docs pages (commit them)
        for path in write_pages():
            print(f"wrote {path.relative_to(REPO)}")
    else:  # print the generated reference, e.g. to read it without building the site
        for name, generate in GENERATORS.items():
            print(f"<!-- reference: {name} -->\n{generate()}\n")
