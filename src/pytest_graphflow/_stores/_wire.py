"""How a store writes events and run records as JSON text: one rule for the SQLite and the
PostgreSQL store (the in-memory store keeps the parsed text), so every store accepts and
refuses the same events.

An event the runtime built and dumped itself (:class:`~.._records._json.DumpedEvents`) is only
serialised: its values were checked where they entered the run, nesting at most
:data:`~.._records._json.MAX_DEPTH` levels inside the event's own fields. Any other event is
checked whole: a dict with an int ``seq`` >= 0, nothing JSON would give back as something else
(a set, a complex number, a dict key that is not a string), no NaN or infinity, no lone
surrogate, and no nesting deeper than the serialiser follows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from .._records._checkpoint import Checkpoint
from .._records._json import NotJSONError, refuse_lossy, to_json_value
from ..errors import InvalidArgument
from . import _claims as rules

__all__ = [
    "checkpoint_json", "dumped_row", "event_row", "nodes_array", "parsed_event",
    "plain_run_record", "with_visited",
]

_SERIALIZER = Checkpoint.__pydantic_serializer__


def checkpoint_json(cp: Checkpoint, store: str, exclude: set[str] | None = None) -> str:
    """The JSON text of ``cp`` (without the fields in ``exclude``), as a store writes it.

    Raises:
        InvalidArgument: when ``cp`` holds a value with no JSON/UTF-8 form (``store`` names
            the store in the message).
    """
    try:
        data: str = _SERIALIZER.to_json(cp, exclude=exclude, warnings=False).decode()
        if not data.isascii():
            data.encode("utf-8")
    except (ValueError, UnicodeError, RecursionError) as exc:
        raise InvalidArgument(f"save({cp.id!r}): the checkpoint cannot be stored in "
                              f"{store}: {str(exc)[:200]}") from None
    return data


def nodes_array(nodes: Sequence[str]) -> str:
    """The JSON array of ``nodes`` (node names: a slice of the runtime's visited log, or a
    tuple), as the SQLite and PostgreSQL stores keep a checkpoint's path or its tail."""
    try:
        return to_json(nodes).decode()
    except (PydanticSerializationError, UnicodeError, ValueError):  # a lone surrogate
        return json.dumps(list(nodes))


def with_visited(data: str, array: str) -> str:
    """A checkpoint's JSON written without ``visited`` (``data``) with ``array`` (a JSON
    array, :func:`nodes_array`'s; ``""``: none) as its ``visited``."""
    return f"{data[:-1]},\"visited\":{array}}}" if array else data


def event_row(run_id: str, event: object, seq: int | None = None
              ) -> tuple[str, int, Any, str]:
    """``(run_id, seq, type, data)`` of one event, serialised once (``seq``: the event's,
    when the caller checked it already).

    Raises:
        InvalidArgument: when the event is not a dict with an int ``seq``, or not JSON.
    """
    if seq is None:
        seq = rules.event_seq(event)
    assert isinstance(event, Mapping)
    try:
        refuse_lossy(event, 0)  # what JSON would give back as something else (a set, ...)
        raw = to_json(event, inf_nan_mode="constants")
        if b"NaN" in raw or b"Infinity" in raw:  # a real NaN is refused; a word in a text is not
            json.dumps(event, allow_nan=False, default=_wire)
        data = raw.decode()
    except (TypeError, ValueError, RecursionError, NotJSONError,
            PydanticSerializationError) as exc:
        raise InvalidArgument(f"record_events: event seq={seq} of run {run_id} is not JSON: "
                              f"{str(exc)[:200]}") from None
    kind = event.get("type")
    return (run_id, seq, kind if isinstance(kind, str) else None, data)


def dumped_row(run_id: str, event: dict[str, Any], seq: int) -> tuple[str, int, Any, str]:
    """:func:`event_row` of an event the runtime dumped itself (see
    :class:`~.._records._json.DumpedEvents`): its seq and values are checked already, so
    it is only serialised (a NaN or infinity is still refused).

    Raises:
        InvalidArgument: when the event holds a NaN or an infinity.
    """
    raw = to_json(event, inf_nan_mode="constants")
    if b"NaN" in raw or b"Infinity" in raw:
        return event_row(run_id, event, seq)
    return (run_id, seq, event["type"], raw.decode())


def parsed_event(run_id: str, event: object, seq: int | None = None, *,
                 dumped: bool = False) -> tuple[int, dict[str, Any]]:
    """An event's ``seq`` and a fresh copy of its JSON form, accepted and refused exactly as
    :func:`event_row` (or, with ``dumped``, :func:`dumped_row`) does: the in-memory store
    keeps events this way.

    Raises:
        InvalidArgument: when the event is not a dict with an int ``seq``, or not JSON.
    """
    if dumped:
        assert seq is not None
        assert isinstance(event, dict)
        _, seq, _, data = dumped_row(run_id, event, seq)
    else:
        _, seq, _, data = event_row(run_id, event, seq)
    return seq, json.loads(data)


def _wire(value: Any) -> Any:
    """The JSON form of a value ``json`` does not know (datetimes, models); else TypeError."""
    try:
        return to_json_value(to_jsonable_python(value))
    except Exception as exc:
        raise TypeError(f"{type(value).__name__} value has no JSON form") from exc


_PLAIN = (str, int, bool, type(None))


def plain_run_record(run_id: str, record: object) -> tuple[dict[str, Any], str] | None:
    """A run record of ``run_id`` whose values are all ASCII strings, ints, bools or ``None``
    (what the runtime writes while a run goes on), with its JSON; ``None`` for any other
    record, which :func:`~._claims.normalise_run_record` then checks and converts."""
    if type(record) is not dict or record.get("run_id") != run_id:
        return None
    for key, value in record.items():
        if type(key) is not str or not key.isascii() or type(value) not in _PLAIN or (
                type(value) is str and not value.isascii()):
            return None
    return record, json.dumps(record)
