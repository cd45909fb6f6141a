"""One order for sets in their JSON form, whatever the process (internal).

A state key declared as a set (``set[str]``, ``frozenset[int]``, ``list[set[str]]``, ...)
holds a list in the state's JSON form. pydantic lists a set in iteration order, which for
strings follows string hashing and differs between processes (``PYTHONHASHSEED``): the same
run would store and stream other bytes elsewhere. :func:`canonical` sorts those lists —
naturally when the items compare, else by their JSON text — wherever a value enters the
state or a model is dumped back to it.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

__all__ = ["canonical", "has_set"]

_SETS = (set, frozenset)


def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def has_set(tp: Any) -> bool:
    """Whether a value of annotation ``tp`` can hold a set anywhere inside it."""
    if tp in _SETS:
        return True
    origin = typing.get_origin(tp)
    if origin is None:
        return False
    if origin in _SETS:
        return True
    return any(has_set(a) for a in _args(tp) if not isinstance(a, (str, int, bool)))


def _sorted(items: list[Any]) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:  # items that do not compare (mixed types, dicts): by their JSON text
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


def canonical(tp: Any, value: Any) -> Any:
    """``value`` (JSON form of a ``tp`` value) with every list that stands for a set sorted."""
    if value is None:
        return value
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return canonical(_args(tp)[0], value)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in _args(tp) if a is not type(None) and has_set(a)]
        # One set-holding option decides; with several, which one a value is cannot be told
        # from its JSON form, so it is left as it is.
        return canonical(options[0], value) if len(options) == 1 else value
    if tp in _SETS or origin in _SETS:
        if not isinstance(value, list):
            return value
        inner = _args(tp)[0] if _args(tp) else Any
        return _sorted([canonical(inner, item) for item in value])
    if origin in (list, tuple) and isinstance(value, list):
        args = _args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            return [canonical(a, v) for a, v in zip(args, value, strict=False)]
        inner = args[0] if args else Any
        return [canonical(inner, item) for item in value]
    if origin is dict and isinstance(value, dict):
        args = _args(tp)
        inner = args[1] if len(args) == 2 else Any
        return {k: canonical(inner, v) for k, v in value.items()}
    return value
