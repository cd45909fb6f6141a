"""Applying patches to state: reducers, conflicts, JSON form and schema validation."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from .._graph._builder import CompiledGraph
from .._records._json import NotJSONError, jcopy, lossy, to_json_value
from ..errors import ConflictingWrites, UndeclaredWrite, UnknownKey, UpdateRejected

__all__ = ["merge_patches", "normalize_patch", "validate_state"]


def normalize_patch(graph: CompiledGraph, node: str, patch: Any) -> dict[str, Any] | None:
    """Check a node's patch and return it in JSON form (a fresh structure).

    Raises:
        UnknownKey, UndeclaredWrite, UpdateRejected: naming the node and the key.
    """
    if patch is None:
        return None
    if type(patch) is dict:
        pass  # the common case, without an isinstance check against the Mapping ABC
    elif isinstance(patch, BaseModel):
        patch = {k: getattr(patch, k) for k in patch.model_fields_set}
    elif not isinstance(patch, Mapping):
        raise UpdateRejected(node, "<patch>", f"a node returns None, a dict, Command or Expand; "
                                              f"got {type(patch).__name__}")
    writes = graph.nodes[node].writes
    keys = graph.keys
    codec = graph.codec
    check = codec.check_value if codec.plain else None
    checked, passes = codec.checked_on_write, codec.passes
    out: dict[str, Any] = {}
    for key in patch:  # (no items() call: a batch normalizes a patch a task)
        value = patch[key]
        if key not in keys:
            raise UnknownKey(node, key, sorted(keys))
        if writes is not None and key not in writes:
            raise UndeclaredWrite(node, key, sorted(writes))
        kind = type(value)
        if kind is int or kind is bool or value is None or (kind is str and value.isascii()):
            # A JSON scalar is its own JSON form (no set to order); one the key's validator
            # gives back as it is needs no validation either.
            if check is not None and key in checked and kind not in passes[key]:
                value = check(node, key, value)
            out[key] = value
            continue
        if kind is list:  # a list of JSON scalars: copied, checked only if it must be
            fresh = _scalar_list(value, codec.item_passes.get(key, _NONE) if check else _NONE)
            if fresh is not None:
                value, passed = fresh
                if key in codec.set_keys:
                    value = codec.canonical(key, value)
                if check is not None and key in checked and not passed:
                    value = check(node, key, value)
                out[key] = value
                continue
        try:
            value = codec.canonical(key, to_json_value(value, exact=key not in codec.converted))
        except NotJSONError as exc:
            raise UpdateRejected(node, key, f"the value has no JSON form ({exc}); state values "
                                            "must round-trip through JSON") from None
        if check is not None and key in checked:
            value = check(node, key, value)
        out[key] = value
    return out


_NONE: frozenset[type] = frozenset()


def _scalar_list(value: list[Any], passes: frozenset[type]) -> tuple[list[Any], bool] | None:
    """A copy of ``value`` if every item is a JSON scalar that is its own JSON form (an
    int, a bool, ``None``, an ASCII string), and whether every item's type is in
    ``passes``; ``None`` if an item is anything else (``to_json_value`` converts it)."""
    passed = True
    for item in value:
        kind = type(item)
        if not (kind is int or kind is bool or item is None
                or (kind is str and item.isascii())):
            return None
        if passed and kind not in passes:
            passed = False
    return list(value), passed


# (reducer, type of its result) whose next fold may extend the result in place: ``a + b`` of
# two lists and ``a | b`` of two dicts build a new value, equal to extending or updating it.
_FOLDS_IN_PLACE: dict[tuple[Any, type], type] = {
    (operator.add, list): list, (operator.concat, list): list, (operator.or_, dict): dict,
}


def merge_patches(
    graph: CompiledGraph,
    state: dict[str, Any],
    patches: Sequence[tuple[str, dict[str, Any] | None]],
    *,
    parallel: bool,
) -> dict[str, Any]:
    """Apply ``patches`` (in the order given) to ``state``; return the new state dict.

    ``state`` is not modified. In a parallel batch, a key without a reducer written by two
    patches is a :class:`ConflictingWrites`.
    """
    reducers = graph.reducers
    if parallel:
        writers: dict[str, list[str]] = {}
        for node, patch in patches:
            if patch:
                for key in patch:
                    if key not in reducers:
                        writers.setdefault(key, []).append(node)
        for key, nodes in writers.items():
            if len(nodes) > 1:
                raise ConflictingWrites(key, nodes)
    new = dict(state)
    # Keys whose value in ``new`` is a list or dict this call built (the result of a pure
    # ``add``/``concat``/``or_``): the next write to the key extends it in place, which gives
    # the same value as the reducer without copying what came before (a batch of N writes to
    # one list costs O(N), not O(N²)).
    owned: dict[str, type] = {}
    # (Membership tests and in-place operators instead of method calls: a batch's patches
    # pass through here one by one, a wide batch's thousands of them.)
    for node, patch in patches:
        if not patch:
            continue
        for key in patch:
            value = patch[key]
            if key not in reducers:
                new[key] = value
                if owned:
                    owned.pop(key, None)
                continue
            if key in owned:
                kind = owned[key]
                if type(value) is kind:
                    if kind is list:
                        new[key] += value  # extends the list this call built, in place
                    else:
                        new[key] |= value  # updates the dict this call built, in place
                    continue
            reducer = reducers[key]
            pure = reducer.pure
            try:
                if pure:  # cannot mutate its arguments: no defensive copies
                    result = reducer.fn(new.get(key), value)
                else:
                    result = reducer.fn(jcopy(new.get(key)), jcopy(value))
            except Exception as exc:
                raise UpdateRejected(
                    node, key, f"its reducer raised {type(exc).__name__}: {exc}"
                ) from exc
            if isinstance(result, set | frozenset):
                raise UpdateRejected(node, key, f"its reducer returned {lossy(result)}")
            if pure:
                new[key] = result
                folds = _FOLDS_IN_PLACE.get((reducer.fn, type(result)))
                if folds is not None:
                    owned[key] = folds
                continue
            try:
                new[key] = graph.codec.canonical(
                    key, to_json_value(result, exact=key not in graph.codec.converted))
            except NotJSONError as exc:
                raise UpdateRejected(node, key, f"its reducer returned a non-JSON value "
                                                f"({exc})") from None
    return new


def validate_state(
    graph: CompiledGraph,
    state: dict[str, Any],
    blame: Sequence[tuple[str, dict[str, Any] | None]] = (),
) -> BaseModel:
    """Validate ``state`` against the schema; return a fresh model (its own copy).

    Raises:
        UpdateRejected: naming the node whose patch wrote the offending key.
    """
    return graph.codec.model_validated(state, blame)
