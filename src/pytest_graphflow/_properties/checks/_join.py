"""A join's arrivals survive a resume (part of C8): a run that fails with ``JoinStarved``
must not name as missing a source whose arrival its own log shows.

A join waits for every source (``g.edge([a, c], "d")``); the sources that arrived are part of
the run's position, saved in the checkpoint (``Checkpoint.arrivals``). A store or runtime
that loses them resumes into a run whose join never fires: it ends with ``JoinStarved`` naming
a source that did arrive, an ``edge_transition a -> d`` earlier in the log. Every other checker
passes such a run (each leg is well formed on its own), so this one reads the log as a whole.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from ..._graph._builder import END, CompiledGraph
from ..._records._events import (
    CheckpointSaved,
    EdgeTransition,
    ErrorEvent,
    EventBase,
    NodeStart,
    RunEnd,
)
from ._legs import Violation, split_legs

__all__ = ["check_join_arrivals"]

_STARVED = re.compile(r"join '(?P<join>[^']+)' waits for (?P<missing>\[[^\]]*\])")

_Arrivals = dict[str, dict[str, tuple[int, int]]]
"""``join target -> source -> (event index, leg number)`` of arrivals not yet consumed."""


def _starved(e: EventBase) -> tuple[str, list[str]] | None:
    """The join and its missing sources, if ``e`` is a run's ``JoinStarved`` error."""
    if type(e) is not ErrorEvent or e.error_type != "JoinStarved":
        return None
    m = _STARVED.search(e.message)
    if m is None:
        return None
    try:
        missing = ast.literal_eval(m["missing"])
    except (ValueError, SyntaxError):
        return None
    return m["join"], [str(s) for s in missing]


def _copy(arrivals: _Arrivals) -> _Arrivals:
    return {t: dict(s) for t, s in arrivals.items()}


def check_join_arrivals(
    events: Sequence[EventBase], *, graph: CompiledGraph | None = None
) -> list[Violation]:
    """A ``JoinStarved`` failure names no source whose arrival at the join the log shows;
    with ``graph``, a completed run leaves no join with arrivals it never ran for (a store
    that lost every arrival lets the run complete without the join).

    An arrival is an ``edge_transition source -> join``; the join's ``node_start`` consumes
    the arrivals before it. A resumed leg starts from the arrivals as they were when the
    checkpoint it names in ``resumed_from`` was saved (time travel to an earlier checkpoint
    legitimately forgets later ones; a leg resumed from a checkpoint outside the list starts
    with none known). Reported as C8 when the arrival was in an earlier leg (the resume lost
    it: does the store keep ``Checkpoint.arrivals``?), as C3 within one leg.
    """
    out: list[Violation] = []
    joins = set() if graph is None else {j.target for j in graph.joins if j.target != END}
    pending: _Arrivals = {}
    at_save: dict[str, _Arrivals] = {}
    for n, leg in enumerate(split_legs(events)):
        rs = leg.run_start
        if n > 0 and rs is not None:
            resumed = rs.resumed_from
            pending = _copy(at_save[resumed]) if resumed in at_save else {}
        for i, e in leg.indexed():
            if type(e) is EdgeTransition:
                pending.setdefault(e.target, {})[e.source] = (i, n)
            elif type(e) is NodeStart and e.attempt == 1 and e.node is not None:
                pending.pop(e.node, None)
            elif type(e) is CheckpointSaved:
                at_save[e.checkpoint_id] = _copy(pending)
            elif type(e) is RunEnd and e.status == "completed":
                for join in sorted(joins & {t for t, s in pending.items() if s}):
                    arrived = pending[join]
                    lost = any(m < n for _, m in arrived.values())
                    shown = ", ".join(f"{s} at #{j}" for s, (j, _) in arrived.items())
                    out.append(Violation(
                        "C8" if lost else "C3", i, f"the run completed, but join {join!r} never "
                        f"ran after its sources arrived ({shown})" + (
                            "; an arrival was in an earlier leg: did the resume lose the "
                            "join's arrivals (does the store keep Checkpoint.arrivals?)"
                            if lost else "")))
            elif type(e) is ErrorEvent and (starved := _starved(e)) is not None:
                join, missing = starved
                for source in missing:
                    seen = pending.get(join, {}).get(source)
                    if seen is None:
                        continue
                    j, m = seen
                    what = (f"the run failed with JoinStarved: join {join!r} waits for "
                            f"{source!r}, but {source} arrived at #{j} (edge_transition "
                            f"{source} -> {join})")
                    if m < n:
                        out.append(Violation("C8", i, f"{what} in leg {m + 1}, before the "
                                             f"checkpoint leg {n + 1} resumed from "
                                             f"({rs.resumed_from if rs else '?'}): the resume "
                                             "lost the join's arrivals (does the store keep "
                                             "Checkpoint.arrivals?)"))
                    else:
                        out.append(Violation("C3", i, f"{what} in this leg, and {join} has not "
                                             "started since: the runtime lost the arrival"))
    return out
