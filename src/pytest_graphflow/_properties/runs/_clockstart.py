"""The clock-start check, shared by the native runtime and the LangGraph bridge: the same run
(graph, input, seed, answers) with the virtual clock starting at two or more instants must take
the same path and end the same way.

A run is summarised as a :class:`StartRun` (the nodes it completed, in order; its status; its
final state) by the runtime-specific driver; :func:`compare_starts` compares the summaries.
What is compared, exactly:

* the **path**: the names of the nodes that completed, in completion order, every leg
  (interrupted runs are resumed with ``answers``). The same seed must give the same schedule
  whatever the clock's start, so parallel tasks complete in the same order too;
* the **status** (``completed``, ``interrupted``, ``failed``…);
* the **final state**, every value in it except times: each value (at any depth, in dicts
  and lists) that is a ``datetime``/``date``/``time`` or a string that is wholly an ISO-8601
  date, date-time or time (``2025-01-06``, ``2025-01-06T10:00:00+00:00``, ``10:00:00``) is
  replaced by ``"<time>"`` before comparing. A stamp from ``datetime.now()`` differs between
  the starts by nature; a decision taken from it must not. Paths named in ``ignore`` (dotted,
  ``*`` for any key or index) are left out too — times kept another way (epoch seconds, a
  time inside a longer string such as ``"T-20250106-…"``) need it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from ..._records._events import NodeEnd
from ..._stores._memory import InMemoryCheckpointStore
from ..._time._clock import VirtualClock
from ...errors import InvalidArgument
from ..checks._checks import Violation
from ._compare import Compare, diff_paths
from ._deadlock import deadlock_violation
from ._drive import (
    Answers,
    Drive,
    GraphLike,
    Input,
    _on_owned_loop,
    _runtime,
    _wall,
    drive,
    graph_maker,
)
from ._pairs import report_pair

__all__ = ["DEFAULT_STARTS", "StartRun", "check_clock_start", "compare_starts", "starts_of",
           "untimed"]

DEFAULT_STARTS: tuple[datetime, ...] = (
    datetime(2025, 1, 6, 10, 0, tzinfo=UTC),   # a Monday, in business hours
    datetime(2025, 1, 6, 22, 0, tzinfo=UTC),   # the same Monday, at night
    datetime(2025, 1, 11, 10, 0, tzinfo=UTC),  # the Saturday after, in the morning
)
"""Where the clock starts by default: a weekday 10:00 and 22:00 UTC, and a Saturday 10:00."""

_ISO = re.compile(r"^(\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?"
                  r"|\d{2}:\d{2}:\d{2}(\.\d+)?)(Z|[+-]\d{2}:?\d{2})?$")


@dataclass(frozen=True)
class StartRun:
    """One run's summary: the clock's start, the nodes completed in order, the status and
    the final state (a dict, or ``None`` when the run ended without one)."""

    start: datetime
    path: tuple[str, ...]
    status: str
    state: Any


def starts_of(starts: Iterable[datetime], where: str) -> tuple[datetime, ...]:
    """``starts`` validated: two or more datetimes (naive ones taken as UTC), all different."""
    try:
        given = tuple(starts)
    except TypeError:
        given = ()
    if len(given) < 2 or not all(isinstance(s, datetime) for s in given):
        raise InvalidArgument(f"{where}(starts={starts!r}): give two or more datetimes for the "
                              "clock to start at, e.g. (datetime(2025, 1, 6, 10, tzinfo=UTC), "
                              "datetime(2025, 1, 6, 22, tzinfo=UTC))")
    out = tuple(s if s.tzinfo else s.replace(tzinfo=UTC) for s in given)
    if len(set(out)) != len(out):
        raise InvalidArgument(f"{where}(starts={starts!r}): the starts must differ (the same "
                              "start twice compares a run with itself)")
    return out


def untimed(value: Any) -> Any:
    """``value`` with every time in it (a ``datetime``/``date``/``time``, or a string that is
    wholly an ISO-8601 date, date-time or time) replaced by ``"<time>"``, at any depth."""
    if isinstance(value, datetime | date | time) or (isinstance(value, str)
                                                     and _ISO.match(value)):
        return "<time>"
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [untimed(v) for v in value]
    return value


def _when(start: datetime) -> str:
    """``Mon 2025-01-06 10:00 UTC``."""
    return start.astimezone(UTC).strftime("%a %Y-%m-%d %H:%M UTC")


def _arrow(path: Sequence[str]) -> str:
    return " → ".join(path) or "(no node)"


def compare_starts(runs: Sequence[StartRun], ignore: Iterable[str] | str | None = None,
                   found: Callable[[int, Violation], None] | None = None) -> list[Violation]:
    """Every run against the first: a ``"clock_start"`` violation for each whose path, status
    or state (times replaced by ``"<time>"``, ``ignore`` paths left out) differs, naming both
    starts, both node sequences and the first node where they diverge. ``found(i, v)`` is
    called for each, ``i`` the index of the run that differs from ``runs[0]``."""
    cmp = Compare.of(ignore, None)

    def state(run: StartRun) -> Any:
        return untimed(cmp.state(run.state))

    base = runs[0]
    want = state(base)
    out: list[Violation] = []
    for n, run in enumerate(runs[1:], 1):
        v = _differs(base, run, want, state(run))
        if v is not None:
            out.append(v)
            if found is not None:
                found(n, v)
    return out


def _differs(base: StartRun, run: StartRun, want: Any, got: Any) -> Violation | None:
    """How ``run`` differs from ``base`` (states already compared forms), or ``None``."""
    a, b = _when(base.start), _when(run.start)
    if run.path != base.path:
        i = next((i for i, (x, y) in enumerate(zip(base.path, run.path, strict=False))
                  if x != y), min(len(base.path), len(run.path)))
        at = (f"{base.path[i] if i < len(base.path) else '(end)'} vs "
              f"{run.path[i] if i < len(run.path) else '(end)'}")
        return Violation(
            "clock_start", None,
            f"control flow depends on the wall clock: started at {a} the run took "
            f"{_arrow(base.path)} ({base.status}); started at {b} it took "
            f"{_arrow(run.path)} ({run.status}); they diverge at node #{i + 1}: {at}. "
            "A route or node decides from datetime.now()/ctx.now(): decide from the state "
            "(an input field, or a time the run stored once)",
            example=(base.path, run.path))
    parts = []
    if run.status != base.status:
        parts.append(f"status {base.status} → {run.status}")
    if got != want:
        parts.append("state differs at:\n    " + "\n    ".join(diff_paths(want, got)))
    if not parts:
        return None
    return Violation(
        "clock_start", None,
        f"the outcome depends on the wall clock: started at {a} and at {b} the run took the "
        f"same path {_arrow(run.path)} but ended otherwise: " + "; ".join(parts)
        + " (times in the state compared as '<time>')",
        example=(base.path, run.path))

def check_clock_start(
    graph: GraphLike,
    input: Input = None,
    *,
    starts: Iterable[datetime] = DEFAULT_STARTS,
    seed: int = 0,
    answers: Answers = None,
    backend: str = "asyncio",
    ignore: Iterable[str] | str | None = None,
) -> list[Violation]:
    """The same run with the virtual clock starting at each of ``starts`` takes the same path
    and ends the same way: control flow must not depend on the wall clock.

    Each start gets a fresh deterministic runtime (``VirtualClock(start=...)``, ``seed``, an
    in-memory store; ``datetime.now()`` in node code reads the virtual clock), interrupts
    answered from ``answers``. Compared with the first start's run: the nodes completed, in
    order (the same seed gives the same schedule whatever the start); the status; the final
    state with every time in it (a ``datetime``/``date``/``time``, or a string that is wholly
    an ISO-8601 date or time) replaced by ``"<time>"``: a stamp differs by nature, a decision
    taken from it must not. A
    difference is a ``"clock_start"`` violation naming both starts, both node sequences and
    the first node where they diverge. A run that can never end (``VirtualDeadlock``) is a
    ``"deadlock"`` violation.

    Args:
        starts: two or more instants (naive ones are UTC); by default a Monday 10:00 and
            22:00 UTC and the Saturday after at 10:00 (:data:`DEFAULT_STARTS`).
        ignore: more state paths to leave out (``"ticket.opened"``; times kept as epoch
            seconds or inside ids are not recognised as times).
    """
    where = "check_clock_start"
    at = starts_of(starts, where)
    make = graph_maker(graph, where)
    runs: list[StartRun] = []
    logs: list[list[Any]] = []
    for start in at:
        g = make()
        rt = _runtime(InMemoryCheckpointStore(), seed,
                      VirtualClock(start=start, patch_wall_clock=_wall(graph)), backend)
        d: Drive = _on_owned_loop(rt, lambda r, g=g: drive(r, g, input, answers))  # type: ignore[misc]
        stuck = deadlock_violation(d.result, f"seed {seed}, clock starting {_when(start)}")
        if stuck is not None:
            return [stuck]
        assert d.result is not None
        logs.append(d.events)
        runs.append(StartRun(start, tuple(e.node or "?" for e in d.events
                                          if isinstance(e, NodeEnd)),
                             d.result.status, d.result.data))

    def pair(n: int, v: Violation) -> None:
        report_pair(where, str(v), (f"clock starting {_when(at[0])}",
                                    f"clock starting {_when(at[n])}"), logs[0], logs[n],
                    make_graph=make)

    return compare_starts(runs, ignore, pair)
