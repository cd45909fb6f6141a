"""Comparing two runs' outcomes: ``ignore=`` paths, a ``normalize=`` function, concise diffs.

Every whole-run tool (``check_crash_recovery``, ``check_interrupt_resume_equivalence``,
``check_determinism``, ``explore``) compares a run's final state (and, where it compares
streams, the state carried by events) with another run's. Real apps keep values that
legitimately differ between those runs — a timestamp stamped from ``ctx.now()`` moves when
recovery waits out a dead process's claim — so each tool takes:

* ``ignore``: paths to leave out, dotted, ``*`` for any key or list index:
  ``"audit.*.at"`` drops the ``at`` field of every audit entry, ``"started"`` a whole key;
* ``normalize``: a function ``state dict -> state dict`` applied (to a copy) before comparing.

Differences are reported as the differing paths only (:func:`diff_paths`), never as dumps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..._records._json import jcopy
from ...errors import InvalidArgument

__all__ = ["Compare", "diff_paths", "short"]

Normalize = Callable[[dict[str, Any]], Mapping[str, Any]]

_SHORT = 80


def short(value: Any, limit: int = _SHORT) -> str:
    """``value`` as compact JSON, cut to ``limit`` characters."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parse(path: str) -> tuple[str, ...]:
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise InvalidArgument(f"ignore={path!r}: a path is dotted keys, '*' for any key or "
                              "index, e.g. 'audit.*.at'")
    return tuple(path.split("."))


def _drop(value: Any, parts: tuple[str, ...]) -> None:
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        keys = list(value) if head == "*" else [head] if head in value else []
        for k in keys:
            if rest:
                _drop(value[k], rest)
            else:
                del value[k]
    elif isinstance(value, list):
        if head == "*":
            idx = list(range(len(value)))
        elif head.isdigit() and int(head) < len(value):
            idx = [int(head)]
        else:
            idx = []
        for i in reversed(idx):
            if rest:
                _drop(value[i], rest)
            else:
                value[i] = "<ignored>"


@dataclass(frozen=True)
class Compare:
    """How a tool compares states: paths to ignore and a normalising function."""

    ignore: tuple[tuple[str, ...], ...] = ()
    normalize: Normalize | None = None

    @classmethod
    def of(cls, ignore: Iterable[str] | str | None, normalize: Normalize | None) -> Compare:
        """Validated options (a single string is one path)."""
        if isinstance(ignore, str):
            ignore = [ignore]
        if normalize is not None and not callable(normalize):
            raise InvalidArgument(f"normalize={normalize!r}: pass a function state -> state")
        return cls(tuple(_parse(p) for p in (ignore or ())), normalize)

    @property
    def active(self) -> bool:
        """Whether anything is ignored or normalised."""
        return bool(self.ignore) or self.normalize is not None

    def state(self, data: Any) -> Any:
        """``data`` (a state dict) as compared: normalised, then ignored paths dropped."""
        if not self.active or not isinstance(data, dict):
            return data
        out: Any = jcopy(data)
        if self.normalize is not None:
            out = jcopy(dict(self.normalize(out)))
        for parts in self.ignore:
            _drop(out, parts)
        return out

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        """An event's JSON with the state it carries (a patch, a run_end's state) compared
        like a state."""
        if not self.active:
            return event
        for name in ("patch", "state"):
            if isinstance(event.get(name), dict):
                value = jcopy(event[name])
                if self.normalize is not None and name == "state":
                    value = jcopy(dict(self.normalize(value)))
                for parts in self.ignore:
                    _drop(value, parts)
                event[name] = value
        return event


def diff_paths(want: Any, got: Any, *, limit: int = 8, prefix: str = "") -> list[str]:
    """The paths where ``got`` differs from ``want``, one line each: ``path: want → got``.

    Paths are written as ``ignore=`` takes them (``audit.0.at``), so one can be copied there.

    At most ``limit`` lines; a last line says how many more differ.
    """
    lines: list[str] = []
    _diff(want, got, prefix, lines)
    if len(lines) > limit:
        more = len(lines) - limit
        lines = [*lines[:limit], f"... and {more} more differing path(s)"]
    return lines


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in a:
                out.append(f"{p}: (absent) → {short(b[k])}")
            elif k not in b:
                out.append(f"{p}: {short(a[k])} → (absent)")
            else:
                _diff(a[k], b[k], p, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            p = f"{path}.{i}" if path else str(i)
            if i >= len(a):
                out.append(f"{p}: (absent) → {short(b[i])}")
            elif i >= len(b):
                out.append(f"{p}: {short(a[i])} → (absent)")
            else:
                _diff(a[i], b[i], p, out)
        return
    if a != b or type(a) is not type(b):
        out.append(f"{path or '<state>'}: {short(a)} → {short(b)}")
