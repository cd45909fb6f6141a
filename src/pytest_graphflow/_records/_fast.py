"""Building pydantic models on the hot path without validation (internal).

``make(cls, **fields)`` does what ``cls.model_construct(**fields)`` does for our own models —
defaults filled, no validation — at a fraction of the cost: the defaults are computed once per
class. Only for values the runtime already knows to be valid.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["make"]

ModelT = TypeVar("ModelT", bound=BaseModel)

_SPECS: dict[type[Any], tuple[dict[str, Any], tuple[tuple[str, Any], ...], int, set[str]]] = {}
_new = object.__new__
_set = object.__setattr__
# BaseModel's own slot descriptors, set directly: what ``object.__setattr__`` finds for these
# names on every model, without looking them up through the class each time (a third of the
# cost of an adoption).
_slots = vars(BaseModel)
_set_dict = _slots["__dict__"].__set__
_set_fields_set = _slots["__pydantic_fields_set__"].__set__
_set_extra = _slots["__pydantic_extra__"].__set__
_set_private = _slots["__pydantic_private__"].__set__


def _spec(
    cls: type[BaseModel],
) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...], int, set[str]]:
    static: dict[str, Any] = {}
    factories: list[tuple[str, Any]] = []
    for name, info in cls.model_fields.items():
        if info.default_factory is not None:
            factories.append((name, info.default_factory))
        elif not info.is_required():
            static[name] = info.default
    spec = (static, tuple(factories), len(cls.model_fields), set(cls.model_fields))
    _SPECS[cls] = spec
    return spec


def template(cls: type[BaseModel]) -> tuple[dict[str, Any], set[str]]:
    """A dict of ``cls``'s static defaults and the set of all its field names (internal).

    For models without default factories: ``data = template.copy(); data.update(...)`` plus
    :func:`adopt` builds an instance with no per-field work.
    """
    static, factories, _count, every = _SPECS.get(cls) or _spec(cls)
    if factories:
        raise TypeError(f"{cls.__name__} has default factories; use make()")
    return static, every


def adopt(cls: type[ModelT], data: dict[str, Any], fields_set: set[str]) -> ModelT:
    """An instance of ``cls`` whose ``__dict__`` is ``data`` (complete and trusted)."""
    obj = _new(cls)
    _set_dict(obj, data)
    _set_fields_set(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def plain_tasks(model: type[ModelT], fields_set: set[str],
                pairs: Iterable[tuple[str, str]]) -> list[ModelT]:
    """Tasks (``model``: ``TaskRecord``) of ``(task_id, node)`` pairs, each carrying nothing
    more (no item, failure or expansion checkpoint), as ``make`` builds them, without a call
    a task; ``fields_set``: the model's field names, ``template(model)[1]`` (internal)."""
    out: list[ModelT] = []
    for task_id, node in pairs:
        task = _new(model)
        _set_dict(task, {"task_id": task_id, "node": node, "item": None, "has_item": False,
                         "checkpoint_id_before": None, "failure": None})
        _set_fields_set(task, fields_set)
        _set_extra(task, None)
        _set_private(task, None)
        out += (task,)  # not out.append: one call fewer
    return out


def every_field(cls: type[BaseModel]) -> tuple[int, set[str]]:
    """The number of ``cls``'s fields and the shared set of their names: a ``dict`` of that
    many of its fields, in any order, is the ``__dict__`` :func:`make` gives an instance
    built from all of them (internal)."""
    _static, _factories, count, every = _SPECS.get(cls) or _spec(cls)
    return count, every


def make(cls: type[ModelT], **fields: Any) -> ModelT:
    """An instance of ``cls`` from trusted ``fields`` (no validation)."""
    static, factories, count, every = _SPECS.get(cls) or _spec(cls)
    if len(fields) == count:
        # Every field given: the kwargs dict is ours already, and the fields-set is the
        # shared set of all names (assigning a field can only add a name it already has).
        # What adopt() does, inline (one call fewer a model).
        obj = _new(cls)
        _set_dict(obj, fields)
        _set_fields_set(obj, every)
        _set_extra(obj, None)
        _set_private(obj, None)
        return obj
    data = dict(static)
    for name, factory in factories:
        if name not in fields:
            data[name] = factory()
    data.update(fields)
    return adopt(cls, data, set(fields))
