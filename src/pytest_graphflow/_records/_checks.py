"""Checks of identifier arguments at the API edge (ids, names): one rule for every entry."""

from __future__ import annotations

import re

from ..errors import InvalidArgument

__all__ = ["MAX_ID_LENGTH", "bad_text", "check_id", "check_optional_id"]

MAX_ID_LENGTH = 512
"""The longest id (run, thread, checkpoint, tenant) or name the stores accept, in characters."""

_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def bad_text(text: str) -> str | None:
    """Why ``text`` cannot be an id (a control character or a lone surrogate), or ``None``."""
    found = _BAD.search(text)
    if found is None:
        return None
    char = found.group()
    kind = "a lone surrogate" if "\ud800" <= char <= "\udfff" else "a control character"
    return f"it contains {kind} ({char!r} at index {found.start()})"


def check_id(value: object, what: str, where: str) -> str:
    """``value`` as an id: a non-empty str of printable characters, at most
    :data:`MAX_ID_LENGTH` long.

    Args:
        value: the argument.
        what: its name (``"thread_id"``).
        where: the call it was passed to (``"invoke"``).

    Raises:
        InvalidArgument: naming the call, the argument and the fix.
    """
    if type(value) is str and 0 < len(value) <= MAX_ID_LENGTH and value.isprintable():
        return value  # the common case: no control character, no lone surrogate
    if not isinstance(value, str):
        raise InvalidArgument(f"{where}({what}={_show(value)}): {what} must be a str, got "
                              f"{type(value).__name__}")
    if not value:
        raise InvalidArgument(f"{where}({what}=''): {what} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgument(f"{where}({what}={_show(value)}): {what} is {len(value)} "
                              f"characters long; at most {MAX_ID_LENGTH} are allowed")
    problem = bad_text(value)
    if problem is not None:
        raise InvalidArgument(f"{where}({what}={_show(value)}): {problem}; use printable "
                              "characters only")
    return value


def check_optional_id(value: object, what: str, where: str) -> str | None:
    """:func:`check_id`, allowing ``None``."""
    return None if value is None else check_id(value, what, where)


def _show(value: object) -> str:
    text = ascii(value)
    return text if len(text) <= 80 else text[:77] + "..."
