"""Checkers for the event invariants C1–C10 (SPEC §3) over an event list.

Each ``check_cN`` takes the events of one run — one leg, or several legs of the same run in
order (a run paused and resumed) — and returns :class:`Violation` values naming the rule, the
index of the offending event in the list, and what is wrong. They never raise on bad input:
a malformed stream is what they are for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..._graph._builder import CompiledGraph
from ..._records._events import EventBase
from ._deadline import check_deadlines
from ._durable import check_c5, check_c6, check_c7, check_c8, check_c9, check_c10
from ._join import check_join_arrivals
from ._legs import _SHARED, Leg, Violation, normalise_events, share_legs, short, split_legs
from ._order import check_c1, check_c2, check_c3, check_c4
from ._tools import check_tool_replays

__all__ = [
    "Leg",
    "Violation",
    "check_c1",
    "check_c2",
    "check_c3",
    "check_c4",
    "check_c5",
    "check_c6",
    "check_c7",
    "check_c8",
    "check_c9",
    "check_c10",
    "check_invariants",
    "check_tool_replays",
    "format_violations",
    "normalise_events",
    "split_legs",
]


# --------------------------------------------------------------------------- all of them


def check_invariants(
    events: Iterable[Any],
    *,
    graph: CompiledGraph | None = None,
    store_log: Iterable[Any] | None = None,
    stream_raised: bool = False,
    resumed_by_run_id: bool = True,
) -> list[Violation]:
    """Every event invariant that can be checked from what is given, sorted by event index.

    Besides ``check_c1`` … ``check_c10``: tool calls keep their records
    (:func:`check_tool_replays`); a run failing with ``JoinStarved`` must not name as
    missing a source whose arrival at the join its log shows, and (with ``graph``) a completed
    run must have run every join whose sources arrived (C8 when a resume lost the arrivals,
    C3 within one leg); and each ``interrupt_expired`` event opens its leg, fires no earlier
    than its deadline and names a question the run asked (rule ``"deadline"``).

    Args:
        events: one run's events (its legs in order), as models, wire-form dicts or JSON.
        graph: the graph (declared order for C4, expansions for C7, effect classes for C9).
        store_log: a ``FaultyStore.calls`` log of the same run (C5: saves that returned;
            C6: rejected saves).
        stream_raised: the stream raised (C6, C7), so the last leg may lack ``run_end``.
        resumed_by_run_id: later legs were resumed by run id (C8, C10), not time travel.
    """
    evs = normalise_events(events)
    token = share_legs(evs)  # (legs_shared, without a context manager's calls)
    try:
        return _check_all(evs, graph, None if store_log is None else list(store_log),
                          stream_raised, resumed_by_run_id)
    finally:
        _SHARED.reset(token)


def _check_all(evs: list[EventBase], graph: CompiledGraph | None, log: list[Any] | None,
               stream_raised: bool, resumed_by_run_id: bool) -> list[Violation]:
    out = check_c1(evs, stream_raised=stream_raised)
    out += check_c2(evs)
    out += check_c3(evs)
    out += check_c4(evs, graph=graph)
    out += check_c5(evs, store_log=log)
    if log is not None:
        out += check_c6(evs, store_log=log, stream_raised=stream_raised)
    if graph is not None:
        out += check_c7(evs, graph=graph)
    out += check_c8(evs, resumed_by_run_id=resumed_by_run_id)
    out += check_join_arrivals(evs, graph=graph)
    out += check_c9(evs, graph=graph)
    out += check_c10(evs)
    out += check_deadlines(evs)
    out += check_tool_replays(evs)
    return sorted(out, key=lambda v: (v.index is None, v.index or 0, v.rule))


def format_violations(
    violations: Sequence[Violation], events: Sequence[EventBase] | None = None, *,
    context: Mapping[str, Any] | None = None, window: int = 2,
) -> str:
    """A readable report: each violation, and the events around it when given."""
    lines = [f"{len(violations)} invariant violation(s):"]
    for k, v in (context or {}).items():
        lines.append(f"  {k}: {v}")
    for v in violations:
        lines.append(f"- {v}")
        if events is not None and v.index is not None:
            lo, hi = max(0, v.index - window), min(len(events), v.index + window + 1)
            for j in range(lo, hi):
                lines.append(f"    {'>' if j == v.index else ' '} #{j} {short(events[j])}")
    return "\n".join(lines)


