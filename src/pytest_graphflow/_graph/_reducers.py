"""Finding each state key's reducer in its field's ``Annotated`` metadata.

Two spellings declare one: ``Reducer(fn)``, and a bare two-argument callable — the LangGraph
convention, ``Annotated[list[str], operator.add]`` — which is taken as ``Reducer(fn)``.
pydantic's own metadata (validators, ``Field``, constraints, anything with a pydantic schema
hook) and classes are not reducers. Metadata that is callable but cannot take two arguments,
or a second reducer on one field, is refused: a write is never dropped silently.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel

from ..errors import InvalidArgument
from ._primitives import Reducer

__all__ = ["is_reducer", "reducers_of"]

_FOREIGN_MODULES = ("pydantic", "annotated_types", "typing", "typing_extensions", "warnings")


def _foreign(meta: Any) -> bool:
    """Whether ``meta`` is metadata pydantic (or typing) acts on itself: never a reducer."""
    if isinstance(meta, type):
        return True
    kind = type(meta)
    if hasattr(kind, "__get_pydantic_core_schema__") or hasattr(
            kind, "__get_pydantic_json_schema__"):
        return True
    return kind.__module__.split(".")[0] in _FOREIGN_MODULES


def is_reducer(meta: Any) -> bool:
    """Whether ``meta``, an entry of a field's ``Annotated`` metadata, declares its reducer
    (``Reducer(fn)`` or a bare callable that is not pydantic's own metadata)."""
    return isinstance(meta, Reducer) or (callable(meta) and not _foreign(meta))


def _takes_two(fn: Any) -> tuple[bool, str]:
    """Whether ``fn(current, update)`` binds; and its signature, for the error."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature (max, min): trust it
        return True, "(?)"
    try:
        sig.bind(None, None)
    except TypeError:
        return False, str(sig)
    return True, str(sig)


def reducers_of(model: type[BaseModel], where: str) -> dict[str, Reducer]:
    """Each key of ``model`` that has a reducer, and its reducer.

    Args:
        model: the state model.
        where: the call that was given it (``"Graph('g', state=S)"``), for errors.

    Raises:
        InvalidArgument: callable metadata that cannot be a reducer, or two reducers on one
            field, naming the field and ``Reducer(...)``.
    """
    found: dict[str, Reducer] = {}
    for name, info in model.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, Reducer):
                reducer = meta
            elif is_reducer(meta):
                ok, sig = _takes_two(meta)
                if not ok:
                    raise InvalidArgument(
                        f"{where}: field {name!r} of {model.__name__} has {meta!r} in its "
                        f"Annotated metadata, a callable with signature {sig} that cannot be "
                        "a reducer, which is called as fn(current, update); pass a "
                        "two-argument function, as Reducer(fn) or bare (Annotated[list[str], "
                        "operator.add]), or remove it")
                reducer = Reducer(meta)
            else:
                continue
            if name in found:
                raise InvalidArgument(
                    f"{where}: field {name!r} of {model.__name__} has two reducers in its "
                    f"Annotated metadata ({found[name].fn!r} and {reducer.fn!r}); keep one "
                    "Reducer(...) (or one bare two-argument function)")
            found[name] = reducer
    return found
