"""JSON helpers: normalisation of values into their JSON form, and fast copies of JSON data."""

from __future__ import annotations

from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

__all__ = ["NotJSONError", "jcopy", "to_json_value"]

_SCALARS = (str, int, float, bool, type(None))
_INFINITIES = (float("inf"), float("-inf"))


class NotJSONError(TypeError):
    """A value has no JSON form."""


def to_json_value(value: Any) -> Any:
    """Return ``value`` in its JSON form (pydantic models, tuples, datetimes converted).

    The result is a fresh structure: no container of ``value`` is shared with it.

    Raises:
        NotJSONError: when ``value`` (or something inside it) has no JSON form.
    """
    if type(value) in _SCALARS:
        if type(value) is float and (value != value or value in _INFINITIES):
            raise NotJSONError(f"{value!r} is not a JSON value (it does not round-trip)")
        return value
    try:
        out = to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise NotJSONError(str(exc)) from None
    _check(out)
    return out


def _check(value: Any) -> None:
    t = type(value)
    if t is dict:
        for k, v in value.items():
            if type(k) is not str:
                raise NotJSONError(f"dict key {k!r} is not a string")
            _check(v)
    elif t is list:
        for v in value:
            _check(v)
    elif t is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise NotJSONError(f"{value!r} is not a JSON value")
    elif t not in _SCALARS:
        raise NotJSONError(f"{value!r} of type {t.__name__} is not a JSON value")


def jcopy(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists and scalars), much faster than ``copy.deepcopy``."""
    t = type(value)
    if t is dict:
        return {k: (v if type(v) in _SCALARS else jcopy(v)) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _SCALARS else jcopy(v) for v in value]
    return value
