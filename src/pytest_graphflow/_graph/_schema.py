"""Moving state between its JSON form and the schema's model, as cheaply as is safe.

A *plain* schema — every field a JSON-native type (``int``, ``float``, ``str``, ``bool``,
``None``, ``Any``, ``Literal``, unions, ``list``/``dict`` of those), no validators and no
constraints (``Annotated`` metadata other than reducers, ``Field(gt=...)``...) — is
handled field by field: a patch is validated key by key, and a node's input model is built from
a copy of the (already valid) state without validating it again. Any other schema (nested
models, datetimes, validators) is validated when a key is written: the model is rebuilt from
the state without running validators again, and each written key is assigned through the
schema's validator (its field validators and the model validators run), so a transforming
validator applies once per write, never again on a later superstep.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from .._records._fast import adopt, make
from .._records._json import jcopy
from ..errors import UpdateRejected
from ._reducers import is_reducer
from ._setorder import canonical, has_set

__all__ = ["StateCodec"]

_PLAIN_LEAVES: tuple[Any, ...] = (int, float, str, bool, type(None), Any)


_SCALAR_TYPES: tuple[Any, ...] = (int, float, str, bool, type(None))


def _scalar(tp: Any) -> bool:
    """Whether every value of ``tp`` is an immutable JSON scalar."""
    if tp in _SCALAR_TYPES or tp is None:
        return True
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _scalar(typing.get_args(tp)[0])
    if origin is typing.Literal:
        return True
    if origin in (typing.Union, types.UnionType):
        return all(_scalar(a) for a in typing.get_args(tp))
    return False


def _copier(tp: Any) -> Callable[[Any], Any] | None:
    """The cheapest correct deep copy of a valid value of ``tp`` (``None``: no copy)."""
    if _scalar(tp):
        return None
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _copier(typing.get_args(tp)[0])
    args = typing.get_args(tp)
    if origin is list and args and _scalar(args[0]):
        return list
    if origin is dict and len(args) == 2 and _scalar(args[1]):
        return dict
    return jcopy


def _passes(tp: Any) -> frozenset[type]:
    """The scalar types whose values the validator of ``tp`` gives back as they are (a value
    of another type may be converted or refused): ``int`` for ``int``, every JSON scalar for
    ``Any``, the union of the options of a union."""
    if tp is Any:
        return frozenset((int, float, str, bool, type(None)))
    if tp in (int, float, str, bool):
        return frozenset((tp,))
    if tp is None or tp is type(None):
        return frozenset((type(None),))
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _passes(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return frozenset().union(*(_passes(a) for a in typing.get_args(tp)))
    return frozenset()


def _item_passes(tp: Any) -> frozenset[type]:
    """For a list annotation, the scalar types of items its validator gives back as they
    are (see :func:`_passes`); empty for any other annotation."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _item_passes(typing.get_args(tp)[0])
    if tp is list:
        return _passes(Any)
    if origin is list:
        args = typing.get_args(tp)
        return _passes(args[0] if args else Any)
    return frozenset()


def _plain(tp: Any) -> bool:
    if tp in _PLAIN_LEAVES or tp is None:
        return True
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _plain(typing.get_args(tp)[0])
    if origin is typing.Literal:
        return all(isinstance(a, (int, str, bool, type(None))) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return all(_plain(a) for a in typing.get_args(tp))
    if origin is list:
        args = typing.get_args(tp)
        return not args or _plain(args[0])
    if origin is dict:
        args = typing.get_args(tp)
        return not args or (args[0] is str and _plain(args[1]))
    return False


@lru_cache(maxsize=512)
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def _shared_adapter(tp: Any) -> TypeAdapter[Any]:
    """One adapter per annotation (graphs built per test share theirs); an annotation that
    cannot be a cache key gets its own."""
    try:
        return _adapter(tp)
    except TypeError:  # unhashable
        return TypeAdapter(tp)


def _build(tp: Any, value: Any) -> Any:
    """``value`` (JSON form, valid for ``tp``) as a ``tp`` value, without re-running the
    validators of any model inside it."""
    if value is None or _plain(tp):
        return value
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _build(typing.get_args(tp)[0], value)
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(value, dict):
        return construct(tp, value)
    args = typing.get_args(tp)
    if origin is list and len(args) == 1 and isinstance(value, list):
        return [_build(args[0], v) for v in value]
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return {k: _build(args[1], v) for k, v in value.items()}
    return _adapter(tp).validate_python(value)


def construct(model: type[BaseModel], data: dict[str, Any]) -> BaseModel:
    """A ``model`` of valid JSON ``data`` built without running its validators again."""
    fields = {}
    for name, info in model.model_fields.items():
        if name in data:
            fields[name] = _build(info.annotation, data[name])
    return model.model_construct(**fields)


_UNSET = object()

_KEYED_CONFIG = frozenset({"title", "extra", "frozen", "validate_assignment", "json_schema_extra",
                           "protected_namespaces", "defer_build", "use_attribute_docstrings"})
"""Model config keys that change no validated value (a plain schema's ``extra`` is
``"ignore"`` or unset)."""


def _keyed_input(model: type[BaseModel]) -> bool:
    """Whether a plain ``model`` validates an input key by key as a whole validation does:
    no config that changes a value (``str_to_lower``, ``allow_inf_nan``...), no field read
    under an alias or with a discriminator, none left out of the dump (``exclude``); a
    plain schema has no ``Strict`` or other constraint (see :meth:`StateCodec.started`)."""
    if not set(model.model_config) <= _KEYED_CONFIG:
        return False
    return all(info.alias is None and info.validation_alias is None
               and info.discriminator is None and not info.exclude
               and getattr(info, "exclude_if", None) is None
               for info in model.model_fields.values())


class StateCodec:
    """Validation and copies of one state schema (internal)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        decorators = model.__pydantic_decorators__
        has_validators = bool(decorators.validators or decorators.field_validators
                              or decorators.model_validators or decorators.root_validators)
        config = model.model_config
        self.plain = (
            not has_validators
            and not config.get("strict")
            and config.get("extra") in (None, "ignore")
            and all(_plain(info.annotation) and all(is_reducer(m) for m in info.metadata)
                    for info in model.model_fields.values())
        )
        # Keys whose declared type converts JSON back (a set, a complex number, int keys...):
        # their values may be what JSON alone would not give back.
        self.converted: frozenset[str] = frozenset(
            name for name, info in model.model_fields.items() if not _plain(info.annotation))
        # Keys that may hold a set: their JSON lists are put in one order (see _setorder).
        self.set_keys: dict[str, Any] = {
            name: info.annotation for name, info in model.model_fields.items()
            if has_set(info.annotation)}
        # Frozen or extra-keeping models cannot take assignments: they are validated whole.
        self._whole = bool(config.get("frozen")) or config.get("extra") == "allow"
        # Keys whose written value is checked as the node writes it (a plain write, or a pure
        # reducer combining valid values); the others are checked after their reducer ran.
        self.checked_on_write: frozenset[str] = frozenset()
        self._every = set(model.model_fields)
        self._count = len(self._every)
        self._copiers: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
            (name, copier) for name, info in model.model_fields.items()
            if (copier := _copier(info.annotation)) is not None
        ) if self.plain else ()
        self.parts: tuple[type[BaseModel], tuple[tuple[str, Callable[[Any], Any]], ...], int,
                          set[str]] | None = (
            (model, self._copiers, self._count, self._every) if self.plain else None)
        """What :meth:`model_of` builds a whole plain state's model from (the lean step does
        it inline): the model, its copiers, its field count and names; ``None``: not plain."""
        # The scalar types each key's validator gives back unchanged: a plain write of one
        # is not validated again (``_merge.normalize_patch``).
        self.passes: dict[str, frozenset[type]] = {
            name: _passes(info.annotation) for name, info in model.model_fields.items()
        } if self.plain else {}
        # The same for the items of a list (a list of them is given back as an equal list).
        self.item_passes: dict[str, frozenset[type]] = {
            name: _item_passes(info.annotation) for name, info in model.model_fields.items()
        } if self.plain else {}
        # Each key's validator itself (TypeAdapter.validate_python only passes its options on).
        self._validators: dict[str, Callable[[Any], Any]] = (
            {name: _shared_adapter(info.annotation or Any).validator.validate_python
             for name, info in model.model_fields.items()}
            if self.plain else {}
        )

    def defaults(self) -> dict[str, Any] | None:
        """The state a run starts from with no input, in JSON form (a fresh copy each call),
        when it is the same every time: a plain schema whose fields all have default values
        (no factory), without post-init hooks, computed fields or serializers. ``None``
        otherwise (the caller validates the empty input itself)."""
        found = self.__dict__.get("_defaults", _UNSET)
        if found is _UNSET:
            model = self.model
            decorators = model.__pydantic_decorators__
            fixed = (self.plain and model.__pydantic_post_init__ is None
                     and not model.__pydantic_computed_fields__
                     and not decorators.field_serializers and not decorators.model_serializers
                     and all(not info.is_required() and info.default_factory is None
                             for info in model.model_fields.values()))
            found = self._defaults = self.dump(model.model_validate({})) if fixed else None
        if found is None:
            return None
        # A plain schema's state: each field's type says how deep a copy it needs.
        fields = dict(found)
        for name, copy in self._copiers:
            value = fields.get(name)
            if value is not None:
                fields[name] = copy(value)
        return fields

    def started(self, patch: dict[str, Any]) -> dict[str, Any] | None:
        """The state a new run starts from with the input ``patch`` (its JSON form, checked
        by ``state_from_input``): what ``dump(model_validated(patch))`` gives, built key by
        key when that is sure to be the same — fixed defaults (:meth:`defaults`), a schema
        whose config and fields change no value and read no alias, and scalar input values
        (a float finite: a whole model's JSON dump writes ``inf`` as ``null``). ``None``
        otherwise, and for a value the field refuses: the caller validates the input as a
        whole (its error names the key as it always did). A fresh copy each call."""
        base = self.defaults()
        if base is None or not patch:
            return base
        keyed = self.__dict__.get("_keyed", _UNSET)
        if keyed is _UNSET:
            keyed = self._keyed = _keyed_input(self.model)
        if not keyed:
            return None
        validators = self._validators
        for key, value in patch.items():
            kind = type(value)
            if kind is float:
                if value - value != 0.0:  # inf or nan (nan - nan is nan; inf - inf is nan)
                    return None
            elif kind is not int and kind is not str and kind is not bool and value is not None:
                return None
            try:
                base[key] = validators[key](value)
            except ValidationError:
                return None
        return base

    def model_of(self, state: dict[str, Any]) -> BaseModel:
        """A fresh model of a valid ``state`` (its own copy: mutating it changes nothing)."""
        if self.plain:
            # The state is valid, so each field's type says how deep a copy it needs.
            fields = dict(state)
            for name, copy in self._copiers:
                if name in fields:  # (``in`` and ``[]``: no call, a model a task)
                    value = fields[name]
                    if value is not None:
                        fields[name] = copy(value)
            if len(fields) == self._count:  # every field (a state is whole): no defaults
                return adopt(self.model, fields, self._every)
            return make(self.model, **fields)
        return self.rebuild(state)

    def rebuild(self, state: dict[str, Any]) -> BaseModel:
        """A fresh model of a valid ``state`` whose validators do not run again: they ran
        when each key was written (a transforming validator must not compound)."""
        if self._whole:
            return self.model.model_validate(jcopy(state))
        try:
            return construct(self.model, jcopy(state))
        except (ValidationError, TypeError, ValueError):
            return self.model.model_validate(jcopy(state))

    def canonical(self, key: str, value: Any) -> Any:
        """The JSON form ``value`` of ``key`` with its sets in one order (see _setorder)."""
        tp = self.set_keys.get(key)
        return value if tp is None else canonical(tp, value)

    def dump(self, model: BaseModel) -> dict[str, Any]:
        """``model``'s state in JSON form, its sets in one order whatever the process."""
        data = model.model_dump(mode="json")
        for key, tp in self.set_keys.items():
            if key in data:
                data[key] = canonical(tp, data[key])
        return data

    def check_value(self, node: str, key: str, value: Any) -> Any:
        """Validate one key's value (plain schemas only); returns the canonical value."""
        try:
            return self._validators[key](value)
        except ValidationError as exc:
            raise UpdateRejected(node, key, "the state schema rejected it: "
                                            f"{exc.errors()[0]['msg']}") from exc

    def validate(
        self,
        state: dict[str, Any],
        blame: Sequence[tuple[str, dict[str, Any] | None]] = (),
        *,
        touched: bool = True,
    ) -> tuple[dict[str, Any], BaseModel | None]:
        """Validate a merged state; return its canonical JSON form and, if built, a model.

        For a plain schema only the keys the patches wrote are checked (the rest was valid
        before) and no model is built.
        """
        if self.plain:
            if touched:
                on_write = self.checked_on_write
                for node, patch in blame:
                    if patch:
                        for key in patch:
                            if key not in on_write:
                                state[key] = self.check_value(node, key, state[key])
            return state, None
        # Each written key once (blamed on its last writer): a reducer's merged value is
        # validated once, however many patches of the batch wrote the key.
        written = {key: node for node, patch in blame if patch for key in patch}
        if not written and touched:
            return state, None  # nothing was written: the state is valid as it is
        if self._whole or not written:
            model = self.model_validated(state, blame)
            return self.dump(model), model
        # Only the written keys are validated (field and model validators run on the
        # assignment); the others were valid already and keep their value.
        model = self.rebuild(state)
        assign = self.model.__pydantic_validator__.validate_assignment
        for key, node in written.items():
            try:
                assign(model, key, jcopy(state[key]))
            except ValidationError as exc:
                raise UpdateRejected(node, key, "the state schema rejected it: "
                                                f"{exc.errors()[0]['msg']}") from exc
        return self.dump(model), model

    def model_validated(
        self,
        state: dict[str, Any],
        blame: Sequence[tuple[str, dict[str, Any] | None]] = (),
    ) -> BaseModel:
        """Validate ``state`` as a whole; return a fresh model (its own copy).

        Raises:
            UpdateRejected: naming the node whose patch wrote the offending key.
        """
        try:
            return self.model.model_validate(jcopy(state))
        except ValidationError as exc:
            first = exc.errors()[0]
            key = str(first["loc"][0]) if first["loc"] else "<state>"
            node = next((n for n, p in reversed(blame) if p and key in p), "<input>")
            raise UpdateRejected(node, key, f"the state schema rejected it: {first['msg']}") \
                from exc
