"""A state compared with the one before: the changed paths, each with its old and new value.

Dicts are compared key by key and lists item by item (a list that grew shows its new items
as added), so a step that appends one entry to a long log is one row, not the whole log.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Change", "state_diff"]

_MISSING: Any = object()


@dataclass(frozen=True)
class Change:
    """One changed path.

    Attributes:
        path: ``key.sub[2]`` (the root is ``(state)``).
        kind: ``"added"``, ``"removed"`` or ``"changed"``.
        before: the old value (``None`` when added).
        after: the new value (``None`` when removed).
    """

    path: str
    kind: str
    before: Any = None
    after: Any = None


def state_diff(before: Any, after: Any) -> list[Change]:
    """The paths where ``after`` differs from ``before``, in the order of their keys."""
    return list(_walk("", before, after))


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _walk(path: str, a: Any, b: Any) -> Iterator[Change]:
    if a is _MISSING:
        yield Change(path or "(state)", "added", None, b)
    elif b is _MISSING:
        yield Change(path or "(state)", "removed", a, None)
    elif isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            yield from _walk(_join(path, key), a.get(key, _MISSING), b.get(key, _MISSING))
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            yield from _walk(_join(path, i), a[i] if i < len(a) else _MISSING,
                             b[i] if i < len(b) else _MISSING)
    elif type(a) is not type(b) or a != b:
        yield Change(path or "(state)", "changed", a, b)
