"""A history from what a durable store kept of a run (``graphflow export``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .._engine._upgrade import GraphContract
from .._graph._builder import CompiledGraph
from .._records._events import parse_event
from .._stores._protocol import CheckpointStore
from ..errors import CheckpointNotFound, InvalidArgument
from ._history import History

__all__ = ["export_history"]


async def export_history(
    store: CheckpointStore,
    run_id: str,
    *,
    seed: int | None = None,
    clock_start: datetime | None = None,
    graph: CompiledGraph | None = None,
    graph_ref: str | None = None,
) -> History:
    """The :class:`History` of ``run_id`` from a store that keeps events (SQLite, memory).

    The store knows the events, the checkpoints and the run's record, not how the runtime
    was set up: pass the ``seed`` (and the virtual ``clock_start``) the run used if it ran
    deterministically. Without ``clock_start`` the history is of a real-clock run and a replay
    compares everything but times. The state the run started from is its first checkpoint's
    (saved under the ``every_step`` policy); answers given at each resume are read from the
    checkpoints the resumed leg saved.

    Args:
        store: the store holding the run.
        run_id: the run.
        seed: the runtime's seed, if it had one.
        clock_start: the virtual clock's start, for a run on a virtual clock.
        graph: the graph the run ran under (same revision), to record its contract.
        graph_ref: ``"module:attr"`` of the graph, for ``--graphflow-replay``.

    Raises:
        CheckpointNotFound: the store has no checkpoint or event of ``run_id``.
        InvalidArgument: the store keeps no events.
        EventsCompacted: part of the run's events was compacted away.
    """
    events_of: Any = getattr(store, "events", None)
    if not callable(events_of):
        raise InvalidArgument(f"store {store!r} keeps no events (it has no events()); export "
                              "from a SQLiteCheckpointStore or an InMemoryCheckpointStore")
    raw = [dict(e) for e in await events_of(run_id)]
    checkpoints = await store.list(run_id)
    if not raw or not checkpoints:
        raise CheckpointNotFound(f"the store holds no events or no checkpoint of run "
                                 f"{run_id!r}; list its runs with `graphflow runs FILE`")
    events = [parse_event(e) for e in raw]
    first = checkpoints[0]
    initial = first.state if first.step == -1 else None
    by_id = {cp.id: cp for cp in checkpoints}
    resumes: list[dict[str, Any]] = []
    saved_in_leg: list[list[str]] = []
    for ev in events:
        kind = getattr(ev, "type", "")
        if kind == "run_start":
            saved_in_leg.append([])
        elif kind == "checkpoint_saved" and saved_in_leg:
            saved_in_leg[-1].append(ev.checkpoint_id)  # type: ignore[attr-defined]
    legs = [e for e in events if getattr(e, "type", "") == "run_start"]
    for leg, saved in zip(legs[1:], saved_in_leg[1:], strict=False):
        before = by_id.get(getattr(leg, "resumed_from", "") or "")
        keys = [i.key for i in before.interrupts] if before is not None else []
        answers: dict[str, Any] = {}
        for cid in saved:
            cp = by_id.get(cid)
            if cp is not None:
                answers.update({k: cp.answers[k] for k in keys if k in cp.answers})
        resumes.append(answers)
    contract = None
    if graph is not None and graph.revision == first.revision:
        contract = GraphContract.of(graph).as_dict()
    return History(
        graph_id=first.graph_id, revision=first.revision, graph_ref=graph_ref, graph=contract,
        run_id=run_id, thread_id=first.thread_id, seed=seed, clock_start=clock_start,
        checkpoint_policy=None, initial_state=initial, resumes=resumes,
        source=f"store {store!r}",
        events=raw, checkpoints=[cp.model_dump(mode="json") for cp in checkpoints],
    )
