"""The inspector's pages as HTML: server-rendered, no JavaScript, every value escaped.

Pure functions from rows to markup; the routes (inspect.py) read the rows and check the key. A page is a title, a
breadcrumb and sections; a table is a header and rows of cells already escaped here, never by the caller.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em}header a{color:#cfe1ff}
main{padding:1em 1.2em;max-width:78em}h1{font-size:1.35em;margin:.2em 0 .6em}h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse;width:100%;background:#fff;font-size:.92em}
th,td{border:1px solid #dde1e8;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#eef1f5}tr.past td{color:#6b7280}tr.failed td{background:#fdecec}tr.stuck td{background:#fff6dc}
.tag{display:inline-block;padding:0 .4em;border-radius:.3em;background:#e4e8ee;font-size:.85em}
.tag.failed{background:#f8caca}.tag.stuck{background:#fde7a6}.tag.completed{background:#cfeedd}
pre{white-space:pre-wrap;background:#fff;border:1px solid #dde1e8;padding:.6em;margin:.3em 0}
form.inline{display:inline}button{cursor:pointer}.danger{background:#b42318;color:#fff;border:0;padding:.3em .8em}
.note{color:#4b5563}.crumbs{margin-bottom:.4em}
"""


def esc(value: Any) -> str:
    """A value as text in a page: None as an empty cell, times to the second, the rest escaped."""
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return f"{value:.6f}"
    if isinstance(value, datetime):
        return html.escape(value.strftime("%Y-%m-%d %H:%M:%S %Z").strip())
    return html.escape(str(value))


def href(*parts: Any) -> str:
    """A path under /inspect/, each part quoted whole (a thread id may hold '/', '?' or '#')."""
    return "/inspect/" + "/".join(quote(str(part), safe="") for part in parts)


def link(text: Any, *parts: Any) -> str:
    return f'<a href="{html.escape(href(*parts))}">{esc(text)}</a>'


def tag(text: str, kind: str = "") -> str:
    return f'<span class="tag {html.escape(kind)}">{esc(text)}</span>'


def table(headers: Sequence[str], rows: Iterable[tuple[Sequence[str], str]], empty: str = "nothing") -> str:
    """A table of rows (cells already markup, a row class); `empty` when there is no row."""
    body = "".join(
        f'<tr class="{html.escape(kind)}">' + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"
        for cells, kind in rows
    )
    if not body:
        return f'<p class="note">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str, *, tenant: str | None = None, crumbs: Sequence[str] = ()) -> str:
    who = f' &middot; tenant <b>{esc(tenant)}</b> &middot; <a href="/inspect/logout">log out</a>' if tenant else ""
    trail = f'<div class="crumbs">{" / ".join(crumbs)}</div>' if crumbs else ""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)} · memory_agent</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>'
        f'<body><header><a href="/inspect/">memory_agent inspector</a>{who}</header>'
        f"<main>{trail}<h1>{esc(title)}</h1>{body}</main></body></html>"
    )


def login_page(error: str | None = None) -> str:
    problem = f'<p class="tag failed">{esc(error)}</p>' if error else ""
    form = (
        '<form method="post" action="/inspect/login"><label>API key '
        '<input type="password" name="key" autocomplete="off" size="60" required></label> '
        "<button>Log in</button></form>"
        '<p class="note">A key of <code>memory-agent api-key create --tenant …</code>: the inspector shows that '
        "tenant only. The key is kept in a cookie of this site until you log out.</p>"
    )
    return page("Log in", problem + form)


def confirm_form(action: str, what: str, csrf: str, back: str) -> str:
    """The confirmation step of an erasure: a POST form to `action` with the page's token."""
    return (
        f"<p>This erases {esc(what)} for good, with everything derived from it. It cannot be undone.</p>"
        f'<form method="post" action="{html.escape(action)}"><input type="hidden" name="csrf" '
        f'value="{html.escape(csrf)}"><button class="danger">Erase</button> '
        f'<a href="{html.escape(back)}">cancel</a></form>'
    )


def erase_button(action: str, label: str = "forget…") -> str:
    """A link to the confirmation page of an erasure (GET: nothing is erased by following it)."""
    return f'<a href="{html.escape(action)}">{esc(label)}</a>'


def report(rows: dict[str, Any]) -> str:
    """What an erasure did, as its report's fields."""
    items = "".join(
        f"<tr><th>{esc(name)}</th><td>{esc(json.dumps(value, default=str))}</td></tr>" for name, value in rows.items()
    )
    return f"<table><tbody>{items}</tbody></table>"


def sources_cell(item: dict[str, Any]) -> str:
    """An item's source turns as links to their conversations (a summary: the ids of its members)."""
    if item["is_summary"]:
        return "members " + esc(", ".join(str(i) for i in item["source_item_ids"]))
    links = []
    for source in item["sources"]:
        if source.get("conversation_id") is None:
            links.append("stated")
            continue
        where = f"{source['conversation_id']} seq {source.get('sequence_number')}"
        links.append(link(where, "conversations", source["conversation_id"]))
    return ", ".join(links)
