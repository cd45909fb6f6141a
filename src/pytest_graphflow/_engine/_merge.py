"""Applying patches to state: reducers, conflicts, JSON form and schema validation."""

from __future__ import annotations

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
    spec = graph.nodes[node]
    keys = graph.keys
    codec = graph.codec
    check = codec.check_value if codec.plain else None
    out: dict[str, Any] = {}
    for key, value in patch.items():
        if key not in keys:
            raise UnknownKey(node, key, sorted(keys))
        if spec.writes is not None and key not in spec.writes:
            raise UndeclaredWrite(node, key, sorted(spec.writes))
        try:
            value = codec.canonical(key, to_json_value(value, exact=key not in codec.converted))
        except NotJSONError as exc:
            raise UpdateRejected(node, key, f"the value has no JSON form ({exc}); state values "
                                            "must round-trip through JSON") from None
        if check is not None and key in codec.checked_on_write:
            value = check(node, key, value)
        out[key] = value
    return out


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
    for node, patch in patches:
        if not patch:
            continue
        for key, value in patch.items():
            reducer = reducers.get(key)
            if reducer is None:
                new[key] = value
                continue
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
