"""JSON helpers: normalisation of values into their JSON form, and fast copies of JSON data."""

from __future__ import annotations

from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

__all__ = [
    "MAX_DEPTH", "DumpedEvents", "NotJSONError", "jcopy", "lossy", "nests_deeper",
    "refuse_lossy", "to_json_value", "utf8_text",
]

MAX_DEPTH = 100
"""The deepest nesting of lists and dicts a JSON value may have (stores and the runtime's
copies recurse; far deeper data would overflow them)."""

_SCALARS = (str, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)
_INFINITIES = (float("inf"), float("-inf"))


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether parsed JSON ``value`` nests lists and dicts more than ``limit`` levels (the
    value itself is level 1), walked without recursion: a reader's own recursion limit
    (raised by whoever runs it) never decides what passes."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        t = type(item)
        if t is not dict and t is not list:
            continue
        if depth > limit:
            return True
        inner = item.values() if t is dict else item
        stack.extend((v, depth + 1) for v in inner)
    return False


class NotJSONError(TypeError):
    """A value has no JSON form."""


class DumpedEvents(list[dict[str, Any]]):
    """Events of one run that the runtime built and dumped itself (``model_dump(mode=
    "json")``), for a store's ``commit``.

    A store that serialises them itself may skip checking them one by one (it still refuses
    a NaN or an infinity): each has an int ``seq`` and the run's ``run_id``, and a dump holds
    nothing :func:`refuse_lossy` would refuse (the runtime refused such values where they
    entered, and pydantic converted the rest). To any other reader they are the plain list
    of dicts they are.
    """

    text: str | None = None
    """The events' JSON texts, one a line, when whoever made them wrote them too (a lean
    step's, :func:`~.._engine._stored.stored_step_events`): each exactly what
    :func:`~.._stores._wire.dumped_row` stores for its event, which then holds no NaN or
    infinity. ``None``: not written (a store serialises the events). Set once, on events
    nobody changes after."""


def to_json_value(value: Any, *, exact: bool = True) -> Any:
    """Return ``value`` in its JSON form (pydantic models, tuples, datetimes converted).

    The result is a fresh structure: no container of ``value`` is shared with it.

    Args:
        exact: refuse what JSON would give back as something else (see :func:`lossy`; and
            dict keys that are not strings); ``False`` for a state key whose declared type
            converts them back (``set[int]``, ``complex``, ``dict[int, str]``, ...).

    Raises:
        NotJSONError: when ``value`` (or something inside it) has no JSON form.
    """
    t = type(value)
    if t in _SCALARS:
        if t is float and (value != value or value in _INFINITIES):
            raise NotJSONError(f"{value!r} is not a JSON value (it does not round-trip)")
        if t is str and not value.isascii():
            _check_text(value)
        return value
    if t is dict:  # a flat dict of ASCII keys and plain values: its copy, without the walks
        flat: dict[str, Any] = {}
        for k, v in value.items():
            kind = type(v)
            if type(k) is not str or kind not in _SCALAR_TYPES or not k.isascii() or (
                    kind is str and not v.isascii()) or (
                    kind is float and (v != v or v in _INFINITIES)):
                break
            flat[k] = v
        else:
            return flat
    try:
        if exact:
            refuse_lossy(value, 0)
        out = to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise NotJSONError(str(exc)) from None
    except UnicodeError:
        raise NotJSONError("a string in the value contains a lone surrogate; it has no UTF-8 "
                           "form") from None
    except (RecursionError, ValueError) as exc:  # nesting deeper than pydantic recurses
        raise NotJSONError(f"the value cannot be converted ({type(exc).__name__}: "
                           f"{str(exc)[:100]}); JSON values nest at most {MAX_DEPTH} levels") \
            from None
    _check(out, 0)
    return out


def lossy(value: Any) -> str | None:
    """Why ``value`` itself (not what it holds) would come back from JSON as something else,
    or ``None``. pydantic would convert it silently: a set to a list, a complex number to a
    string. The runtime refuses such values where they enter (a node's patch, a reducer's
    result, a run's input)."""
    if isinstance(value, set | frozenset):
        return ("a set: a set has no order, and stored as a JSON list its order would follow "
                "string hashing, which differs between processes; return a list, e.g. "
                "sorted(...)")
    if isinstance(value, complex):
        return (f"a complex number ({value!r}): JSON has none, and it would come back as the "
                f"string {str(value)!r}; store [real, imag] or a string yourself")
    return None


def refuse_lossy(value: Any, depth: int) -> None:
    """Refuse what pydantic would convert silently (see :func:`lossy`) in plain lists, tuples
    and dicts, and dict keys that are not strings (JSON would give them back as strings).

    Raises:
        NotJSONError: naming the value or key and what to use instead.
    """
    t = type(value)
    if t in _SCALAR_TYPES or depth > MAX_DEPTH:  # too deep: the conversion refuses it
        return
    if t is dict or (t is not list and t is not tuple and isinstance(value, dict)):
        for k, v in value.items():
            if type(k) is not str and not isinstance(k, str):
                raise NotJSONError(f"dict key {k!r} is not a string: JSON keys are strings, "
                                   f"and it would come back as {str(k)!r}; use string keys")
            if type(v) not in _SCALAR_TYPES:
                refuse_lossy(v, depth + 1)
    elif t is list or t is tuple or isinstance(value, list | tuple):
        for v in value:
            if type(v) not in _SCALAR_TYPES:
                refuse_lossy(v, depth + 1)
    else:
        reason = lossy(value)
        if reason is not None:
            raise NotJSONError(reason)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NotJSONError(f"the string {text[:40]!a} contains a lone surrogate "
                           f"({text[exc.start]!a} at index {exc.start}); it has no UTF-8 "
                           "form") from None


def _check(value: Any, depth: int) -> None:
    t = type(value)
    if t is dict or t is list:
        if depth >= MAX_DEPTH:
            raise NotJSONError(f"the value nests deeper than {MAX_DEPTH} levels of lists and "
                               "dicts")
        if t is dict:
            for k, v in value.items():
                if type(k) is not str:
                    raise NotJSONError(f"dict key {k!r} is not a string")
                if not k.isascii():
                    _check_text(k)
                _check(v, depth + 1)
        else:
            for v in value:
                _check(v, depth + 1)
    elif t is str:
        if not value.isascii():
            _check_text(value)
    elif t is float:
        if value != value or value in _INFINITIES:
            raise NotJSONError(f"{value!r} is not a JSON value")
    elif t not in _SCALARS:
        raise NotJSONError(f"{value!r} of type {t.__name__} is not a JSON value")


def utf8_text(text: str) -> str:
    """``text`` with each lone surrogate written as its backslash escape (``"\\udcff"``,
    Python's ``backslashreplace``); any other text is returned as it is.

    A lone surrogate (a file name's bytes decoded with ``surrogateescape``, say) has no UTF-8
    form, so no store can keep it; what a run records about a failure goes through this, so
    every store keeps the same text.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def jcopy(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists and scalars), much faster than ``copy.deepcopy``."""
    t = type(value)
    if t is dict:
        return {k: (v if type(v) in _SCALARS else jcopy(v)) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _SCALARS else jcopy(v) for v in value]
    return value
