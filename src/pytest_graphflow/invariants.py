"""Checkers for the runtime's invariants (SPEC §3, C1–C10) and whole-run properties.

Event invariants — each takes a run's events (one leg, or every leg of a run in order) and
returns a list of :class:`Violation` (empty when the rule holds)::

    violations = check_invariants(trace.events, graph=graph, store_log=trace.store_log)
    assert_invariants(trace.events)            # raises AssertionError listing them

C5 (a halted run's checkpoint is saved before the halting node's events are yielded) needs
the order of store saves relative to the events: :func:`record_run` records both on one
timeline, and :func:`check_recording` / :func:`assert_invariants` check it::

    recording = await record_run(runtime, graph, input)
    assert_invariants(recording)

Whole-run properties, each running the graph several ways on fresh deterministic runtimes:
:func:`check_interrupt_resume_equivalence`, :func:`check_crash_recovery`,
:func:`check_determinism`, :func:`check_clock_start` (the same run with the clock starting
at other hours takes the same path), :func:`check_tool_replays` (tool calls replayed, never called
twice), and :func:`check_reducer_laws` for a :class:`Reducer` on its own;
across process boundaries, :func:`check_determinism_across_processes` and
:func:`check_crash_recovery_across_processes`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._exports import show_public as _show_public
from ._graph._builder import CompiledGraph
from ._properties.checks._checks import (
    Violation,
    check_c1,
    check_c2,
    check_c3,
    check_c4,
    check_c5,
    check_c6,
    check_c7,
    check_c8,
    check_c9,
    check_c10,
    check_invariants,
    check_tool_replays,
    format_violations,
    normalise_events,
)
from ._properties.checks._lint import check_node_code
from ._properties.checks._reducer_laws import assert_reducer_laws, check_reducer_laws
from ._properties.runs._clockstart import check_clock_start
from ._properties.runs._determinism import check_determinism
from ._properties.runs._equivalence import check_interrupt_resume_equivalence
from ._properties.runs._recording import (
    Mark,
    Recording,
    RecordingStore,
    check_recording,
    record_resume,
    record_run,
    record_run_sync,
)
from ._properties.runs._recovery import check_crash_recovery
from ._properties.runs._xprocess import (
    check_crash_recovery_across_processes,
    check_determinism_across_processes,
)

__all__ = [
    "Mark",
    "Recording",
    "RecordingStore",
    "Violation",
    "assert_invariants",
    "assert_reducer_laws",
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
    "check_clock_start",
    "check_crash_recovery",
    "check_crash_recovery_across_processes",
    "check_determinism",
    "check_determinism_across_processes",
    "check_interrupt_resume_equivalence",
    "check_invariants",
    "check_node_code",
    "check_recording",
    "check_reducer_laws",
    "check_tool_replays",
    "format_violations",
    "record_resume",
    "record_run",
    "record_run_sync",
]


def assert_invariants(
    events: Recording | Iterable[Any],
    store_log: Iterable[Any] | None = None,
    *,
    graph: CompiledGraph | None = None,
    stream_raised: bool = False,
) -> None:
    """Raise ``AssertionError`` listing every broken invariant, with the events around each.

    Args:
        events: a :class:`Recording` (all of C1–C10, the save/event interleaving of C5 and
            C6 included), or a run's events (a ``Trace``'s ``events``, a list of events or
            their wire form).
        store_log: a ``FaultyStore.calls`` log of the run (``Trace.store_log``).
        graph: the graph (declared order, expansions, effect classes).
        stream_raised: the stream raised (C6/C7), so the last leg may lack ``run_end``.
    """
    if isinstance(events, Recording):
        evs = events.events
        found = check_recording(events, graph=graph)
    else:
        evs = normalise_events(getattr(events, "events", events))
        found = check_invariants(evs, graph=graph, store_log=store_log,
                                 stream_raised=stream_raised)
    if found:
        raise AssertionError(format_violations(found, evs))

# reprs and pickles name this module, not the private one that defines each name
_show_public(__name__, globals(), __all__)
