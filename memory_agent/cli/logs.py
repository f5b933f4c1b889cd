"""The command's log lines: the level (`--verbose`: INFO) and the format, with the credentials of any URL in a
line written `***`.

At INFO the HTTP clients log each request's URL whole (`HTTP Request: POST http://user:password@gateway/v1/...`):
a gateway's credentials in OPENAI_BASE_URL (or a database URL's password) reached the worker's log.
"""

from __future__ import annotations

import logging
import re

# `scheme://userinfo@`: the userinfo is a user name and a password, or a token.
_URL_CREDENTIALS = re.compile(r"\b([a-z][a-z0-9+.-]*://)[^/\s@]+@", re.IGNORECASE)


class NoUrlCredentials(logging.Filter):
    """Writes the userinfo of every URL in a record's message as `***`."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "@" in message:
            hidden = _URL_CREDENTIALS.sub(r"\1***@", message)
            if hidden != message:
                record.msg, record.args = hidden, None
        return True


def configure(verbose: bool) -> None:
    """The root logger at INFO (`verbose`) or WARNING, each of its handlers hiding the credentials of URLs."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, NoUrlCredentials) for f in handler.filters):
            handler.addFilter(NoUrlCredentials())
