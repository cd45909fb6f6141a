"""Mermaid diagrams of compiled graphs (``CompiledGraph.mermaid()``, ``graphflow mermaid``).

The diagram is a ``flowchart TD`` in declared order, so the same graph always gives the same
text (fit for snapshots):

* ``START`` and ``END`` are stadium-shaped terminals; a node that is not ``pure`` shows its
  effect class after its name (``charge (external)``);
* static edges are solid; conditional (branch) edges are dashed and labelled with their route
  key; the edges of a join are drawn from each source into the join node, labelled ``join``;
  failure routes are labelled ``on_error``; run-time destinations (``Command.goto``,
  ``Expand``) are dotted;
* the edges of ``path`` (``(source, target)`` pairs a run took, e.g. from its
  ``edge_transition`` events) are drawn bold.

:func:`edges` is the same list of edges for other drawings (the HTML run page's SVG).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._names import END, START

if TYPE_CHECKING:
    from ._specs import DrawnGraph

__all__ = ["Edge", "edges", "render"]

_BOLD = "stroke-width:4px"
_DASHED = "stroke-dasharray:6 4"
_DOTTED = "stroke-dasharray:2 3"


@dataclass(frozen=True)
class Edge:
    """One drawn edge: its ends, Mermaid arrow, label and style (``None``: a plain line)."""

    source: str
    target: str
    arrow: str
    label: str | None = None
    style: str | None = None

    @property
    def kind(self) -> str:
        """``"static"``, ``"branch"`` (dashed), ``"dynamic"`` (dotted: ``goto``/``Expand``),
        ``"error"`` (a failure route) or ``"join"``."""
        if self.style == _DASHED:
            return "branch"
        if self.style == _DOTTED:
            return "dynamic"
        return {"on_error": "error", "join": "join"}.get(self.label or "", "static")


def edges(graph: DrawnGraph) -> list[Edge]:
    """Every edge of ``graph`` as the Mermaid diagram draws it, in the diagram's order."""
    return _edges(graph)


def render(graph: DrawnGraph, *, path: Sequence[tuple[str, str]] | None = None) -> str:
    """The graph as a Mermaid ``flowchart TD``.

    Args:
        graph: the compiled graph.
        path: ``(source, target)`` pairs a run took (``"__start__"``/``"__end__"`` for START
            and END); every drawn edge between such a pair is styled bold.

    Returns:
        The diagram's text, one statement a line, without a trailing newline.
    """
    ids = _node_ids(graph)
    lines = ["flowchart TD", f"    {ids[START]}([START])"]
    for name, spec in graph.nodes.items():
        label = name if spec.effect == "pure" else f"{name} ({spec.effect})"
        lines.append(f'    {ids[name]}["{label}"]')
    lines.append(f"    {ids[END]}([END])")

    edges = _edges(graph)
    for edge in edges:
        label = "" if edge.label is None else f'|"{_escape(edge.label)}"|'
        lines.append(f"    {ids[edge.source]} {edge.arrow}{label} {ids[edge.target]}")

    taken = set(path or ())
    styles: dict[str, list[int]] = {}
    for index, edge in enumerate(edges):
        parts = [p for p in (edge.style, _BOLD if (edge.source, edge.target) in taken else None)
                 if p is not None]
        if parts:  # one linkStyle per edge: a later one would replace an earlier one
            styles.setdefault(",".join(parts), []).append(index)
    for style, indexes in styles.items():
        lines.append(f"    linkStyle {','.join(map(str, indexes))} {style}")
    return "\n".join(lines)


def _node_ids(graph: DrawnGraph) -> dict[str, str]:
    """Mermaid-safe ids: ``START``, ``END`` and ``n_<name>`` (deduplicated after escaping)."""
    ids = {START: "START", END: "END"}
    used = set(ids.values())
    for name in graph.nodes:
        base = "n_" + re.sub(r"\W", "_", name)
        candidate, n = base, 1
        while candidate in used:
            n += 1
            candidate = f"{base}_{n}"
        used.add(candidate)
        ids[name] = candidate
    return ids


def _edges(graph: DrawnGraph) -> list[Edge]:
    """Every edge to draw, in declared order: per source (START first, then nodes) its static
    edges, branches, failure route and destinations; then the joins."""
    out: list[Edge] = []
    drawn: set[tuple[str, str]] = set()
    for source in (START, *graph.nodes):
        for target in graph.edges.get(source, ()):
            out.append(Edge(source, target, "-->"))
            drawn.add((source, target))
        for branch in graph.branches.get(source, ()):
            for target, keys in _route_keys(branch.mapping, branch.targets).items():
                out.append(Edge(source, target, "-.->", ", ".join(keys), _DASHED))
                drawn.add((source, target))
        spec = graph.nodes.get(source)
        if spec is None:
            continue
        if spec.on_error is not None:
            out.append(Edge(source, spec.on_error, "-->", "on_error"))
            drawn.add((source, spec.on_error))
        for target in spec.destinations:
            if (source, target) not in drawn:
                out.append(Edge(source, target, "-.->", None, _DOTTED))
                drawn.add((source, target))
    for join in graph.joins:
        for source in join.sources:
            out.append(Edge(source, join.target, "-->", "join"))
    return out


def _route_keys(
    mapping: Mapping[Hashable, str] | None, targets: tuple[str, ...]
) -> dict[str, list[str]]:
    """Each branch target with the route keys that pick it (the target's name for a list)."""
    keys: dict[str, list[str]] = {t: [] for t in targets}
    if mapping is not None:
        for key, target in mapping.items():
            keys[target].append(_key_text(key))
    else:
        for target in targets:
            keys[target].append(target)
    return keys


def _key_text(key: Hashable) -> str:
    return key if isinstance(key, str) else repr(key)


def _escape(text: str) -> str:
    """Text safe inside a quoted Mermaid label."""
    for char, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        text = text.replace(char, code)
    return text
