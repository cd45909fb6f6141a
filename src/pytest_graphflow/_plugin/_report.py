"""The ``graphflow`` section of a failing test's report.

It tells the reader what they need to replay and understand the failure:

* the test's seed and where it came from;
* the command that reruns this one test with the same session seed (hence the same seed;
  a test that takes a snapshot has the same seed in every session);
* every leg of the test's last run (a paused leg and its resumption are two), one line
  each with its status, what it raised and the path it took (in a Hypothesis test, the last
  run is the last example's: the shrunk one);
* the last events of the last leg, one per line.

That is the concise form (the default, ``--graphflow-report=short``). With
``--graphflow-report=full`` every leg gets its Mermaid diagram (taken edges bold) and up to
20 events.
"""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import pytest

    from ._runtime import RunRecording
    from ._state import ItemState

__all__ = ["REPORT_MODES", "failure_section", "reproduce_command"]

LAST_EVENTS: Final = 20
SHORT_EVENTS: Final = 6
REPORT_MODES: Final = ("short", "full")


def reproduce_command(item: pytest.Item, state: ItemState) -> str:
    """``pytest <node id> --graphflow-seed=<session seed>``, runnable from where pytest ran
    (without the seed for a test that takes a snapshot: the session seed does not change it).
    """
    args = ["pytest", _node_arg(item)]
    if not state.settings.seed_from_snapshot:
        args.append(f"--graphflow-seed={state.session.seed}")
    if state.session.store_from_option:
        args.append(f"--graphflow-store={state.session.store}")
    return shlex.join(args)


def _node_arg(item: pytest.Item) -> str:
    """The node id, with its file part relative to the invocation directory."""
    nodeid = item.nodeid
    invocation = item.config.invocation_params.dir
    if invocation == item.config.rootpath:
        return nodeid
    _, sep, rest = nodeid.partition("::")
    try:
        rel = os.path.relpath(item.path, invocation)
    except ValueError:  # another drive on Windows
        rel = str(item.path)
    return f"{rel}{sep}{rest}"


def failure_section(item: pytest.Item, state: ItemState, mode: str = "short") -> str:
    """The text of the ``graphflow`` report section (``mode``: ``"short"`` or ``"full"``)."""
    settings = state.settings
    if settings.seed_from_marker:
        origin = f"fixed by @pytest.mark.graphflow(seed={settings.seed})"
    elif settings.seed_from_snapshot:
        origin = ("crc32 of the node id: the test takes a snapshot, so the session seed does "
                  "not change it")
    else:
        origin = (f"session seed {state.session.seed} + crc32 of the node id, "
                  "modulo 2**32")
    lines = [
        f"seed: {settings.seed} ({origin})",
        f"reproduce: {reproduce_command(item, state)}",
    ]
    if settings.store != "memory" or settings.checkpoint_policy is not None:
        extra = f"store: {settings.store}"
        if settings.checkpoint_policy is not None:
            extra += f", checkpoint_policy: {settings.checkpoint_policy}"
        lines.append(extra)
    if not state.runs:
        lines.append("runs: none recorded (the test failed before its runtime ran a graph)")
        return "\n".join(lines)
    runs = list(state.runs)
    last_id = runs[-1].run_id
    # The last run's legs: walk back while a leg resumed the one before it (Hypothesis
    # examples with one seed repeat run ids, so the id alone does not tell runs apart).
    legs = [runs[-1]]
    for prev in reversed(runs[:-1]):
        if not (legs[0].resumed and prev.run_id == last_id):
            break
        legs.insert(0, prev)
    others = len(runs) - len(legs) + state.dropped
    head = f"last run: {last_id}, {len(legs)} leg(s)"
    if others:
        head += f" (the test made {others} other leg(s) before, not shown)"
    lines.append(head)
    if mode == "full":
        for n, run in enumerate(legs, start=1):
            lines.extend(_run_lines(run, settings.seed, f"leg {n}"))
        return "\n".join(lines)
    for n, run in enumerate(legs, start=1):
        lines.extend(_leg_summary(run, settings.seed, f"leg {n}"))
    lines.extend(_events(legs[-1], SHORT_EVENTS, f"leg {len(legs)}"))
    lines.append("(--graphflow-report=full shows each leg's diagram and more events)")
    return "\n".join(lines)


def _leg_summary(run: RunRecording, test_seed: int, name: str) -> list[str]:
    notes = [] if run.seed == test_seed else [f"runtime seed {run.seed}"]
    if run.resumed:
        notes.append("resumed")
    note = f" ({', '.join(notes)})" if notes else ""
    out = [f"{name}: {run.run_id} of graph {run.graph.graph_id!r}{note}: {run.status}, "
           f"{len(run.events)} events"]
    if run.error is not None:
        out.append(f"  raised: {type(run.error).__name__}: {_one_line(run.error)}")
    out.extend(f"  {line}" for line in _hook_failures(run))
    out.append(f"  path: {run.path_text()}")
    return out


HOOK_ERRORS: Final = {"MiddlewareFailed": "middleware", "GuardrailBlocked": "guardrail",
                      "ToolFailed": "tool", "DeadlineExpired": "deadline"}
"""Run failures that a hook around a node (a tool, or an expired question) caused, and the
label of their report line."""


def _hook_failures(run: RunRecording) -> list[str]:
    """A line per failure of a middleware hook or a guardrail block in the leg: whose hook,
    around which node, and what to do (the error's own message says it); and a line per
    question whose deadline expired (``interrupt_expired``): what the run did instead."""
    lines = []
    for event in run.events:
        kind = getattr(event, "type", None)
        if kind == "interrupt_expired":
            lines.append(_expired_line(event))
            continue
        label = HOOK_ERRORS.get(getattr(event, "error_type", "")) if kind == "error" else None
        if label is not None:
            lines.append(f"{label}: {event.message}")  # type: ignore[attr-defined]
    return lines


def _expired_line(event: Any) -> str:
    """The report line of an ``interrupt_expired`` event."""
    if event.action == "routed":
        then = f"the task went to its on_timeout node {event.routed_to!r}"
    elif event.action == "answered":
        then = f"it was answered with the graph's TimeoutAnswer({event.answer!r})"
    else:
        then = "the graph has no on_timeout route, so the task failed with DeadlineExpired"
    return (f"deadline: question {event.key} of node {event.node!r} expired at "
            f"{event.deadline.isoformat()} (fired at {event.time.isoformat()}); {then}")


def _events(run: RunRecording, limit: int, name: str) -> list[str]:
    from .._assert._repr import format_events

    shown = run.events[-limit:]
    skipped = len(run.events) - len(shown)
    lines = [f"last events of {name} ({len(shown)} of {len(run.events)}):" if skipped
             else f"events of {name}:"]
    try:
        text = format_events(shown)
    except Exception as exc:  # pragma: no cover - a report must never hide the failure
        text = f"(cannot format events: {type(exc).__name__}: {exc})"
    lines.extend(f"  {line}" for line in text.splitlines())
    return lines


def _run_lines(run: RunRecording, test_seed: int, name: str) -> list[str]:
    notes = [] if run.seed == test_seed else [f"runtime seed {run.seed}"]
    if run.resumed:
        notes.append("resumed")
    note = f" ({', '.join(notes)})" if notes else ""
    head = (f"{name}: {run.run_id} of graph {run.graph.graph_id!r}{note}: {run.status}, "
            f"{len(run.events)} events")
    lines = [head]
    if run.error is not None:
        lines.append(f"raised: {type(run.error).__name__}: {_one_line(run.error)}")
        lines.append(f"nodes completed: {', '.join(run.visited) or '(none)'}")
    lines.extend(_hook_failures(run))
    lines.append(f"path: {run.path_text()}")
    try:
        diagram = run.mermaid()
    except Exception as exc:  # a report must never hide the test's own failure
        diagram = f"(no diagram: {type(exc).__name__}: {exc})"
    lines.append("mermaid:")
    lines.extend(f"  {line}" for line in diagram.splitlines())
    lines.extend(_events(run, LAST_EVENTS, name))
    return lines


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""
