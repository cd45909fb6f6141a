"""What ``graphflow`` prints: escaped text for people, JSON for scripts.

Everything a store holds (ids, names, messages) may contain control characters; printed raw,
an escape sequence would reach the terminal and a newline would forge a table row. Every
command prints through :func:`clean` (text) or :func:`to_json` (``--json``), so a new command
gets both by using :func:`table` / :func:`to_json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["clean", "table", "to_json"]

_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean(value: Any) -> str:
    """``value`` as one line of printable text: control characters, line separators and
    lone surrogates become escapes (``\\n``, ``\\x1b``, ``\\u2028``); ``None`` is ``-``."""
    text = "-" if value is None else value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape, text)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Aligned columns, every cell :func:`clean`."""
    cells = [[clean(c) for c in row] for row in (header, *rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in cells)


def to_json(data: Any) -> str:
    """``data`` as JSON for scripts: ASCII only (every control character escaped), keys in
    the order given, indented."""
    return json.dumps(data, indent=2, ensure_ascii=True, default=str)
