"""The page of one run: graph, timeline, interrupts, checkpoints and faults, the state after
each step as a diff, and the event table with its filters.

Every value from the run (names, ids, messages, states, payloads) is escaped; long values are
cut (:data:`VALUE_LIMIT` characters) so that a long run's page stays small.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from ._assets import document
from ._graph_svg import graph_svg
from ._model import NO_ANSWER, RunView, read_run
from ._timeline import timeline_svg

if TYPE_CHECKING:
    from .._graph._builder import CompiledGraph

__all__ = ["VALUE_LIMIT", "event_detail", "render_run_html", "run_sections", "value_text"]

VALUE_LIMIT = 240
"""How many characters of a value a cell shows (the rest is cut with ``…``)."""

_COMMON = frozenset({"seq", "run_id", "step", "time", "node", "task_id", "type"})


def value_text(value: Any, limit: int = VALUE_LIMIT) -> str:
    """``value`` as compact JSON (not escaped), cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_detail(event: Mapping[str, Any]) -> str:
    """The fields of an event beyond the common ones, as compact JSON (not escaped)."""
    rest = {k: v for k, v in event.items()
            if k not in _COMMON and v is not None and v is not False}
    return value_text(rest)


def render_run_html(
    events: Sequence[Mapping[str, Any]],
    *,
    graph: CompiledGraph | None = None,
    checkpoints: Iterable[Mapping[str, Any]] = (),
    initial_state: Mapping[str, Any] | None = None,
    answers: Mapping[str, Any] | None = None,
    faults: Iterable[Mapping[str, Any]] = (),
    title: str | None = None,
) -> str:
    """One run as a self-contained HTML page (the text of the file).

    Args:
        events: the run's events in wire form (``event.model_dump(mode="json")``, a store's
            ``events(run_id)``, a history file's ``events``), every leg in order.
        graph: the compiled graph, to draw every node and edge (without it, the drawing is
            the path taken) and to fold patches with its reducers.
        checkpoints: the run's checkpoints (wire form): the state after each step, the
            answers given at resumes, each checkpoint's status.
        initial_state: the state the run started from (JSON form).
        answers: interrupt answers by key, beyond those the checkpoints hold.
        faults: failed store calls (a FaultyStore's ``calls`` as dicts).
        title: the page's title (default: the run id and graph).

    Returns:
        The HTML document. It loads nothing: no network, no CDN.
    """
    view = read_run(events, graph=graph, checkpoints=checkpoints,
                    initial_state=initial_state, answers=answers, faults=faults)
    name = title or f"run {view.run_id} of graph {view.graph_id}"
    return document(name, _header(name, view) + "<main>" + run_sections(view, graph)
                    + "</main>")


def _header(title: str, view: RunView) -> str:
    legs = view.legs[-1] if view.legs else 0
    span = max([0.0, *view.offsets])
    return (f'<header><h1>{escape(title)}</h1><div class="meta">'
            f'<span class="status {escape(view.status)}">{escape(view.status)}</span> '
            f"run {escape(view.run_id)} · graph {escape(view.graph_id)} · thread "
            f"{escape(view.thread_id)} · {legs} leg(s) · {len(view.events)} events · "
            f"{span:g}s of virtual time</div></header>")


def run_sections(view: RunView, graph: CompiledGraph | None, ident: str = "run") -> str:
    """The sections of a run's page (without the document around them)."""
    parts = [_graph_section(view, graph, ident), _timeline_section(view)]
    if view.interrupts:
        parts.append(_interrupts(view))
    parts.append(_checkpoints_and_faults(view))
    parts.append(_steps(view))
    parts.append(_events(view))
    return "".join(parts)


def _graph_section(view: RunView, graph: CompiledGraph | None, ident: str) -> str:
    ran = [str(e.get("node")) for e in view.events if e.get("type") == "node_start"]
    where = ""
    if view.halted:
        verb = "failed" if view.status in ("failed", "raised") else "paused"
        where = (f'<p class="note">The run {verb} at '
                 f'<b class="halted">{escape(", ".join(view.halted))}</b> (red).</p>')
    note = "" if graph is not None else (
        '<p class="note">The graph was not given: the drawing shows the edges the run '
        "took.</p>")
    return (f'<section id="graph"><h2>Graph</h2>{where}{note}'
            f"{graph_svg(graph, view.path, ran=ran, halted=view.halted, ident=ident)}"
            '<p class="note">Bold blue: the edges taken; filled: the nodes that ran. Click a '
            "node to filter the events.</p></section>")


def _timeline_section(view: RunView) -> str:
    cps = [(view.offsets[i], cp) for i, cp, _ in view.checkpoints]
    return ('<section id="timeline"><h2>Timeline (virtual time)</h2><p class="note">One lane '
            "per task; tasks of a parallel batch side by side; a bar's length is the virtual "
            "time its task took (sleeps included); amber: retried, orange: paused, red: "
            "failed; green diamonds: checkpoints; red lines: store faults.</p>"
            f"{timeline_svg(view.tasks, checkpoints=cps, faults=view.faults)}</section>")


def _interrupts(view: RunView) -> str:
    rows = "".join(
        f'<tr class="interrupt" data-key="{escape(str(i.get("key")))}">'
        f'<td>{escape(str(i.get("node")))}</td><td>{escape(str(i.get("key")))}</td>'
        f'<td class="v">{escape(value_text(i.get("payload")))}</td>'
        f'<td class="v">{"(not answered)" if a is NO_ANSWER else escape(value_text(a))}</td>'
        "</tr>" for i, a in view.interrupts)
    return ('<section id="interrupts"><h2>Interrupts</h2><table><thead><tr><th>node</th>'
            "<th>key</th><th>payload</th><th>answer</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></section>")


def _checkpoints_and_faults(view: RunView) -> str:
    rows = "".join(
        f'<tr class="checkpoint"><td>{view.events[i].get("seq")}</td>'
        f'<td>{view.offsets[i]:g}s</td><td>{view.events[i].get("step")}</td>'
        f"<td>{escape(cp)}</td><td>{escape(status or '-')}</td></tr>"
        for i, cp, status in view.checkpoints)
    faults = "".join(
        f'<tr class="fault"><td>{"-" if f.at is None else f"{f.at:g}s"}</td>'
        f"<td>{escape(f.detail)}</td><td class=\"v\">{escape(f.error)}</td></tr>"
        for f in view.faults)
    out = ['<section id="checkpoints"><h2>Checkpoints and store faults</h2>']
    out.append("<table><thead><tr><th>seq</th><th>time</th><th>step</th><th>checkpoint</th>"
               f"<th>status</th></tr></thead><tbody>{rows}</tbody></table>"
               if rows else '<p class="note">No checkpoint was saved.</p>')
    out.append("<h3>Store faults</h3><table><thead><tr><th>time</th><th>call</th>"
               f"<th>error</th></tr></thead><tbody>{faults}</tbody></table>"
               if faults else '<p class="note">No store fault.</p>')
    out.append("</section>")
    return "".join(out)


_SOURCES = {"checkpoint": "state from its checkpoint", "run_end": "state from run_end",
            "reducers": "patches folded with the graph's reducers",
            "patches": "patches applied key by key (pass the graph for reducers)"}


def _steps(view: RunView) -> str:
    out = ['<section id="steps"><h2>State after each step</h2><p class="note">Each step '
           "compared with the one before: green added or new, red removed, amber old.</p>"]
    for s in view.steps:
        head = (f'<h3 id="step-{s.leg}-{s.step}">leg {s.leg} · step {s.step} · '
                f"{escape(', '.join(s.nodes) or '(no task)')} "
                f'<span class="note">({_SOURCES.get(s.source, s.source)})</span></h3>')
        if s.state is None:
            out.append(head + '<p class="note">State not known (no initial state, no '
                       "checkpoint).</p>")
            continue
        if not s.changes:
            out.append(head + '<p class="note">No change.</p>')
            continue
        rows = "".join(
            f'<tr class="diff-row {c.kind}"><td class="v">{escape(c.path)}</td>'
            f'<td class="v before">{"" if c.kind == "added" else escape(value_text(c.before))}'
            f'</td><td class="v after">'
            f'{"" if c.kind == "removed" else escape(value_text(c.after))}</td></tr>'
            for c in s.changes)
        out.append(f'{head}<table class="diff"><thead><tr><th>path</th><th>before</th>'
                   f"<th>after</th></tr></thead><tbody>{rows}</tbody></table>")
    out.append("</section>")
    return "".join(out)


def _events(view: RunView) -> str:
    types = sorted({str(e.get("type")) for e in view.events})
    nodes = sorted({str(e.get("node")) for e in view.events if e.get("node")})
    options = "".join(f'<option value="{escape(t)}">{escape(t)}</option>' for t in types)
    node_options = "".join(f'<option value="{escape(n)}">{escape(n)}</option>' for n in nodes)
    rows = "".join(_event_row(e, leg, at) for e, leg, at in
                   zip(view.events, view.legs, view.offsets, strict=True))
    return ('<section id="events-section"><h2>Events</h2><div class="filters">'
            f'<label>type <select id="f-type"><option value="">all</option>{options}'
            f'</select></label><label>node <select id="f-node"><option value="">all</option>'
            f'{node_options}</select></label><label>text <input id="f-text" type="search">'
            f'</label><span class="note"><span id="shown">{len(view.events)}</span> of '
            f"{len(view.events)} shown</span></div>"
            '<div class="scroll"><table id="events"><thead><tr><th>seq</th><th>time</th>'
            "<th>leg</th><th>step</th><th>type</th><th>node</th><th>task</th><th>fields</th>"
            f"</tr></thead><tbody>{rows}</tbody></table></div></section>")


def _event_row(event: Mapping[str, Any], leg: int, at: float) -> str:
    kind = escape(str(event.get("type")))
    node = escape(str(event.get("node") or ""))
    return (f'<tr class="t-{kind}" data-type="{kind}" data-node="{node}"><td>'
            f'{escape(str(event.get("seq")))}</td><td>{at:g}s</td><td>{leg}</td>'
            f'<td>{escape(str(event.get("step")))}</td><td>{kind}</td><td>{node}</td>'
            f'<td>{escape(str(event.get("task_id") or ""))}</td>'
            f'<td class="v">{escape(event_detail(event))}</td></tr>')
