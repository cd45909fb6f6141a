"""Checkers for what survives a halt: C5 (checkpoint before events), C6 (rejected saves),
C7 (edge errors and expansions), C8 (resume point), C9 (replayed effects), C10 (numbering).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from ..._graph._builder import REPLAYED_EFFECTS, CompiledGraph
from ..._records._events import (
    CheckpointSaved,
    EdgeTransition,
    EventBase,
    NodeEnd,
    NodeStart,
    RunStart,
)
from ._legs import Violation, halting, split_legs

__all__ = ["check_c5", "check_c6", "check_c7", "check_c8", "check_c9", "check_c10"]


# --------------------------------------------------------------------------- C5, C6


def _save_outcomes(store_log: Iterable[Any]) -> dict[str, list[str]]:
    """``checkpoint id -> outcomes of its saves`` from a ``FaultyStore`` call log."""
    out: dict[str, list[str]] = {}
    for call in store_log:
        if getattr(call, "op", None) != "save":
            continue
        cid = str(getattr(call, "args", "")).split(" of run", 1)[0]
        out.setdefault(cid, []).append(str(getattr(call, "outcome", "")))
    return out


def check_c5(
    events: Sequence[EventBase], *, store_log: Iterable[Any] | None = None
) -> list[Violation]:
    """C5 (from the events, and the store's call log if given).

    A leg that halts (``run_end`` status ``interrupted``/``failed``/``cancelled``) ends with the
    halting events, then the ``checkpoint_saved`` of the checkpoint to resume from, then
    ``run_end``; with ``store_log``, every ``checkpoint_saved`` names a save that succeeded.
    Whether the save *returned before* the halting event was yielded needs the interleaving:
    see :func:`pytest_graphflow.invariants.check_recording`.
    """
    out: list[Violation] = []
    for leg in split_legs(events):
        end = leg.run_end
        if end is None or end.status == "completed":
            continue
        evs = leg.events
        if len(evs) < 2 or type(evs[-2]) is not CheckpointSaved:
            out.append(Violation("C5", leg.end - 1, f"run_end({end.status}) is not directly "
                                 "preceded by the checkpoint_saved of the checkpoint to resume "
                                 "from"))
            continue
        halts = [i for i, e in leg.indexed() if e.step == end.step and halting(e)]
        for i in halts:
            if i > leg.end - 2:
                out.append(Violation("C5", i, "a halting event comes after its checkpoint_saved"))
    if store_log is not None:
        saves = _save_outcomes(store_log)
        for i, e in enumerate(events):
            if type(e) is CheckpointSaved and "ok" not in saves.get(e.checkpoint_id, []):
                got = saves.get(e.checkpoint_id)
                out.append(Violation("C5", i, f"checkpoint_saved {e.checkpoint_id}, but the store "
                                     + ("never saw its save" if not got else
                                        f"did not save it (outcomes: {got})")))
    return out


def check_c6(
    events: Sequence[EventBase], *, store_log: Iterable[Any], stream_raised: bool
) -> list[Violation]:
    """C6: a save the store rejected ends the run, and the stream raises.

    No ``checkpoint_saved`` names a rejected checkpoint, the stream raised, and the last leg
    has no ``run_end``.
    """
    out: list[Violation] = []
    saves = _save_outcomes(store_log)
    rejected = [cid for cid, oc in saves.items()
                if any(o in ("rejected", "failed") for o in oc) and "ok" not in oc]
    if not rejected:
        return out
    for i, e in enumerate(events):
        if type(e) is CheckpointSaved and e.checkpoint_id in rejected:
            out.append(Violation("C6", i, f"checkpoint_saved {e.checkpoint_id}, whose save the "
                                 "store rejected"))
    if not stream_raised:
        out.append(Violation("C6", None, f"the store rejected the save of {rejected[0]}, but "
                             "the stream did not raise"))
    legs = split_legs(events)
    if legs and legs[-1].run_end is not None:
        out.append(Violation("C6", legs[-1].end - 1, f"run_end after the store rejected the save "
                             f"of {rejected[0]}"))
    return out


# --------------------------------------------------------------------------- C7, C8


def check_c7(events: Sequence[EventBase], *, graph: CompiledGraph) -> list[Violation]:
    """C7 (expansions): a step whose node expanded saves a checkpoint before the expansion runs.

    With a checkpoint policy that saves per step this is the extra "before" checkpoint; in
    every policy, at least one ``checkpoint_saved`` precedes the expanded tasks' batch.
    """
    out: list[Violation] = []
    for leg in split_legs(events):
        ends: dict[str, NodeEnd] = {}
        for i, e in leg.indexed():
            if type(e) is NodeEnd and e.task_id:
                ends[e.task_id] = e
            if type(e) is not EdgeTransition or e.source not in graph.nodes:
                continue
            spec = graph.nodes[e.source]
            end = ends.get(e.task_id or "")
            if end is None or end.goto is not None or e.target not in spec.destinations:
                continue
            static = set(graph.edges.get(e.source, ()))
            for b in graph.branches.get(e.source, ()):
                static.update(b.targets)
            if e.target in static:
                continue
            later = [ev for _, ev in leg.indexed() if ev.step == e.step
                     and type(ev) is CheckpointSaved]
            nxt = [j for j, ev in leg.indexed() if j > i and type(ev) is NodeStart
                   and ev.node == e.target]
            if nxt and not later:
                out.append(Violation("C7", i, f"{e.source} expanded into {e.target}, but no "
                                     "checkpoint was saved before the expansion's tasks ran"))
    return out


def check_c8(events: Sequence[EventBase], *, resumed_by_run_id: bool = True) -> list[Violation]:
    """C8: a resumed leg continues from the last checkpoint saved (resume by run id).

    Each leg after the first must name, in ``run_start.resumed_from``, the last checkpoint the
    earlier legs saved (with ``resumed_by_run_id=False``: any checkpoint they saved), and keep
    the run id.
    """
    out: list[Violation] = []
    saved: list[str] = []
    run_id: str | None = None
    for n, leg in enumerate(split_legs(events)):
        rs = leg.run_start
        if n > 0 and rs is not None:
            if rs.run_id != run_id:
                out.append(Violation("C8", leg.start, f"leg resumes run {rs.run_id}, not "
                                     f"{run_id}"))
            if rs.resumed_from is None:
                out.append(Violation("C8", leg.start, "a later leg of the run is not a resume "
                                     "(resumed_from is None)"))
            elif resumed_by_run_id and saved and rs.resumed_from != saved[-1]:
                out.append(Violation("C8", leg.start, f"resumed from {rs.resumed_from}, but the "
                                     f"last checkpoint saved was {saved[-1]}"))
            elif not resumed_by_run_id and rs.resumed_from not in saved:
                out.append(Violation("C8", leg.start, f"resumed from {rs.resumed_from}, which no "
                                     "earlier leg saved"))
        if rs is not None and run_id is None:
            run_id = rs.run_id
        saved += [e.checkpoint_id for e in leg.events if type(e) is CheckpointSaved]
    return out


# --------------------------------------------------------------------------- C9


def check_c9(events: Sequence[EventBase], *, graph: CompiledGraph | None = None) -> list[Violation]:
    """C9: what a resume re-runs and what it replays.

    After a leg that halted by an interrupt or a failure, in the batch it resumes: a completed
    task of a ``write``/``external``/``human`` node is replayed (``replayed=True``, same patch);
    of a ``pure``/``read`` node, re-run (needs ``graph`` to know effect classes); the halting
    tasks re-run. After a timeout or a cancellation every completed task is replayed. A
    replayed ``node_end`` anywhere else is a violation, and so is a replayed patch that differs
    from the recorded one.
    """
    out: list[Violation] = []
    legs = split_legs(events)
    for prev, leg in itertools.pairwise(legs):
        end = prev.run_end
        rs = leg.run_start
        if end is None or rs is None or end.status == "completed":
            continue
        keep_all = end.status == "cancelled" or end.error_type == "RunTimedOut"
        step = end.step
        done = {e.task_id: e for e in prev.events
                if type(e) is NodeEnd and e.step == step and e.task_id}
        halted = {e.task_id for e in prev.events
                  if e.step == step and e.task_id and halting(e)}
        for i, e in leg.indexed():
            if type(e) is not NodeEnd or e.task_id is None:
                continue
            if e.step != step:
                if e.replayed:
                    out.append(Violation("C9", i, f"{e.node} (task {e.task_id}) replayed in step "
                                         f"{e.step}, not the resumed batch (step {step})"))
                continue
            orig = done.get(e.task_id)
            if orig is None:
                if e.replayed:
                    what = "halted" if e.task_id in halted else "did not complete"
                    out.append(Violation("C9", i, f"{e.node} (task {e.task_id}) replayed, but "
                                         f"it {what} before the resume"))
                continue
            effect = None if graph is None or e.node not in graph.nodes else \
                graph.nodes[e.node].effect
            should = keep_all or (effect in REPLAYED_EFFECTS if effect else None)
            if should is True and not e.replayed:
                out.append(Violation("C9", i, f"{e.node} ({effect or 'kept'}; task {e.task_id}) "
                                     "completed before the resume but re-ran instead of replaying"))
            elif should is False and e.replayed:
                out.append(Violation("C9", i, f"{e.node} ({effect}; task {e.task_id}) was "
                                     "replayed; pure/read nodes re-run on resume"))
            if e.replayed and e.patch != orig.patch:
                out.append(Violation("C9", i, f"{e.node} (task {e.task_id}) replayed patch "
                                     f"{e.patch!r}, but it recorded {orig.patch!r}"))
    return out


# --------------------------------------------------------------------------- C10


def check_c10(events: Sequence[EventBase]) -> list[Violation]:
    """C10: ``seq`` strictly increases and ``time`` never decreases, across resumed legs too
    (when a leg resumes from the previous leg's last checkpoint)."""
    out: list[Violation] = []
    prev: EventBase | None = None
    last_cp: str | None = None
    for i, e in enumerate(events):
        if type(e) is RunStart and prev is not None and e.resumed_from != last_cp:
            prev = None  # time travel: the log forks here
        if prev is not None:
            if e.seq <= prev.seq:
                out.append(Violation("C10", i, f"seq {e.seq} after seq {prev.seq}"))
            if e.time < prev.time:
                out.append(Violation("C10", i, f"time {e.time.isoformat()} after "
                                     f"{prev.time.isoformat()}"))
        elif type(e) is RunStart and e.resumed_from is None and e.seq != 0:
            out.append(Violation("C10", i, f"a run's first seq is {e.seq}, not 0"))
        if type(e) is CheckpointSaved:
            last_cp = e.checkpoint_id
        prev = e
    return out


