"""The event pattern language behind :func:`pytest_graphflow.assert_events`: parsing items,
matching them against events, and the side-by-side mismatch message.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any, Final

from pydantic import BaseModel

from .._records._events import EventBase
from .._records._json import NotJSONError, to_json_value
from ..errors import GraphflowError
from ._repr import (
    EVENT_TYPES,
    HEAD_FIELD,
    columns,
    format_event,
    short_repr,
)

__all__ = [
    "Element",
    "EventPatternError",
    "event_test",
    "match_elements",
    "mismatch_message",
    "parse_item",
    "pattern_items",
    "value_matches",
]

_RUN_STATUSES: Final = ("completed", "interrupted", "failed", "cancelled")
_VIRTUAL_NODES: Final[dict[str, str]] = {"END": "__end__", "START": "__start__"}
_ALL_FIELDS: Final[frozenset[str]] = frozenset(
    {"type"}.union(*(cls.model_fields for cls in EVENT_TYPES.values()))
)
_VALID_FORMS: Final = (
    "valid items: 'TYPE', 'TYPE:NODE', 'edge_transition:SOURCE->TARGET', 'run_end:STATUS', "
    "'run_start:GRAPH_ID', 'custom:CHANNEL', '*', '...', '{ITEM, ITEM}', trailing "
    "'field=value' / 'field~=regex' matchers, a dict of field matchers, a set of items, an "
    f"event or a predicate; TYPE is one of {', '.join(EVENT_TYPES)}"
)
_MISSING: Final = object()


class EventPatternError(GraphflowError, ValueError):
    """A pattern given to :func:`assert_events` is malformed.

    Attributes:
        item: the offending pattern item.
        problem: what is wrong with it.
    """

    def __init__(self, item: object, problem: str) -> None:
        self.item = item
        self.problem = problem
        super().__init__(f"bad event pattern item {item!r}: {problem}\n({_VALID_FORMS})")


# --------------------------------------------------------------------------- value matching


def _has_own_eq(obj: object) -> bool:
    return type(obj).__eq__ is not object.__eq__


def value_matches(expected: object, actual: object) -> bool:
    """Whether ``actual`` satisfies the field matcher ``expected`` (see the module docstring)."""
    try:
        return _value_matches(expected, actual)
    except Exception:
        # A predicate written for one event shape may raise on another; that is no match.
        return False


def _value_matches(expected: object, actual: object) -> bool:
    if isinstance(expected, re.Pattern):
        return isinstance(actual, str) and expected.fullmatch(actual) is not None
    if isinstance(expected, type):
        return isinstance(actual, expected)
    if isinstance(expected, Mapping):
        if isinstance(actual, BaseModel):
            actual = {name: getattr(actual, name) for name in type(actual).model_fields}
        if not isinstance(actual, Mapping):
            return False
        return all(k in actual and _value_matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return len(expected) == len(actual) and all(
            _value_matches(e, a) for e, a in zip(expected, actual, strict=True)
        )
    if callable(expected) and not _has_own_eq(expected):
        return bool(expected(actual))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if expected == actual:
        return True
    if isinstance(expected, str) and actual is not None and not isinstance(actual, str):
        try:
            return bool(to_json_value(actual) == expected)
        except NotJSONError:
            return False
    return False


# --------------------------------------------------------------------------- pattern items


@dataclass(frozen=True)
class _Single:
    text: str
    test: Callable[[EventBase], bool]
    etype: str | None = None  # the event type it requires, to suggest near misses


@dataclass(frozen=True)
class _Gap:
    text: str = "..."


@dataclass(frozen=True)
class _Group:
    text: str
    items: tuple[_Single, ...]


Element = _Single | _Gap | _Group


def _field_test(checks: Sequence[tuple[str, object]]) -> Callable[[EventBase], bool]:
    def test(event: EventBase) -> bool:
        for name, expected in checks:
            actual = getattr(event, name, _MISSING)
            if actual is _MISSING or not value_matches(expected, actual):
                return False
        return True

    return test


def _check_fields(item: object, etype: str | None, names: Iterable[str]) -> None:
    valid = _ALL_FIELDS if etype is None else {"type", *EVENT_TYPES[etype].model_fields}
    for name in names:
        if name not in valid:
            raise EventPatternError(
                item,
                f"{etype or 'no event'} has no field {name!r}; "
                f"fields: {', '.join(sorted(valid))}",
            )


def _check_type(item: object, etype: str) -> None:
    if etype not in EVENT_TYPES:
        raise EventPatternError(item, f"unknown event type {etype!r}")


def _scan(text: str, start: int, stop: Callable[[str], bool], item: object) -> int:
    """Index where a bracket- and quote-aware scan from ``start`` meets ``stop`` at depth 0."""
    depth, quote, i = 0, "", start
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 1  # an escaped character never opens, closes or ends anything
        elif quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                raise EventPatternError(item, f"unbalanced {c!r}")
        elif depth == 0 and stop(c):
            return i
        i += 1
    if quote or depth:
        raise EventPatternError(item, "unbalanced brackets or quotes")
    return i


def _literal(raw: str) -> object:
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        return json.loads(raw)
    except ValueError:
        return raw


_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(~?=)")


def _parse_field_matchers(text: str, item: object) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        m = _KEY.match(text, pos)
        if m is None:
            raise EventPatternError(item, f"expected 'field=value' at {text[pos:]!r}")
        end = _scan(text, m.end(), str.isspace, item)
        raw = text[m.end() : end]
        if not raw:
            raise EventPatternError(item, f"no value after {m.group(0)!r}")
        value = _literal(raw)
        if m.group(2) == "~=":
            try:
                expected: object = re.compile(value if isinstance(value, str) else raw)
            except re.error as exc:
                raise EventPatternError(item, f"bad regular expression {raw!r}: {exc}") from None
        elif isinstance(value, str):
            expected = value
        else:
            # ``node=1`` should still match a node named "1".
            expected = _LiteralOrText(value, raw)
        out.append((m.group(1), expected))
        pos = end


class _LiteralOrText:
    """A string-form value that matches as its literal or as its text."""

    def __init__(self, value: object, raw: str) -> None:
        self.value, self.raw = value, raw

    def __call__(self, actual: object) -> bool:
        return _value_matches(self.value, actual) or actual == self.raw

    def __repr__(self) -> str:
        return self.raw


def _parse_single_str(text: str, item: object) -> _Single:
    head, *tail = text.strip().split(maxsplit=1)
    rest = tail[0] if tail else ""
    etype_text, colon, arg = head.partition(":")
    checks: list[tuple[str, object]] = []
    etype: str | None = None
    if etype_text == "*":
        if colon:
            raise EventPatternError(item, "'*' takes no ':' argument; use '* node=NAME'")
    else:
        _check_type(item, etype_text)
        etype = etype_text
        checks.append(("type", etype))
    if colon:
        if not arg:
            raise EventPatternError(item, f"nothing after {etype}:")
        if etype == "edge_transition":
            source, arrow, target = arg.partition("->")
            if not arrow or not source or not target:
                raise EventPatternError(item, "an edge is written 'edge_transition:SOURCE->TARGET'")
            for name, end in (("source", source), ("target", target)):
                if end != "*":
                    checks.append((name, _VIRTUAL_NODES.get(end, end)))
        elif arg != "*":
            assert etype is not None
            name = HEAD_FIELD.get(etype, "node")
            if etype == "run_end" and arg not in _RUN_STATUSES:
                raise EventPatternError(
                    item, f"run_end status {arg!r} is not one of {', '.join(_RUN_STATUSES)}"
                )
            checks.append((name, arg))
    fields = _parse_field_matchers(rest, item)
    _check_fields(item, etype, (name for name, _ in fields))
    checks.extend(fields)
    return _Single(text.strip(), _field_test(checks), etype)


def _parse_str(text: str, item: object, *, in_group: bool) -> Element:
    s = text.strip()
    if not s:
        raise EventPatternError(item, "empty item")
    if s in ("...", "…"):
        if in_group:
            raise EventPatternError(item, "a gap '...' cannot be inside an any-order group")
        return _Gap()
    if s.startswith("{"):
        if in_group:
            raise EventPatternError(item, "groups cannot be nested")
        if _scan(s, 0, lambda c: False, item) != len(s) or not s.endswith("}"):
            raise EventPatternError(item, "a group is written '{ITEM, ITEM, ...}'")
        inner = s[1:-1]
        parts, pos = [], 0
        while pos <= len(inner):
            end = _scan(inner, pos, lambda c: c == ",", item)
            parts.append(inner[pos:end])
            pos = end + 1
        singles: list[_Single] = []
        for part in parts:
            if part.strip():
                el = _parse_str(part, item, in_group=True)
                assert isinstance(el, _Single)  # gaps and groups raised above
                singles.append(el)
        if not singles:
            raise EventPatternError(item, "an empty group matches nothing")
        return _Group(s, tuple(singles))
    return _parse_single_str(s, item)


def _parse_dict(d: Mapping[Any, Any], item: object) -> _Single:
    for key in d:
        if not isinstance(key, str):
            raise EventPatternError(item, f"field names are strings, got {key!r}")
    etype = d.get("type")
    if isinstance(etype, str) and etype != "*":
        _check_type(item, etype)
        _check_fields(item, etype, d)
    else:
        _check_fields(item, None, d)
    checks = [(k, v) for k, v in d.items() if not (k == "type" and v == "*")]
    text = "{" + ", ".join(f"{k}={short_repr(v, 40)}" for k, v in d.items()) + "}"
    return _Single(text, _field_test(checks), etype if isinstance(etype, str) else None)


def parse_item(item: object, *, in_group: bool = False) -> Element:
    if item is Ellipsis:
        if in_group:
            raise EventPatternError(item, "a gap cannot be inside an any-order group")
        return _Gap()
    if isinstance(item, str):
        return _parse_str(item, item, in_group=in_group)
    if isinstance(item, EventBase):
        event = item
        return _Single(format_event(event), lambda e: e == event, getattr(event, "type", None))
    if isinstance(item, Mapping):
        return _parse_dict(item, item)
    if isinstance(item, (set, frozenset)):
        if in_group:
            raise EventPatternError(item, "groups cannot be nested")
        singles: list[_Single] = []
        for sub in item:
            el = parse_item(sub, in_group=True)
            if not isinstance(el, _Single):
                raise EventPatternError(item, f"{sub!r} cannot be inside a group")
            singles.append(el)
        if not singles:
            raise EventPatternError(item, "an empty group matches nothing")
        singles.sort(key=lambda s: s.text)  # set order is arbitrary; show a stable one
        return _Group("{" + ", ".join(s.text for s in singles) + "}", tuple(singles))
    if callable(item) and not isinstance(item, type):
        predicate = item
        return _Single(short_repr(predicate), lambda e: value_matches(predicate, e))
    raise EventPatternError(item, f"items of type {type(item).__name__} are not understood")


def event_test(item: object) -> Callable[[EventBase], bool]:
    """The test of one pattern item that matches one event (``"node_end:a"``, a dict of field
    matchers, an event, a predicate), as :func:`assert_events` reads it: what
    ``cancel_at=`` takes.

    Raises:
        EventPatternError: a malformed item, a gap or a group (they match no single event).
    """
    if isinstance(item, (set, frozenset)) or (
            isinstance(item, str) and item.strip().startswith("{")):
        raise EventPatternError(item, "a group matches several events; give one item")
    element = parse_item(item)
    if not isinstance(element, _Single):
        raise EventPatternError(item, "a gap matches no one event; give one item")
    return element.test


def pattern_items(pattern: object) -> list[object]:
    if isinstance(pattern, str):
        lines = (line.strip() for line in pattern.splitlines())
        return [line for line in lines if line and not line.startswith("#")]
    if isinstance(pattern, (Mapping, set, frozenset, EventBase)):
        return [pattern]
    if isinstance(pattern, Iterable):
        return list(pattern)
    raise EventPatternError(pattern, "a pattern is a list of items or a multi-line string")


# --------------------------------------------------------------------------- matching


def _group_matches(items: Sequence[_Single], events: Sequence[EventBase]) -> bool:
    """Whether ``events`` are ``items`` in some order (bipartite matching, Kuhn's algorithm)."""
    owner: list[int | None] = [None] * len(events)  # event index -> item index

    def place(i: int, seen: set[int]) -> bool:
        for j, ev in enumerate(events):
            if j in seen or not items[i].test(ev):
                continue
            seen.add(j)
            current = owner[j]
            if current is None or place(current, seen):
                owner[j] = i
                return True
        return False

    return all(place(i, set()) for i in range(len(items)))


@dataclass(frozen=True)
class _Failure:
    pattern_index: int
    position: int
    path: list[int]  # event index before each pattern element up to ``pattern_index``
    after_gap: bool


def match_elements(elements: Sequence[Element], events: Sequence[EventBase]) -> _Failure | None:
    """Match forward, keeping every reachable event index per pattern prefix."""
    n = len(events)
    # states[p] maps each event index reachable after elements[:p] to a predecessor index.
    states: list[dict[int, int]] = [{0: 0}]
    for el in elements:
        cur = states[-1]
        nxt: dict[int, int] = {}
        if isinstance(el, _Gap):
            last = min(cur)
            for e in range(last, n + 1):
                if e in cur:
                    last = e
                nxt[e] = last
        else:
            width = 1 if isinstance(el, _Single) else len(el.items)
            for e in sorted(cur):
                if e + width > n:
                    break
                window = events[e : e + width]
                ok = (
                    el.test(window[0])
                    if isinstance(el, _Single)
                    else _group_matches(el.items, window)
                )
                if ok:
                    nxt[e + width] = e
        if not nxt:
            break
        states.append(nxt)
    p = len(states) - 1
    if p == len(elements) and n in states[p]:
        return None
    after_gap = p < len(elements) and p > 0 and isinstance(elements[p - 1], _Gap)
    position = min(states[p]) if after_gap else max(states[p])
    path = [position]
    for q in range(p, 0, -1):
        path.append(states[q][path[-1]])
    path.reverse()
    return _Failure(p, position, path, after_gap)


_ROWS_BEFORE: Final = 30
_ROWS_AFTER: Final = 15


def mismatch_message(
    elements: Sequence[Element], events: Sequence[EventBase], failure: _Failure
) -> str:
    p, pos, n = failure.pattern_index, failure.position, len(events)
    expected = elements[p].text if p < len(elements) else "end of events"
    if p == len(elements):
        found = f"{format_event(events[pos])} (and {n - pos - 1} more events)"
    elif failure.after_gap:
        found = f"no match in positions {pos}..{n - 1} after the gap" if pos < n else "no events"
        el = elements[p]
        etype = el.etype if isinstance(el, _Single) else None
        near = [e for e in events[pos:] if getattr(e, "type", None) == etype]
        if near:
            shown = ", ".join(format_event(e) for e in near[:3])
            more = f" and {len(near) - 3} more" if len(near) > 3 else ""
            found += f"; {etype} events there: {shown}{more}"
    elif pos >= n:
        found = "end of events"
    else:
        el = elements[p]
        width = len(el.items) if isinstance(el, _Group) else 1
        found = "; ".join(format_event(e) for e in events[pos : pos + width])
        if pos + width > n:
            found += "; end of events"
    rows: list[tuple[str, str, str]] = []
    for q in range(p):
        consumed = events[failure.path[q] : failure.path[q + 1]]
        if not consumed:
            rows.append((" ", elements[q].text, ""))
        for k, ev in enumerate(consumed):
            rows.append((" ", elements[q].text if k == 0 else "", format_event(ev)))
    if len(rows) > _ROWS_BEFORE:
        keep = _ROWS_BEFORE - 5
        hidden = len(rows) - 5 - keep
        rows = [*rows[:5], (" ", "⋮", f"⋮ ({hidden} matched rows not shown)"), *rows[-keep:]]
    rows.append(
        (
            ">",
            elements[p].text if p < len(elements) else "<end of pattern>",
            format_event(events[pos]) if pos < n else "<end of events>",
        )
    )
    rest = list(
        zip_longest(
            (e.text for e in elements[p + 1 :]),
            (format_event(e) for e in events[pos + 1 :]),
            fillvalue="",
        )
    )
    rows.extend((" ", left, right) for left, right in rest[:_ROWS_AFTER])
    if len(rest) > _ROWS_AFTER:
        rows.append((" ", "⋮", f"⋮ ({len(rest) - _ROWS_AFTER} more rows)"))
    lines = [
        f"events do not match the pattern at position {pos} (pattern item {p}); "
        + {0: "no event matched", 1: "event 0 matched"}.get(pos, f"events 0..{pos - 1} matched"),
        f"  expected: {expected}",
        f"  found:    {found}",
        "",
        *columns(rows, ("pattern", "events")),
    ]
    return "\n".join(lines)


