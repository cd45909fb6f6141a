"""The run's timeline: one lane per task, on the virtual clock.

A lane's bar spans the task from its first attempt's start to its end, so a node that sleeps
(or waits on a fake API) is as long as the virtual time it took, tasks of a parallel batch
lie side by side over the same stretch of time, and a task that retried is amber and says
how many attempts it made (and what failed, on hover; the events do not say when each
attempt began, so the bar is not cut into attempts). Checkpoints are diamonds on the axis
and store faults red lines across the lanes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from ._model import Fault, TaskSpan

__all__ = ["timeline_svg"]

_LEFT, _PLOT, _LANE, _TOP = 190, 620, 22, 34


def _tick(span: float) -> float:
    """A round tick interval giving about 6 ticks over ``span`` seconds."""
    raw = span / 6
    power = 10.0 ** math.floor(math.log10(raw))
    return next(float(m * power) for m in (1, 2, 5, 10) if m * power >= raw)


def _seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") + "s"


def timeline_svg(tasks: Sequence[TaskSpan], *, checkpoints: Sequence[tuple[float, str]] = (),
                 faults: Sequence[Fault] = ()) -> str:
    """The lanes as an ``<svg>`` element (every name escaped).

    Args:
        tasks: the tasks, one lane each, top to bottom.
        checkpoints: ``(seconds, checkpoint id)`` of each checkpoint saved.
        faults: store faults, drawn where they hit.
    """
    span = max([0.0, *(t.end for t in tasks), *(c for c, _ in checkpoints),
                *(f.at for f in faults if f.at is not None)])
    scale = _PLOT / span if span > 0 else 0.0
    height = _TOP + _LANE * max(1, len(tasks)) + 8
    width = _LEFT + _PLOT + 260
    out = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}">']
    if span > 0:
        step = _tick(span)
        n = 0
        while n * step <= span + 1e-9:
            x = _LEFT + n * step * scale
            out.append(f'<g class="tick"><line x1="{x:.1f}" y1="{_TOP - 6}" x2="{x:.1f}" '
                       f'y2="{height}"/><text x="{x:.1f}" y="12">{_seconds(n * step)}'
                       '</text></g>')
            n += 1
    else:
        out.append(f'<text class="axis-note" x="{_LEFT}" y="12">every task took no virtual '
                   'time</text>')
    for at, cp in checkpoints:
        x = _LEFT + at * scale
        out.append(f'<path class="checkpoint" d="M{x:.1f},{_TOP - 16}l5,5l-5,5l-5,-5z">'
                   f'<title>checkpoint {escape(cp)} at {_seconds(at)}</title></path>')
    for row, task in enumerate(tasks):
        y = _TOP + row * _LANE
        x = _LEFT + task.start * scale
        w = max(6.0, (task.end - task.start) * scale)
        outcome = task.outcome + (" retried" if task.attempts > 1 else "")
        note = f"{_seconds(task.end - task.start)}"
        if task.attempts > 1:
            note += f", {task.attempts} attempts"
        if task.outcome not in ("done", "running"):
            note += f", {task.outcome}"
        hover = [f"{task.node} ({task.task_id}), step {task.step}, leg {task.leg}: "
                 f"{_seconds(task.start)} to {_seconds(task.end)}, {note}", *task.errors]
        out.append(
            f'<g class="lane {outcome}" data-task="{escape(task.task_id)}" '
            f'data-node="{escape(task.node)}" data-step="{task.step}">'
            f'<title>{escape(chr(10).join(hover))}</title>'
            f'<text class="who" x="{_LEFT - 8}" y="{y + 15}">{escape(_cut(task.node, 18))} · '
            f's{task.step}</text><rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" '
            f'height="{_LANE - 8}" rx="3"/>'
            f'<text class="note" x="{x + w + 6:.1f}" y="{y + 15}">{escape(note)}</text></g>')
    for fault in faults:
        if fault.at is None:
            continue
        x = _LEFT + fault.at * scale
        out.append(f'<line class="fault" x1="{x:.1f}" y1="{_TOP - 4}" x2="{x:.1f}" '
                   f'y2="{height}"><title>{escape(fault.detail)}: {escape(fault.error)}'
                   '</title></line>')
    out.append("</svg>")
    return "".join(out)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
