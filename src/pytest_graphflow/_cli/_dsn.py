"""A PostgreSQL DSN as the ``graphflow`` command shows it: never with its password.

A DSN may carry a password (``postgresql://app:SECRET@db/graphs``, ``password=SECRET``).
Every message that names a DSN shows :func:`redact` of it, and every message that quotes an
error of the driver passes through :func:`scrub` (libpq's parse errors quote pieces of the
string).
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

__all__ = ["passwords", "redact", "scrub"]

HIDDEN = "***"

_URI_PASSWORD = re.compile(r"^(postgres(?:ql)?://[^:@/?#]*:)([^/?#]*)(@)", re.IGNORECASE)
_KEY_PASSWORD = re.compile(
    r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&#]+)", re.IGNORECASE)


def passwords(dsn: str) -> list[str]:
    """The passwords written in ``dsn``, as written and as the driver reads them (a URI's
    percent-escapes decoded, a quoted value unquoted), longest first."""
    found: set[str] = set()
    uri = _URI_PASSWORD.match(dsn)
    if uri is not None and uri.group(2):
        found |= {uri.group(2), unquote(uri.group(2))}
    for match in _KEY_PASSWORD.finditer(dsn):
        value = match.group(2)
        found |= {value, unquote(value), value.strip("'").replace("\\'", "'")}
    found |= {quote(p, safe="") for p in list(found)}
    return sorted((p for p in found if p), key=len, reverse=True)


def redact(dsn: str) -> str:
    """``dsn`` with its password (a URI's, or any ``password=``) replaced by ``***``."""
    text = _URI_PASSWORD.sub(lambda m: f"{m.group(1)}{HIDDEN}{m.group(3)}", dsn)
    return _KEY_PASSWORD.sub(lambda m: f"{m.group(1)}{HIDDEN}", text)


def scrub(text: str, dsn: str) -> str:
    """``text`` (a driver's message) on one line, with the DSN and every password in it
    hidden."""
    text = text.replace(dsn, redact(dsn))
    for secret in passwords(dsn):
        text = text.replace(secret, HIDDEN)
    return " ".join(text.split())  # one line: libpq's messages end in "\n", hints in "\n\t"
