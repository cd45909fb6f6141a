"""The page of two runs that should have been the same (a divergence), side by side.

The whole-run checkers (``explore``, ``check_determinism``, the interrupt/resume equivalence,
crash recovery, ``assert_replays``) compare one run with another; when they differ, this page
shows both: each run's path on the graph and its events, with the first differing event
marked (``first-diff``) in both columns and every other differing row tinted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from ._assets import document
from ._graph_svg import graph_svg
from ._model import read_run
from ._page import event_detail

if TYPE_CHECKING:
    from .._graph._builder import CompiledGraph

__all__ = ["first_difference", "pair_section", "render_pair_html"]

Events = Sequence[Mapping[str, Any]]


def _lines(events: Events) -> list[str]:
    """Each event as sorted JSON with the run's token (``run-<token>``, also in thread,
    checkpoint and task ids) replaced, so two runs with other ids still compare."""
    run = next((str(e.get("run_id")) for e in events if e.get("run_id")), "")
    token = run[4:] if run.startswith("run-") else run
    out = []
    for e in events:
        line = json.dumps(e, sort_keys=True, default=str)
        out.append(line.replace(token, "<run>") if token else line)
    return out


def first_difference(left: Events, right: Events) -> int | None:
    """The index of the first event that differs (one past the shorter list when one is a
    prefix of the other), or ``None`` when both are the same."""
    a, b = _lines(left), _lines(right)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def render_pair_html(
    left: Events,
    right: Events,
    *,
    verdict: str,
    labels: tuple[str, str] = ("expected", "got"),
    first: int | None = None,
    graph: CompiledGraph | None = None,
    title: str | None = None,
) -> str:
    """Two runs side by side as a self-contained HTML page.

    Args:
        left, right: the two runs' events (wire form).
        verdict: what the checker said (shown at the top).
        labels: what each run is (``"seed 0 (baseline)"``, ``"seed 7"``).
        first: the first differing event's index, when the checker knows it (else it is
            found by comparing the events, run ids aside).
        graph: the compiled graph, to draw every node and edge.
        title: the page's title.
    """
    name = title or f"{labels[0]} vs {labels[1]}"
    return document(name, f"<header><h1>{escape(name)}</h1></header><main>"
                    + pair_section(left, right, verdict=verdict, labels=labels, first=first,
                                   graph=graph) + "</main>")


def pair_section(left: Events, right: Events, *, verdict: str, labels: tuple[str, str],
                 first: int | None = None, graph: CompiledGraph | None = None,
                 ident: str = "pair") -> str:
    """The side-by-side section (without the document around it)."""
    if first is None:
        first = first_difference(left, right)
    a, b = _lines(left), _lines(right)
    where = ("no event differs" if first is None else
             f'the first differing event is <a href="#{ident}-first-0">#{first}</a>')
    columns = []
    for side, (events, label) in enumerate(((left, labels[0]), (right, labels[1]))):
        view = read_run(events, graph=graph)
        ran = [str(e.get("node")) for e in events if e.get("type") == "node_start"]
        rows = []
        for i, e in enumerate(events):
            cls = ("first-diff" if i == first else
                   "differs" if i >= len(a) or i >= len(b) or a[i] != b[i] else "same")
            anchor = f' id="{ident}-first-{side}"' if i == first else ""
            rows.append(f'<tr class="{cls}"{anchor}><td>{i}</td>'
                        f'<td>{escape(str(e.get("type")))}</td>'
                        f'<td>{escape(str(e.get("node") or ""))}</td>'
                        f'<td class="v">{escape(event_detail(e))}</td></tr>')
        if first is not None and first >= len(events):
            rows.append(f'<tr class="first-diff" id="{ident}-first-{side}"><td>{first}</td>'
                        '<td colspan="3">(no more events: the stream ends here)</td></tr>')
        columns.append(
            f'<div class="run-side" data-side="{side}"><h3>{escape(label)} '
            f'<span class="status {escape(view.status)}">{escape(view.status)}</span></h3>'
            f"{graph_svg(graph, view.path, ran=ran, halted=view.halted, ident=f'{ident}{side}')}"
            '<div class="scroll"><table class="pair-events"><thead><tr><th>#</th><th>type</th>'
            f'<th>node</th><th>fields</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
            "</div></div>")
    return (f'<section id="{ident}" class="divergence"><h2>Two runs that should be the same'
            f'</h2><div class="verdict">{escape(verdict)}</div><p>{where} (marked red in '
            "both columns; amber: other rows that differ).</p>"
            f'<div class="pair">{"".join(columns)}</div></section>')
