"""Which of the runtime's invariants (SPEC §3) a LangGraph trace keeps, and a checker for them.

Hold: **C1** (one ``run_start`` first, one ``run_end`` last per leg, unless the saver raised),
**C2** (each task: ``node_start``, then one of ``node_end``/``interrupt``/``error``), **C3**
(an edge comes after its source's result and before its target starts; the entry tasks, which
LangGraph's hidden ``__start__`` task triggers, count as reached from START), **C8** (a later
leg names, in ``resumed_from``, the newest checkpoint of the thread, which is the one LangGraph
continues from) and **C10** (``seq`` strictly increases, ``time`` never decreases).

Do not hold, by LangGraph's design: **C4** (LangGraph reports a step's results as tasks finish,
so a step's events interleave, in the seeded completion order), **C5** (an interrupted or
failed step saves its finished tasks' writes with ``put_writes``, not a new checkpoint, and
with ``durability="async"`` a checkpoint may be saved while the next step runs), **C6** and
**C7** (a rejected save surfaces where LangGraph awaits it, which with ``"async"`` durability is
a step later), **C9** (LangGraph has no effect classes: a resumed step re-runs its interrupted
task and keeps the writes of the tasks that finished, whatever they did).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._properties.checks._checks import (
    Violation,
    check_c1,
    check_c2,
    check_c3,
    check_c8,
    check_c10,
    normalise_events,
    split_legs,
)
from .._records._events import EventBase, NodeStart

__all__ = ["HOLDING", "check_invariants"]

HOLDING = ("C1", "C2", "C3", "C8", "C10")
"""The invariants a LangGraph trace keeps (see the module docstring for the others)."""


def _entry_at_zero(events: list[EventBase]) -> list[EventBase]:
    """Renumber steps so each fresh leg's entry step is 0 (C3's START rule); a resumed leg
    keeps the offset of the leg it continues."""
    out: list[EventBase] = []
    offset = 0
    for leg in split_legs(events):
        rs = leg.run_start
        first = next((e.step for e in leg.events if isinstance(e, NodeStart)), None)
        if rs is not None and rs.resumed_from is None and first is not None:
            offset = first
        out.extend(e.model_copy(update={"step": e.step - offset}) for e in leg.events)
    return out


def check_invariants(events: Iterable[Any], *, stream_raised: bool = False) -> list[Violation]:
    """Check a LangGraph trace's events (one leg or every leg of a thread, in order) against
    the invariants it keeps (:data:`HOLDING`).

    Args:
        events: ``trace.events`` or ``harness.events`` (models, wire dicts or JSON lines).
        stream_raised: the last leg raised (a rejected save, a crash), so it may lack
            ``run_end``.

    Returns:
        the violations, sorted by event index (empty when every rule holds).
    """
    evs = normalise_events(events)
    out = check_c1(evs, stream_raised=stream_raised)
    out += check_c2(evs)
    out += check_c3(_entry_at_zero(evs))
    out += check_c8(evs)
    out += check_c10(evs)
    return sorted(out, key=lambda v: (v.index is None, v.index or 0, v.rule))
