"""Text as PostgreSQL can store it: what every tier writes of model output and error messages."""

from __future__ import annotations


def storable_text(text: str) -> str:
    """`text` as PostgreSQL can store it: NUL (which `text` columns refuse) becomes U+FFFD, and a lone
    surrogate (which UTF-8 cannot encode) becomes `?`. For model output and error messages, which must
    always reach their row."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
