"""The inspector's routes match the path as it was sent, each id unquoted only once matched.

Ids may hold '/': a link quotes it ('bob%2Fforget'), but the server decodes the path before routing, and the
decoded '/inspect/users/bob/forget' would reach the erasure page of user 'bob' instead of the page of user
'bob/forget'. Matched on the raw path, a quoted '/' stays inside its id; a path typed unquoted still matches the
way it reads.
"""

from __future__ import annotations

from urllib.parse import unquote

from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Scope


class RawPathRoute(APIRoute):
    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if scope["type"] != "http" or not raw:
            return _stored(*super().matches(scope))
        path = raw.decode("latin-1").partition("?")[0]
        match, child = super().matches({**scope, "path": path, "path_params": {}})
        if match is Match.NONE:
            return match, child
        # Each id unquoted once (its bytes are UTF-8); a parameter a convertor made an int stays one.
        raw_params = child.get("path_params", {})
        child["path_params"] = {
            **scope.get("path_params", {}),
            **{name: unquote(value) if isinstance(value, str) else value for name, value in raw_params.items()},
        }
        return _stored(match, child)


def _stored(match: Match, child: Scope) -> tuple[Match, Scope]:
    """No match for an id no row can hold (a NUL character: PostgreSQL text refuses it, the query would fail)."""
    params = child.get("path_params", {}) if match is not Match.NONE else {}
    if any(isinstance(value, str) and "\x00" in value for value in params.values()):
        return Match.NONE, {}
    return match, child
