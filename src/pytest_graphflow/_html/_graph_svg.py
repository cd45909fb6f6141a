"""The graph as an SVG drawing: the Mermaid diagram's nodes and edges, laid out in rows.

The edges are the ones ``CompiledGraph.mermaid()`` draws (:func:`~.._graph._mermaid.edges`),
in rows by distance from ``START`` (``END`` last); an edge back to an earlier row is drawn as
an arc on the right. The edges a run took are bold (class ``taken``), the nodes it ran are
filled, and the nodes where it paused or failed are red (class ``halt``). Without the graph
(a history file whose graph cannot be imported), the drawing is the edges the run took.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._graph._builder import CompiledGraph

__all__ = ["graph_svg"]

START, END = "__start__", "__end__"
_ROW, _GAP, _BOX_H = 76, 28, 34


def _label(name: str, graph: CompiledGraph | None = None) -> str:
    """What a node's box says: its name, and its effect class unless ``pure``."""
    text = {START: "START", END: "END"}.get(name, name)
    if graph is not None and name in graph.nodes and graph.nodes[name].effect != "pure":
        text += f" ({graph.nodes[name].effect})"
    return text


def _width(text: str) -> float:
    return max(64.0, 7.4 * len(text) + 26)


def graph_svg(
    graph: CompiledGraph | None,
    path: Sequence[tuple[str, str]],
    *,
    ran: Iterable[str] = (),
    halted: Iterable[str] = (),
    ident: str = "g",
) -> str:
    """The drawing as an ``<svg>`` element (every name escaped).

    Args:
        graph: the compiled graph, or ``None`` to draw only the edges taken.
        path: the ``(source, target)`` edges the run took.
        ran: the nodes the run started.
        halted: the nodes where it paused or failed.
        ident: a prefix for the drawing's ids (two drawings on one page need two).
    """
    taken = set(path)
    drawn: list[tuple[str, str, str, str | None]] = []  # source, target, kind, label
    if graph is not None:
        from .._graph._mermaid import edges

        nodes = [START, *graph.nodes, END]
        drawn = [(e.source, e.target, e.kind, e.label) for e in edges(graph)]
    else:
        nodes = [START]
    for source, target in path:  # edges taken that the graph does not draw (goto, Expand)
        for name in (source, target):
            if name not in nodes:
                nodes.append(name)
        if not any(d[0] == source and d[1] == target for d in drawn):
            drawn.append((source, target, "dynamic" if graph is not None else "static", None))
    if END in nodes:
        nodes.remove(END)
        nodes.append(END)
    layer = _layers(nodes, drawn)
    pos, width, height = _place({n: _label(n, graph) for n in nodes}, layer)
    out = [f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
           f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img">',
           f'<defs><marker id="{ident}-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
           'markerUnits="userSpaceOnUse" markerWidth="10" markerHeight="10" '
           'orient="auto-start-reverse">'
           '<path d="M0,0L10,5L0,10z" fill="context-stroke"/></marker></defs>']
    for source, target, kind, label in drawn:
        out.append(_edge(pos, layer, source, target, kind, label, (source, target) in taken,
                         ident))
    ran_set, halt_set = set(ran) | {s for s, _ in taken} | {t for _, t in taken}, set(halted)
    for name in nodes:
        x, y, w = pos[name]
        classes = ["node"]
        if name in (START, END):
            classes.append("terminal")
        if name in ran_set:
            classes.append("ran")
        if name in halt_set:
            classes.append("halt")
        rx = _BOX_H / 2 if name in (START, END) else 6
        text = _label(name, graph)
        out.append(f'<g class="{" ".join(classes)}" data-node="{escape(name)}">'
                   f'<title>{escape(text)}</title>'
                   f'<rect x="{x - w / 2:.1f}" y="{y:.1f}" width="{w:.1f}" height="{_BOX_H}" '
                   f'rx="{rx:.0f}"/><text x="{x:.1f}" y="{y + _BOX_H / 2 + 5:.1f}">'
                   f'{escape(text)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def _layers(nodes: list[str], drawn: list[tuple[str, str, str, str | None]]) -> dict[str, int]:
    """Rows by breadth-first distance from START; END below every other row."""
    out = {START: 0}
    frontier = [START]
    while frontier:
        following = []
        for source in frontier:
            for s, t, _, _ in drawn:
                if s == source and t not in out and t != END:
                    out[t] = out[source] + 1
                    following.append(t)
        frontier = following
    deepest = max(out.values())
    for name in nodes:
        if name not in out and name != END:
            deepest += 1
            out[name] = deepest
    out[END] = deepest + 1
    return out


def _place(labels: dict[str, str], layer: dict[str, int]
           ) -> tuple[dict[str, tuple[float, float, float]], float, float]:
    rows: dict[int, list[str]] = {}
    for name in labels:
        rows.setdefault(layer[name], []).append(name)
    widths = {r: sum(_width(labels[n]) for n in names) + _GAP * (len(names) - 1)
              for r, names in rows.items()}
    total = max(widths.values()) + 140  # room for back arcs on the right
    pos: dict[str, tuple[float, float, float]] = {}
    for r, names in rows.items():
        x = (total - 100 - widths[r]) / 2
        for name in names:
            w = _width(labels[name])
            pos[name] = (x + w / 2, 16 + r * _ROW, w)
            x += w + _GAP
    return pos, total, 16 + (max(rows) + 1) * _ROW


def _edge(pos: dict[str, tuple[float, float, float]], layer: dict[str, int], source: str,
          target: str, kind: str, label: str | None, taken: bool, ident: str) -> str:
    sx, sy, sw = pos[source]
    tx, ty, tw = pos[target]
    if layer[target] > layer[source]:
        x1, y1, x2, y2 = sx, sy + _BOX_H, tx, ty
        mid = (y1 + y2) / 2
        d = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}"
        lx, ly = x1 + (x2 - x1) * 0.3 + 4, y1 + (y2 - y1) * 0.3  # near the source: labels
        # of edges that meet at one target (a join, a branch's routes) do not overlap
    else:  # back to an earlier (or the same) row: an arc on the right
        x1, y1 = sx + sw / 2, sy + _BOX_H / 2
        x2, y2 = tx + tw / 2, ty + _BOX_H / 2
        bend = max(x1, x2) + 50 + 10 * abs(layer[source] - layer[target])
        d = f"M{x1:.1f},{y1:.1f} C{bend:.1f},{y1:.1f} {bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
        lx, ly = bend - 12, (y1 + y2) / 2
    cls = f"edge {kind}" + (" taken" if taken else "")
    text = (f'<text x="{lx:.1f}" y="{ly:.1f}">{escape(label)}</text>' if label else "")
    return (f'<g class="{cls}" data-source="{escape(source)}" data-target="{escape(target)}">'
            f'<path d="{d}" marker-end="url(#{ident}-arrow)"/>{text}</g>')
