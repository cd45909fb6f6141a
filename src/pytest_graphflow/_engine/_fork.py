"""``GraphRuntime.afork``: a checkpoint copied into a new run, its arguments checked here.

A store's ``fork`` only stores: it clones the checkpoint, applies ``patch_state`` after
cloning and persists the clone. Whether the patch fits is decided here, where the state
schema is known: every key must be a state key of the checkpoint's graph and every value
must fit that key's type (a graph given, or one this runtime knows); without a graph, the
key must be one the checkpoint's state holds and the value of the kind it holds. A refused
fork raises ``InvalidArgument`` before the store is asked anything that writes, so the store
is unchanged whatever store it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .._graph._builder import CompiledGraph
from .._records._checks import check_optional_id
from .._records._json import NotJSONError, to_json_value
from .._stores._args import check_fork
from .._stores._claims import checked_patch
from ..errors import CheckpointNotFound, GraphExecutionError, InvalidArgument, TenantMismatch
from ._options import check_graph
from ._upgrade import state_adapters

if TYPE_CHECKING:
    from .._records._checkpoint import Checkpoint
    from ._legs import Legs

__all__ = ["fork_checkpoint"]


async def fork_checkpoint(
    legs: Legs, checkpoint_id: str, patch_state: Mapping[str, Any] | None,
    thread_id: str | None, graph: CompiledGraph | None, tenant: str | None,
) -> str:
    """Check the arguments of a fork, then ask the runtime's store to make it (``legs``: the
    runtime's, with its store and the graphs it knows); the new run id.

    Raises:
        InvalidArgument: a bad id, or a patch that does not fit the state (nothing is
            written).
        CheckpointNotFound: the store holds no ``checkpoint_id``.
        TenantMismatch: the checkpoint's run belongs to another tenant.
    """
    check_fork(checkpoint_id, patch_state, thread_id)
    check_optional_id(tenant, "tenant_id", "fork")
    if graph is not None:
        check_graph(graph)
    store = legs.host.store
    source = await store.get(checkpoint_id)
    if source is None:
        raise CheckpointNotFound(
            f"fork({checkpoint_id!r}): the store has no such checkpoint; pass the id of a "
            "saved checkpoint (see runtime.history(run_id))")
    if source.tenant_id != tenant:
        raise TenantMismatch(source.run_id, tenant, what="run")
    patch = None if patch_state is None else _checked(legs, source, patch_state, graph)
    return await store.fork(checkpoint_id, patch, thread_id=thread_id)


def _graph_of(legs: Legs, source: Checkpoint, graph: CompiledGraph | None
              ) -> CompiledGraph | None:
    if graph is not None:
        if graph.graph_id != source.graph_id:
            raise InvalidArgument(
                f"fork({source.id!r}, graph=...): the checkpoint is of graph "
                f"{source.graph_id!r}, not {graph.graph_id!r}; pass its own graph or none")
        return graph
    try:
        return legs.book.graphs.for_checkpoint(source)
    except GraphExecutionError:
        return None  # no graph known: the checkpoint's own state is the schema


def _checked(legs: Legs, source: Checkpoint, patch: Mapping[str, Any],
             graph: CompiledGraph | None) -> dict[str, Any]:
    """``patch`` in JSON form, each key a state key and each value of its type."""
    found = _graph_of(legs, source, graph)
    if found is None:
        return checked_patch(source.id, source.state, patch)
    fields = found.state_model.model_fields
    adapters = state_adapters(found.state_model)
    out: dict[str, Any] = {}
    for key, value in patch.items():
        if not isinstance(key, str) or key not in fields:
            raise InvalidArgument(
                f"fork({source.id!r}, patch_state=...): key {key!r} is not a state key of "
                f"graph {found.graph_id!r}; its keys are {sorted(fields)}")
        try:
            new = to_json_value(value)
        except NotJSONError as exc:
            raise InvalidArgument(f"fork({source.id!r}, patch_state=...): the value of "
                                  f"{key!r} is not JSON: {exc}; pass a value with a JSON "
                                  "form") from None
        try:
            valid = adapters[key].validate_python(new)
        except ValidationError as exc:
            first = exc.errors()[0]["msg"] if exc.errors() else str(exc)
            raise InvalidArgument(
                f"fork({source.id!r}, patch_state=...): {new!r:.80} does not fit state key "
                f"{key!r} of graph {found.graph_id!r} ({first}); pass a value of its "
                "type") from None
        out[key] = to_json_value(adapters[key].dump_python(valid, mode="json"))
    return out
