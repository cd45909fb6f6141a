"""The ``graphflow`` section of a failing test's report.

It tells the reader what they need to replay and understand the failure:

* the test's seed and where it came from;
* the command that reruns this one test with the same session seed (hence the same seed);
* the path the last run took through the graph, as text and as a Mermaid diagram with the
  taken edges drawn bold;
* the last events of that run, one per line.
"""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import pytest

    from ._runtime import RunRecording
    from ._state import ItemState

__all__ = ["failure_section", "reproduce_command"]

LAST_EVENTS: Final = 20


def reproduce_command(item: pytest.Item, state: ItemState) -> str:
    """``pytest <node id> --graphflow-seed=<session seed>``, runnable from where pytest ran."""
    args = ["pytest", _node_arg(item), f"--graphflow-seed={state.session.seed}"]
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


def failure_section(item: pytest.Item, state: ItemState) -> str:
    """The text of the ``graphflow`` report section."""
    settings = state.settings
    if settings.seed_from_marker:
        origin = f"fixed by @pytest.mark.graphflow(seed={settings.seed})"
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
    lines.extend(_run_lines(state.runs[-1], settings.seed))
    return "\n".join(lines)


def _run_lines(run: RunRecording, test_seed: int) -> list[str]:
    from .._assert._repr import format_events

    notes = [] if run.seed == test_seed else [f"runtime seed {run.seed}"]
    if run.resumed:
        notes.append("resumed")
    note = f" ({', '.join(notes)})" if notes else ""
    head = (f"last run: {run.run_id} of graph {run.graph.graph_id!r}{note}: {run.status}, "
            f"{len(run.events)} events")
    lines = [head]
    if run.error is not None:
        lines.append(f"raised: {type(run.error).__name__}: {_one_line(run.error)}")
        lines.append(f"nodes completed: {', '.join(run.visited) or '(none)'}")
    lines.append(f"path: {run.path_text()}")
    try:
        diagram = run.mermaid()
    except Exception as exc:  # a report must never hide the test's own failure
        diagram = f"(no diagram: {type(exc).__name__}: {exc})"
    lines.append("mermaid:")
    lines.extend(f"  {line}" for line in diagram.splitlines())
    shown = run.events[-LAST_EVENTS:]
    skipped = len(run.events) - len(shown)
    lines.append(f"last events ({len(shown)} of {len(run.events)}):" if skipped
                 else "events:")
    try:
        text = format_events(shown)
    except Exception as exc:  # pragma: no cover - defensive, as above
        text = f"(cannot format events: {type(exc).__name__}: {exc})"
    lines.extend(f"  {line}" for line in text.splitlines())
    return lines


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""
