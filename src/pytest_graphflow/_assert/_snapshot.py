"""A syrupy extension that snapshots event streams as stable, readable text (SPEC §8).

The format (``# graphflow-events v1``) is one line per event after a format marker::

    # graphflow-events v1
    0 step=0 run_start graph_id=g revision=3f2a run_id=run-1 thread_id=t time=2025-01-01T00:00:00Z
    1 step=0 node_start plan task_id=task-1
    2 step=0 node_end plan patch={"total":1} replayed=false task_id=task-1

Each line is ``SEQ step=STEP TYPE [NODE]`` then the other wire fields as ``key=value``, keys
sorted. Values are compact JSON with sorted keys; a string is written bare unless it could be
read as something else (spaces, quotes, ``=``, JSON literals), then it is JSON-quoted.
To keep lines short, and without losing anything:

* ``run_id`` and ``time`` appear only when they differ from the previous event's;
* ``node_end``'s ``started_at`` / ``finished_at`` appear only when they differ from its ``time``;
* a field equal to its declared default is left out (``attempt=1``, ``None``), except
  ``node_end``'s ``replayed``, always shown.

:func:`parse_snapshot_text` reads the format back into wire dicts.

Ids are made stable: the runtime derives run, thread, checkpoint and task ids from the seed
(``run-6da6144999c9``), and the per-test seed changes with the session seed, so each distinct
12-hex-digit id token is written as its order of first appearance (``run-1``,
``cp-1-3``, ``task-1-5``, ``task-1-5:approve``). The snapshot records the behaviour, not the
seed; pass ``stable_ids=False`` to :func:`serialize_events` to keep raw ids.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from pydantic_core import PydanticUndefined
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from syrupy.types import PropertyFilter, PropertyMatcher, PropertyPath, SerializableData

from ..errors import UnsupportedFormat
from ._repr import EVENT_TYPES, coerce_events

__all__ = [
    "FORMAT_MARKER",
    "GraphEventsExtension",
    "graph_snapshot_fixture",
    "parse_snapshot_text",
    "serialize_events",
]

FORMAT_MARKER: Final = "# graphflow-events v1"
"""The first line of every events snapshot; bump the version when the format changes."""

_POSITIONAL: Final = ("seq", "type", "node")
_DITTO: Final = ("run_id", "time")
_TASK_TIMES: Final = ("started_at", "finished_at")
_ALWAYS_SHOWN: Final = {("node_end", "replayed")}


def _is_bare(text: str) -> bool:
    """Whether a string can be written unquoted and read back as the same string."""
    if not text or not text.isprintable() or text[0] in "\"'[{":
        return False
    if any(c.isspace() or c in "\"'=" for c in text):
        return False
    try:
        json.loads(text)
    except ValueError:
        return True
    return False  # "3", "true", "null" would read back as non-strings


def _escape_unprintable(text: str) -> str:
    # JSON leaves e.g. U+2028 raw, which some readers treat as a line break.
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text)


def render_value(value: Any) -> str:
    """Render one field value: a bare string when unambiguous, else compact canonical JSON."""
    if isinstance(value, str) and _is_bare(value):
        return value
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return _escape_unprintable(text)


def serialize_events(
    data: object,
    *,
    exclude: PropertyFilter | None = None,
    include: PropertyFilter | None = None,
    matcher: PropertyMatcher | None = None,
    stable_ids: bool = True,
) -> str:
    """Serialize an event sequence to the ``graphflow-events v1`` text (see module docs).

    Args:
        data: events, their wire dicts, or an object with ``.events`` (a ``Trace``, a result).
        exclude: a syrupy property filter; a field it selects is left out. Its ``path`` is
            ``((index, event_class),)`` and ``prop`` the field name (``props("time")``,
            ``paths("0.run_id")``). It reaches nested values too, as in syrupy's own
            snapshots: a key of a dict (a nested model's field) or an index of a list, with
            the path through its parents (``paths("3.patch.meta.request_id")``,
            ``props("request_id")`` at any depth). ``seq`` and ``type`` are always kept.
        include: a syrupy property filter; only the fields it selects are kept (it selects
            whole fields: nested values are not filtered by it).
        matcher: a syrupy property matcher applied to each field's wire value, with ``path``
            ``((index, event_class), (field, value_type))``, and to every nested value
            (``paths``-style path through its parents), as syrupy does.
        stable_ids: write seed-derived id tokens as their order of first appearance.

    Returns:
        The text, ending with a newline.
    """
    lines = [FORMAT_MARKER]
    previous: dict[str, Any] = {}
    for index, event in enumerate(coerce_events(data)):
        wire = event.model_dump(mode="json")
        etype = wire["type"]
        fields = type(event).model_fields
        base: PropertyPath = ((index, type(event)),)
        kept: dict[str, Any] = {}
        for key in sorted(wire):
            value = wire[key]
            if key not in ("seq", "type"):
                if exclude is not None and exclude(prop=key, path=base):
                    continue
                if include is not None and not include(prop=key, path=base):
                    continue
                value = _filtered(value, (*base, (key, type(value))), exclude, matcher)
            kept[key] = value
        parts = [str(kept["seq"])]
        if "step" in kept:
            parts.append(f"step={render_value(kept['step'])}")
        parts.append(render_value(etype))
        if kept.get("node") is not None:
            parts.append(render_value(kept["node"]))
        for key, value in kept.items():
            if key in _POSITIONAL or key == "step":
                continue
            if key in _DITTO and key in previous and previous[key] == value:
                continue
            if key in _TASK_TIMES and value == kept.get("time", wire["time"]):
                continue
            info = fields.get(key)
            is_default = (
                info is not None
                and info.default is not PydanticUndefined
                and value == info.default
                and type(value) is type(info.default)
            )
            if is_default and (etype, key) not in _ALWAYS_SHOWN:
                continue
            parts.append(f"{key}={render_value(value)}")
        for key in _DITTO:
            if key in kept:
                previous[key] = kept[key]
        lines.append(" ".join(parts))
    text = "\n".join(lines) + "\n"
    return _stable_ids(text) if stable_ids else text


def _filtered(value: Any, path: PropertyPath, exclude: PropertyFilter | None,
              matcher: PropertyMatcher | None) -> Any:
    """``value`` (a field's wire value at ``path``) with the matcher applied and the nested
    properties ``exclude`` selects left out, at every depth, as syrupy's own serializer does:
    a dict's keys and a list's indexes are props, the path runs through their parents."""
    if matcher is not None:
        value = matcher(data=value, path=path)
    if exclude is None and matcher is None:
        return value
    if isinstance(value, dict):
        return {k: _filtered(v, (*path, (k, type(v))), exclude, matcher)
                for k, v in value.items() if exclude is None or not exclude(prop=k, path=path)}
    if isinstance(value, list):
        return [_filtered(v, (*path, (i, type(v))), exclude, matcher)
                for i, v in enumerate(value) if exclude is None or not exclude(prop=i, path=path)]
    return value


_ID_TOKEN: Final = re.compile(r"\b(run|thread|cp|task)-([0-9a-f]{12})\b")


def _stable_ids(text: str) -> str:
    """Replace each seed-derived id token by its order of first appearance."""
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        token = match.group(2)
        n = numbers.setdefault(token, len(numbers) + 1)
        return f"{match.group(1)}-{n}"

    return _ID_TOKEN.sub(number, text)


_KEY: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_DECODER: Final = json.JSONDecoder()


def _read_value(line: str, pos: int) -> tuple[Any, int]:
    if line[pos] in "\"[{":
        return _DECODER.raw_decode(line, pos)
    end = pos
    while end < len(line) and not line[end].isspace():
        end += 1
    raw = line[pos:end]
    try:
        return json.loads(raw), end
    except ValueError:
        return raw, end


def parse_snapshot_text(text: str) -> list[dict[str, Any]]:
    """Read ``graphflow-events v1`` text back into wire dicts (``parse_event`` reads those).

    Elided ``run_id``/``time`` are carried over from the previous event, elided task times
    filled from ``time``, and omitted fields given their declared defaults, so
    ``[parse_event(d) for d in parse_snapshot_text(serialize_events(evs))] == evs``
    whenever no filter or matcher was used.

    Raises:
        UnsupportedFormat: when the first line is not the format marker, or a line is garbled.
    """
    lines = text.split("\n")
    if not lines or lines[0].strip() != FORMAT_MARKER:
        raise UnsupportedFormat(
            f"not a graphflow events snapshot: the first line must be {FORMAT_MARKER!r}"
        )
    out: list[dict[str, Any]] = []
    previous: dict[str, Any] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields: dict[str, Any] = {}
        positional: list[Any] = []
        pos = 0
        try:
            while True:
                while pos < len(line) and line[pos].isspace():
                    pos += 1
                if pos >= len(line):
                    break
                m = _KEY.match(line, pos)
                if m is not None:
                    fields[m.group(1)], pos = _read_value(line, m.end())
                else:
                    value, pos = _read_value(line, pos)
                    positional.append(value)
        except (ValueError, IndexError) as exc:
            raise UnsupportedFormat(f"line {number} is garbled: {line!r} ({exc})") from None
        if len(positional) < 2 or len(positional) > 3 or positional[1] not in EVENT_TYPES:
            raise UnsupportedFormat(
                f"line {number} is not 'SEQ step=N TYPE [NODE] key=value...': {line!r}"
            )
        fields.update(zip(_POSITIONAL, positional, strict=False))
        for key in _DITTO:
            if key in fields:
                previous[key] = fields[key]
            elif key in previous:
                fields[key] = previous[key]
        cls = EVENT_TYPES[fields["type"]]
        for key, info in cls.model_fields.items():
            if key in fields:
                continue
            if key in _TASK_TIMES and "time" in fields:
                fields[key] = fields["time"]
            elif info.default is not PydanticUndefined:
                fields[key] = info.default
        out.append(fields)
    return out


class GraphEventsExtension(SingleFileSnapshotExtension):
    """Snapshot an event stream as one readable text file per assertion.

    The file is ``__snapshots__/<test module>/<test name>.events.txt`` in the
    ``graphflow-events v1`` format (module docs): deterministic, one event per line, keys
    sorted, so a changed run shows as a line diff. Use it as
    ``assert trace.events == snapshot(extension_class=GraphEventsExtension)`` or through
    the ``graph_snapshot`` fixture. syrupy's ``exclude``/``include``/``matcher`` apply to the
    fields of each event (see :func:`serialize_events`).
    """

    _write_mode = WriteMode.TEXT
    file_extension = "events.txt"

    def serialize(
        self,
        data: SerializableData,
        *,
        exclude: PropertyFilter | None = None,
        include: PropertyFilter | None = None,
        matcher: PropertyMatcher | None = None,
    ) -> str:
        """Serialize ``data`` (events, or an object with ``.events``) to snapshot text."""
        return serialize_events(data, exclude=exclude, include=include, matcher=matcher)


def graph_snapshot_fixture(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """Return syrupy's ``snapshot`` with :class:`GraphEventsExtension` as its default.

    The plugin exposes this as the ``graph_snapshot`` fixture.

    Args:
        snapshot: syrupy's ``snapshot`` fixture.
    """
    return snapshot.with_defaults(extension_class=GraphEventsExtension)
