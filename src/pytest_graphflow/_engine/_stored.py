"""The events of a lean step a durable store commits, in the form the store is given them
(issue 29).

On a store that commits each step's checkpoint with its events (``LegSpec.store_only``:
``invoke`` on SQLite or PostgreSQL, nobody else reading the events), the lean step commits
its step itself and goes on to the next (``LeanSteps.run_from``). The store gets the step's
events as :class:`~.._records._json.DumpedEvents`: what ``model_dump(mode="json")`` of each
built event gives, dict for dict and key for key. Built that way, a step made its events
twice (a model per event from :class:`~._results.LazyEvent`, then its dump); here the dumps
are written out at once for the four events of a plain step — ``node_start``, ``node_end``,
an ``edge_transition`` per target, ``checkpoint_saved`` — in the key order of the built
event's ``__dict__`` (the order its dump follows). What is not plain goes the long way: a
``node_end`` whose patch holds anything but strings, ints, booleans and ``None`` (a dump
converts the rest), and the ``run_end`` (once a run). ``tests/runtime/test_stored_events.py``
holds each dump to the long way's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic_core import to_jsonable_python

from .._records._events import NodeEnd, RunEnd
from .._records._json import DumpedEvents, jcopy
from ._lazy import _entry

__all__ = ["StepTimes", "stored_step_events"]

_PLAIN = (str, int, bool, type(None))
"""The types of a patch's values a dump gives back as they are (exactly these types)."""


class StepTimes:
    """The JSON form of the events' time (what a dump makes of a ``datetime``), the last one
    kept: a virtual clock gives a step's times, and the next step's, as one object
    (:func:`stored_step_events` reads and fills it inline)."""

    __slots__ = ("moment", "text")

    def __init__(self) -> None:
        self.moment: object = None
        self.text: Any = None


def _dumped(cls: type[Any], fields: dict[str, Any]) -> dict[str, Any]:
    """The long way: the event built from ``fields`` (as the recording builds it), dumped."""
    dumped: dict[str, Any] = _entry(cls, fields).build().model_dump(mode="json")
    return dumped


def stored_step_events(
    times: StepTimes, run_id: str, now: datetime, seq: int, step: int, node: str,
    task_id: str, patch: dict[str, Any] | None, started_at: datetime, finished_at: datetime,
    targets: Any, checkpoint_id: str | None, finished: bool, state: dict[str, Any] | None,
) -> DumpedEvents:
    """The dumped events of one committed lean step, numbered from ``seq`` and stamped
    ``now`` (the events :func:`~._lazy.lean_step_events` leaves unbuilt, built and dumped);
    ``state``: the run's state, when the step ended the run."""
    # The times' cache, looked at and filled inline (under a virtual clock the three are
    # one object; under a real one, a durable step's end is its events' time).
    if now is times.moment:
        time = times.text
    else:
        times.text = time = to_jsonable_python(now)
        times.moment = now
    # (``out += (event,)``, not ``append``: one call fewer an event)
    out = DumpedEvents()
    out += ({"node": node, "task_id": task_id, "type": "node_start", "attempt": 1,
             "time": time, "seq": seq, "run_id": run_id, "step": step},)
    plain = True
    if patch:
        for key in patch:  # (not values(): one call fewer)
            if type(patch[key]) not in _PLAIN:
                plain = False
                break
    if plain:
        out += ({"node": node, "task_id": task_id, "type": "node_end",
                 "patch": dict(patch) if patch else patch, "replayed": False,
                 "attempt": 1, "goto": None, "time": time, "seq": seq + 1,
                 "run_id": run_id, "step": step,
                 "started_at": time if started_at is now else to_jsonable_python(started_at),
                 "finished_at": time if finished_at is now
                 else to_jsonable_python(finished_at)},)
    else:
        out += (_dumped(NodeEnd, {
            "node": node, "task_id": task_id, "patch": jcopy(patch), "replayed": False,
            "attempt": 1, "started_at": started_at, "finished_at": finished_at, "goto": None,
            "seq": seq + 1, "run_id": run_id, "step": step, "time": now}),)
    seq += 2
    for target in targets:
        out += ({"node": node, "task_id": task_id, "type": "edge_transition",
                 "time": time, "seq": seq, "run_id": run_id, "step": step,
                 "source": node, "target": target},)
        seq += 1
    if checkpoint_id is not None:
        out += ({"node": None, "task_id": None, "type": "checkpoint_saved", "time": time,
                 "seq": seq, "run_id": run_id, "step": step,
                 "checkpoint_id": checkpoint_id},)
        seq += 1
    if finished:
        out += (_dumped(RunEnd, {"status": "completed", "state": jcopy(state), "seq": seq,
                                 "run_id": run_id, "step": step, "time": now}),)
    return out
