"""``check_clock_start`` for LangGraph graphs: the native check's comparison
(:func:`~pytest_graphflow._properties.runs._clockstart.compare_starts`) over harness runs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from .._properties.checks._checks import Violation
from .._properties.runs._clockstart import DEFAULT_STARTS, StartRun, compare_starts, starts_of
from .._records._events import NodeEnd
from .._time._clock import VirtualClock
from ._harness import LangGraphHarness
from ._props import Answers, _held, drive

__all__ = ["check_clock_start"]


@_held
def check_clock_start(graph: Any, input: Any = None, *,
                      starts: Iterable[datetime] = DEFAULT_STARTS, seed: int = 0,
                      answers: Answers = None, ignore: Iterable[str] | str | None = None,
                      saver_factory: Callable[[], BaseCheckpointSaver[Any]] = InMemorySaver,
                      **harness_kwargs: Any) -> list[Violation]:
    """The same run with the harness's clock starting at each of ``starts`` takes the same
    path and ends the same way: control flow must not depend on the wall clock.

    Each start gets a fresh :class:`LangGraphHarness` (``seed``, a fresh saver,
    ``clock=VirtualClock(start=...)``; ``datetime.now()`` in node code reads it) run on a
    fresh copy of ``input``, interrupts answered from ``answers``. Compared with the first
    start's run, as :func:`pytest_graphflow.invariants.check_clock_start` compares: the
    parent graph's nodes completed, in order; the status; the final state with every time in
    it (``datetime``/``date``/``time``, or a string that is wholly an ISO-8601 date or time)
    replaced by ``"<time>"`` and ids the harness generated (message ids, ``lc_run--…``) by
    ``"<generated-id>"``.

    Args:
        starts: two or more instants (naive ones are UTC); by default a Monday 10:00 and
            22:00 UTC and the Saturday after at 10:00.
        ignore: more state paths to leave out (dotted, ``*`` for any key or index).
        harness_kwargs: passed to each :class:`LangGraphHarness` (``thread_id``, ``context``…).

    Returns:
        one ``"clock_start"`` violation per start whose run differs from the first start's,
        naming both starts, both node sequences and the first node where they diverge.
    """
    runs: list[StartRun] = []
    for start in starts_of(starts, "check_clock_start"):
        h = LangGraphHarness(graph, seed=seed, saver=saver_factory(),
                             clock=VirtualClock(start=start), **harness_kwargs)
        events = drive(h, input, answers)
        state = None
        if h.last is not None:
            text = json.dumps(h.last.data, sort_keys=True, default=str)
            for generated in h.generated_ids:
                text = text.replace(generated, "<generated-id>")
            state = json.loads(text)
        runs.append(StartRun(start, tuple(e.node or "?" for e in events
                                          if isinstance(e, NodeEnd)),
                             h.last.status if h.last is not None else "raised", state))
    return compare_starts(runs, ignore)
