"""Checking a graph's structure before it compiles: every problem, listed at once (SPEC §1).

Unknown nodes, reserved names, joins a failure route starves, nodes unreachable from ``START``
and nodes with no path to ``END``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ._names import END, START

if TYPE_CHECKING:
    from ._specs import DeclaredGraph

__all__ = ["reachable", "structure_problems"]


def structure_problems(graph: DeclaredGraph, before: list[str], after: list[str],
                       on_timeout: object = None) -> list[str]:
    """Every structural problem of ``graph`` compiled with breakpoints ``before``/``after``
    and the timeout route ``on_timeout`` (a node name counts as reachable: any task asking
    a question with a deadline may go there)."""
    problems = list(graph._problems)
    nodes = graph._nodes
    timeout_node = on_timeout if isinstance(on_timeout, str) else None
    if timeout_node is not None and timeout_node not in nodes:
        problems.append(f"compile(on_timeout={timeout_node!r}): unknown node "
                        f"{timeout_node!r}; name the node an expired question goes to")
        timeout_node = None
    for what, names in (("interrupt_before", before), ("interrupt_after", after)):
        for name in names:
            if name not in nodes:
                problems.append(f"compile({what}=...): unknown node {name!r}")
    keys = set(graph.state.model_fields)

    def known(name: str, where: str) -> bool:
        if name in nodes or name == END:
            return True
        problems.append(f"{where}: unknown node {name!r}")
        return False

    for src, dst in graph._edges:
        where = f"edge {src!r} -> {dst!r}"
        if src == END:
            problems.append(f"{where}: END has no outgoing edges")
        elif src != START:
            known(src, where)
        if dst == START:
            problems.append(f"{where}: START cannot be an edge target")
        else:
            known(dst, where)
    for j in graph._joins:
        where = f"join {list(j.sources)} -> {j.target!r}"
        for s in j.sources:
            if s in (START, END):
                problems.append(f"{where}: {s!r} cannot be a join source")
            else:
                known(s, where)
        known(j.target, where)
    for b in graph._branches:
        where = f"branch from {b.source!r}"
        if b.source != START:
            known(b.source, where)
        if not b.targets:
            problems.append(f"{where}: no targets; pass a mapping or a list of nodes")
        for t in b.targets:
            known(t, f"{where}: branch target")
    for spec in nodes.values():
        if spec.on_error is not None:
            known(spec.on_error, f"node {spec.name!r} on_error")
        for d in spec.destinations:
            known(d, f"node {spec.name!r} destinations")
        if spec.writes is not None:
            for k in sorted(spec.writes - keys):
                problems.append(f"node {spec.name!r} writes: unknown state key {k!r}")

    succ: dict[str, list[str]] = {}
    for src, dst in graph._edges:
        succ.setdefault(src, []).append(dst)
    for b in graph._branches:
        succ.setdefault(b.source, []).extend(b.targets)
    for j in graph._joins:
        for s in j.sources:
            succ.setdefault(s, []).append(j.target)
    for spec in nodes.values():
        if spec.on_error:
            succ.setdefault(spec.name, []).append(spec.on_error)
        succ.setdefault(spec.name, []).extend(spec.destinations)

    for j in graph._joins:
        for s in j.sources:
            source = nodes.get(s)
            if source is None or source.on_error is None or source.on_error not in nodes:
                continue
            if s not in reachable(source.on_error, succ):
                problems.append(
                    f"node {s!r} on_error {source.on_error!r}: {s!r} feeds join "
                    f"{list(j.sources)} -> {j.target!r}, but a failure routed to "
                    f"{source.on_error!r} never arrives there and nothing leads back to "
                    f"{s!r}, so the join would starve (JoinStarved) after the fallback "
                    f"ran; route the failure back to {s!r} (a retry loop), give {s!r} a "
                    "Retry instead, or join on the fallback's result in a node of its own"
                )
    if not succ.get(START):
        problems.append("START: the graph has no entry; add g.edge(START, <first node>)")
    if timeout_node is not None:
        succ[START] = [*succ[START], timeout_node]  # for reachability only
    reach = reachable(START, succ)
    for name in nodes:
        if name not in reach:
            problems.append(f"node {name!r}: unreachable from START")
    pred: dict[str, list[str]] = {}
    for src, dsts in succ.items():
        for d in dsts:
            pred.setdefault(d, []).append(src)
    finishing = reachable(END, pred)
    for name in nodes:
        if name in reach and name not in finishing:
            problems.append(f"node {name!r}: no path to END")
    return problems


def reachable(start: str, succ: Mapping[str, Sequence[str]]) -> set[str]:
    """Every node reachable from ``start`` in the successor table ``succ`` (itself too)."""
    seen = {start}
    todo = [start]
    while todo:
        for nxt in succ.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
