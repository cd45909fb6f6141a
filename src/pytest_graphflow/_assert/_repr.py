"""Rendering and diffing of event sequences; readable ``==`` failures in pytest.

:func:`format_event` renders one event on one line in the words of the pattern language of
:mod:`pytest_graphflow.assertions`; :func:`events_diff` compares two sequences; and
:func:`graphflow_assertrepr_compare` is what the plugin's ``pytest_assertrepr_compare`` calls.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from pydantic_core import PydanticUndefined

from .._records._events import (
    CheckpointSaved,
    CustomEvent,
    EdgeTransition,
    ErrorEvent,
    EventBase,
    InterruptEvent,
    InterruptExpired,
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
    ToolCallEvent,
    parse_event,
)
from .._records._json import NotJSONError, to_json_value
from ..errors import InvalidArgument

__all__ = [
    "EVENT_TYPES",
    "HEAD_FIELD",
    "coerce_events",
    "columns",
    "event_sequence",
    "events_diff",
    "field_diff",
    "format_event",
    "format_events",
    "graphflow_assertrepr_compare",
    "short_repr",
]

_MISSING: Final = object()

EVENT_TYPES: Final[dict[str, type[EventBase]]] = {
    "run_start": RunStart,
    "node_start": NodeStart,
    "node_end": NodeEnd,
    "edge_transition": EdgeTransition,
    "checkpoint_saved": CheckpointSaved,
    "interrupt": InterruptEvent,
    "interrupt_expired": InterruptExpired,
    "error": ErrorEvent,
    "custom": CustomEvent,
    "tool_call": ToolCallEvent,
    "run_end": RunEnd,
}
"""Every event type by its ``type`` name."""

HEAD_FIELD: Final[dict[str, str]] = {
    "run_start": "graph_id",
    "run_end": "status",
    "custom": "channel",
    "tool_call": "tool",
}
"""The field ``TYPE:ARG`` names, where it is not ``node`` (``edge_transition`` is apart)."""


# --------------------------------------------------------------------------- events in


def coerce_events(events: object) -> list[EventBase]:
    """Return ``events`` as a list of events.

    Accepts any iterable of events or of their wire dicts, or an object with ``.events``
    (a ``Trace``, a result).

    Raises:
        InvalidArgument: when ``events`` is not such a thing.
    """
    if not isinstance(events, (list, tuple)):
        inner = getattr(events, "events", _MISSING)
        if inner is not _MISSING:
            events = inner
    if isinstance(events, (str, bytes, Mapping, EventBase)) or not isinstance(events, Iterable):
        raise InvalidArgument(
            f"expected a sequence of events (or an object with .events), got {events!r:.80}"
        )
    out: list[EventBase] = []
    for i, ev in enumerate(events):
        if isinstance(ev, EventBase):
            out.append(ev)
        elif isinstance(ev, Mapping) and "type" in ev:
            out.append(parse_event(dict(ev)))
        else:
            raise InvalidArgument(f"item {i} is not an event: {ev!r:.80}")
    return out


def event_sequence(obj: object) -> list[EventBase] | None:
    """``obj``'s events if it is a list/tuple of events or has such ``.events``; else None."""
    if not isinstance(obj, (list, tuple)):
        try:
            obj = getattr(obj, "events", None)
        except Exception:
            return None
    if isinstance(obj, (list, tuple)) and all(isinstance(e, EventBase) for e in obj):
        return list(obj)
    return None


# --------------------------------------------------------------------------- rendering


def _head_arg(event: EventBase) -> tuple[str | None, frozenset[str]]:
    """The part shown after the type (mirroring the pattern language) and the fields it covers."""
    etype = getattr(event, "type", None)
    if isinstance(event, EdgeTransition):
        # Its ``node`` is the source; showing it again would be noise.
        covered = {"source", "target"} | ({"node"} if event.node == event.source else set())
        return f"{event.source}->{event.target}", frozenset(covered)
    if isinstance(etype, str) and etype in HEAD_FIELD:
        name = HEAD_FIELD[etype]
        return str(getattr(event, name)), frozenset({name})
    return event.node, frozenset({"node"})


def short_repr(value: object, limit: int = 80) -> str:
    """``repr`` of ``value``'s JSON form (models and datetimes made readable), cut at ``limit``."""
    if isinstance(value, re.Pattern):
        text = f"re({value.pattern!r})"
    elif isinstance(value, type):
        text = value.__name__
    elif inspect.isroutine(value):
        name = value.__name__  # not repr(): that holds a memory address
        text = name if name.startswith("<") else f"<{name}>"
    else:
        try:
            shown = to_json_value(value)
        except NotJSONError:
            shown = value
        text = repr(shown)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_COMPACT_SKIP: Final = frozenset(
    {"seq", "type", "run_id", "step", "time", "task_id", "started_at", "finished_at", "revision"}
)


def format_event(event: EventBase) -> str:
    """Render one event on one line, compactly: ``#3 node_end a patch={'total': 3}``.

    The type is followed by what the pattern language names (node, ``source->target``,
    status, channel, graph id), then the other fields that differ from their defaults.
    Run ids, steps, times and task ids are left out.
    """
    etype = getattr(event, "type", type(event).__name__)
    head, covered = _head_arg(event)
    parts = [f"#{event.seq}", str(etype)]
    if head is not None:
        parts.append(head)
    for name, info in type(event).model_fields.items():
        if name in _COMPACT_SKIP or name in covered:
            continue
        value = getattr(event, name)
        if info.default is not PydanticUndefined and value == info.default:
            continue
        parts.append(f"{name}={short_repr(value)}")
    return " ".join(parts)


def format_events(events: object) -> str:
    """Render events one per line with :func:`format_event` (for diffs and failure reports).

    Args:
        events: an iterable of events, or an object with ``.events``.
    """
    return "\n".join(format_event(e) for e in coerce_events(events))


def columns(
    rows: Sequence[tuple[str, str, str]], headers: tuple[str, str], width_cap: int = 48
) -> list[str]:
    """Lay out ``(marker, left, right)`` rows in two columns under ``headers``.

    The left column is as wide as its widest cell, up to ``width_cap``. A left cell wider
    than that is written whole on a line of its own and its right cell on the next line,
    under the right column (both lines carry the row's marker), so the ``|`` stays in one
    column and nothing is cut.
    """
    width = min(width_cap, max([len(headers[0])] + [len(r[1]) for r in rows]))
    out = [f"    {headers[0]:<{width}} | {headers[1]}"]
    for mark, left, right in rows:
        if len(left) > width:
            out.append(f"  {mark} {left}")
            out.append(f"  {mark} {'':<{width}} | {right}".rstrip())
        else:
            out.append(f"  {mark} {left:<{width}} | {right}".rstrip())
    return out


FIELD_WIDTH: Final = 80
"""How much of a differing field :func:`events_diff` shows (of each side)."""

_BEFORE_DIFFERENCE: Final = 30
"""How much of a long field is shown before its first differing character."""


def _first_difference(a: str, b: str) -> int:
    """The index of the first character where ``a`` and ``b`` differ (or the shorter's end)."""
    n = min(len(a), len(b))
    return next((k for k in range(n) if a[k] != b[k]), n)


def _clip(text: str, start: int, width: int) -> str:
    """``text[start:start + width]``, with ``…`` where something was cut."""
    head = "…" if start > 0 else ""
    tail = "…" if start + width < len(text) else ""
    return head + text[start : start + width] + tail


def field_diff(name: str, left: object, right: object, width: int = FIELD_WIDTH) -> list[str]:
    """Lines showing how field ``name`` differs (``_MISSING`` for an absent field).

    Short values are shown whole on one line: ``  name: left != right``. When either
    rendering is longer than ``width``, both are shown on lines of their own, cut to the
    same ``width`` characters around the first one that differs (``…`` marks a cut), with a
    ``^`` under it, so a difference deep in a long value is never hidden.
    """
    sa = "<absent>" if left is _MISSING else short_repr(left, limit=sys.maxsize)
    sb = "<absent>" if right is _MISSING else short_repr(right, limit=sys.maxsize)
    if len(sa) <= width and len(sb) <= width:
        return [f"  {name}: {sa} != {sb}"]
    at = _first_difference(sa, sb)
    # Start a little before the difference, but show a full window when the values end soon.
    start = max(0, min(at - _BEFORE_DIFFERENCE, max(len(sa), len(sb)) - width))
    caret = len("    left:  ") + (1 if start > 0 else 0) + at - start
    return [
        f"  {name} (long values; first difference at index {at}):",
        f"    left:  {_clip(sa, start, width)}",
        f"    right: {_clip(sb, start, width)}",
        " " * caret + "^",
    ]


def events_diff(left: object, right: object, *, context: int = 3) -> list[str]:
    """Compare two event sequences: the first divergent event and a window around it.

    Args:
        left: events (or an object with ``.events``).
        right: events (or an object with ``.events``).
        context: how many events to show on each side of the first difference.

    Returns:
        Lines of text; empty when the sequences are equal. Events are shown with their
        ``#seq`` numbers. Each field of the first divergent event that differs gets
        :func:`field_diff` lines: a long value is shown around its first differing
        character, not cut at a fixed length.
    """
    lhs, rhs = coerce_events(left), coerce_events(right)
    i = next((k for k, (a, b) in enumerate(zip(lhs, rhs, strict=False)) if a != b), None)
    if i is None:
        if len(lhs) == len(rhs):
            return []
        i = min(len(lhs), len(rhs))
    lines = [
        f"event sequences differ at position {i} "
        f"(left has {len(lhs)} events, right has {len(rhs)})"
    ]
    a = lhs[i] if i < len(lhs) else None
    b = rhs[i] if i < len(rhs) else None
    lines.append(f"  left:  {format_event(a) if a is not None else '<end of events>'}")
    lines.append(f"  right: {format_event(b) if b is not None else '<end of events>'}")
    if a is not None and b is not None:
        da, db = a.model_dump(mode="json"), b.model_dump(mode="json")
        for name in [*da, *(k for k in db if k not in da)]:
            va, vb = da.get(name, _MISSING), db.get(name, _MISSING)
            if va != vb:
                lines.extend(field_diff(name, va, vb))
    lo, hi = max(0, i - context), min(max(len(lhs), len(rhs)), i + context + 1)
    rows = [
        (
            ">" if k == i else " ",
            format_event(lhs[k]) if k < len(lhs) else "",
            format_event(rhs[k]) if k < len(rhs) else "",
        )
        for k in range(lo, hi)
    ]
    lines.append(f"window (positions {lo}..{hi - 1}):")
    lines.extend(columns(rows, ("left", "right"), width_cap=60))
    return lines


# --------------------------------------------------------------------------- pytest hook


def graphflow_assertrepr_compare(op: str, left: object, right: object) -> list[str] | None:
    """Explain a failed ``left == right`` between two event sequences.

    Both sides must be lists/tuples of events or objects with such ``.events`` (a ``Trace``),
    and at least one of them non-empty. The first line is the summary pytest shows after
    ``assert``; the rest show the first divergent event, the fields that differ and a window
    of events around it.

    Args:
        op: the comparison operator; only ``"=="`` is explained.
        left: the left operand.
        right: the right operand.

    Returns:
        The explanation lines, or ``None`` to let pytest (or another plugin) explain.
    """
    if op != "==":
        return None
    lhs, rhs = event_sequence(left), event_sequence(right)
    if lhs is None or rhs is None or not (lhs or rhs):
        return None
    return events_diff(lhs, rhs) or None
