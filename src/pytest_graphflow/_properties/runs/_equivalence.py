"""``check_interrupt_resume_equivalence``: pausing at every interrupt and resuming (in the same
runtime or a fresh one over the same store) ends where answering at once does.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from ..._engine._runtime import GraphRuntime
from ..._graph._effects import EFFECT_LEDGER, Effect
from ..._records._events import EventBase
from ...errors import InvalidArgument
from ..checks._checks import Violation, check_invariants
from ..checks._ledger import repeated_effects, undeclared_effects
from ..strategies._genspec import GraphSpec
from ._compare import Compare, Normalize
from ._deadlock import deadlock_violation
from ._drive import (
    Answers,
    Drive,
    GraphLike,
    Input,
    _first_difference,
    _fresh_after,
    _lines,
    _log_json,
    _on_owned_loop,
    _outcome,
    _outcome_diff,
    _path,
    _pause_seconds,
    _runtime,
    _wall,
    drive,
    graph_maker,
)
from ._pairs import report_pair

__all__ = ["check_interrupt_resume_equivalence"]

_SPEC_LEGS = 1000
"""The leg cap for a ``GraphSpec``: more than its runs can pause (up to six nodes, each loop
going back at most twice, two interrupts a call)."""


def check_interrupt_resume_equivalence(
    graph: GraphLike,
    input: Input = None,
    answers: Answers = None,
    *,
    seed: int = 0,
    backend: str = "asyncio",
    max_legs: int | None = None,
    pause: float | timedelta = 0.0,
    wait: float | timedelta | None = None,
    ignore: Iterable[str] | str | None = None,
    normalize: Normalize | None = None,
) -> list[Violation]:
    """Pausing at every interrupt and resuming ends where answering at once does.

    Three runs: (a) an ``on_interrupt`` hook answers each interrupt at once; (b) the run
    pauses at each interrupt and the same runtime resumes it by run id; (c) like (b), each
    resume by a fresh :class:`GraphRuntime` over the same store, given ``graph=`` (another
    process; its virtual clock goes on where the previous one stopped), when (b) paused at
    all ((c) would otherwise repeat (b) as it was). For a ``GraphSpec``, whose nodes let
    ``interrupt()`` raise, (b) runs first and, when it never paused, is (a) as well (the hook
    is asked nothing before a first ``interrupt()``), so the graph runs once. (b) and (c) must end
    in the status and state of (a); (c)'s log must equal (b)'s byte for byte; and (b)'s log,
    all legs together, must keep C1–C10. Effects recorded with
    :func:`~pytest_graphflow.record_effect` in (b) happen once each (a node runs again from the
    top on resume, so an effect before its ``interrupt()`` repeats) and never in a node
    declared ``pure``/``read`` (rule ``"effects"``). A run that can never end
    (``VirtualDeadlock``) is reported at once as a ``"deadlock"`` violation naming the
    waiting nodes.

    Args:
        max_legs: at most this many legs (pauses + 1) per paused run. Default 50, or
            ``1,000 for a ``GraphSpec``: its cycles are bounded by counters, so its runs
            end, and nested loops of interrupting nodes pause more than 50 times; a run cut
            short by the cap would be reported as ending unlike answering at once.
        wait: the virtual time each pause lasts in (b) and (c), as seconds or a
            ``timedelta`` (a human takes a while to answer: ``timedelta(hours=12)`` crosses
            noon or midnight): a route or node that decides again on resume from the clock
            (``ctx.now()``, ``datetime.now()``), and so takes another path after a wait, is
            then reported with both paths. Default 0.
        pause: the same as ``wait`` (its earlier name); give one of them.
        ignore: state paths left out of the comparison (``"audit.*.at"``).
        normalize: a function ``state -> state`` applied before comparing.
    """
    make = graph_maker(graph, "check_interrupt_resume_equivalence")
    if max_legs is None:
        max_legs = _SPEC_LEGS if isinstance(graph, GraphSpec) else 50
    cmp = Compare.of(ignore, normalize)
    where = "check_interrupt_resume_equivalence"
    if wait is not None and pause:
        raise InvalidArgument(f"{where}(pause={pause!r}, wait={wait!r}): give one of them "
                              "(wait= is pause='s newer name)")
    wait = (_pause_seconds(wait, where, "wait") if wait is not None
            else _pause_seconds(pause, where))
    w = _wall(graph)

    ledgers: dict[str, list[Effect]] = {}

    def run(name: str, **kw: Any) -> Drive:
        g = make()
        # Its own in-memory store (the default: its class's features are read once, not
        # checked again per runtime).
        rt = _runtime(None, seed, backend=backend, wall=w)
        ledger = ledgers[name] = []

        async def counted(r: GraphRuntime) -> Drive:
            EFFECT_LEDGER.set(ledger)
            return await drive(r, g, input, answers, **kw)

        return _on_owned_loop(rt, counted)  # type: ignore[no-any-return]

    if isinstance(graph, GraphSpec):
        # A generated graph's nodes are functions of their state that let interrupt() raise:
        # until a run reaches its first interrupt() it is the same call with or without the
        # hook. So (b) runs first, and when it never paused, it *is* (a): the hook would never
        # have been asked.
        b = run("b", max_legs=max_legs, pause=wait)
        assert b.result is not None
        a = b if b.legs == 1 and b.result.status != "interrupted" else run("a", hook=True)
    else:
        a = run("a", hook=True)
        b = None
    stuck = deadlock_violation(a.result, "answering at once")
    if stuck is not None:
        return [stuck]  # pausing would wait the same way
    if b is None:
        b = run("b", max_legs=max_legs, pause=wait)
    stuck = deadlock_violation(b.result, "pausing and resuming (same runtime)")
    if stuck is not None:
        return [stuck]
    # (c) differs from (b) only at a resume: a run that ended without pausing would run
    # again exactly as (b) did, so it is not run.
    c = b if b.legs == 1 else run("c", fresh=_fresh_after, max_legs=max_legs, pause=wait)
    declared = {n: spec.effect for n, spec in make().nodes.items()}
    out = undeclared_effects(ledgers["b"], declared, "pausing and resuming")
    out += repeated_effects(ledgers["b"], "pausing and resuming (same-runtime resumes)")
    assert a.result is not None
    want = _outcome(a.result, cmp)
    paused = [("same-runtime resumes", b)] + ([] if c is b else [("fresh-runtime resumes", c)])
    for name, d in paused:
        assert d.result is not None
        if d is a:
            continue  # a generated graph's run that never paused: (a) itself
        if _outcome(d.result, cmp) != want:
            out.append(Violation(
                "equivalence", None,
                f"pausing and resuming ({name}, {d.legs} legs"
                + (f", {_waited(wait)} each pause" if wait else "") + ") ended unlike "
                f"answering at once: {_paths(a.events, d.events)}"
                f"{_outcome_diff(a.result, d.result, cmp)}",
                example=(d.events, a.events)))
            report_pair("check_interrupt_resume_equivalence", str(out[-1]),
                        ("answering at once", f"pausing and resuming ({name})"), a.events,
                        d.events, make_graph=make)
    if c is not b and _log_json(b.events) != _log_json(c.events):
        lb, lc = _lines(b.events), _lines(c.events)
        i, diff = _first_difference(lb, lc)
        out.append(Violation("equivalence", i, "resuming in a fresh runtime gave another "
                             f"log than resuming in the same runtime: {diff}"))
        report_pair("check_interrupt_resume_equivalence", str(out[-1]),
                    ("same-runtime resumes", "fresh-runtime resumes"), lb, lc, first=i,
                    make_graph=make)
    out += check_invariants(b.events, graph=make())
    return out


def _waited(seconds: float) -> str:
    """``43200s (12:00:00)``: the seconds, and as hours when there are any."""
    if seconds < 3600:
        return f"{seconds:g}s"
    return f"{seconds:g}s ({timedelta(seconds=seconds)})"


def _paths(want: list[EventBase], got: list[EventBase]) -> str:
    """Both runs' paths when they differ (a route that decided otherwise)."""
    a, b = _path(want), _path(got)
    return "" if a == b else f"it took the path {b}, not {a}; "
