"""Whether a checkpoint can resume under a graph: the rules, in one place.

The runtime applies them on every resume (a failing rule is ``SnapshotMismatch``) and
``check_upgrade`` applies them ahead of time, so a test can ask "will my paused runs survive
this change?" and get the same answer production would.

Rules that need only the checkpoint and the new graph (graph id, nodes the checkpoint names,
state keys and their types, joins a run is waiting on, recorded routes) always apply. Rules
that compare with the graph the checkpoint was written under (effect classes of the nodes
whose results a resume replays or whose interrupt is pending) apply when that graph's
:class:`GraphContract` is known — a recorded history carries it.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from .._graph._builder import END, REPLAYED_EFFECTS, CompiledGraph
from .._records._checkpoint import FORMAT_VERSION, Checkpoint
from ..errors import GraphflowError
from ._merge import validate_state

__all__ = ["GraphContract", "Incompatibility", "state_adapters", "upgrade_problems"]


@dataclass(frozen=True)
class Incompatibility:
    """One reason a checkpoint cannot resume under a graph.

    Attributes:
        kind: a stable tag: ``graph_id``, ``format``, ``node_removed``, ``effect_changed``,
            ``key_removed``, ``key_type``, ``key_added``, ``join_changed``, ``route_removed``.
        subject: the node, key or join it concerns.
        message: what is wrong and what to do, in a sentence.
    """

    kind: str
    subject: str
    message: str

    def __str__(self) -> str:
        return self.message


def _type_text(tp: Any) -> str:
    """A readable, stable name of a type annotation (``list[str]``, ``int | None``)."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return repr(tp).replace("typing.", "")


@dataclass(frozen=True)
class GraphContract:
    """What a checkpoint relies on in the graph it was written under, as JSON data.

    Attributes:
        graph_id: the graph's name.
        revision: its structural revision.
        nodes: each node's effect class, in declared order.
        joins: each join as ``[sources, target]``.
        state: each state key's type, as text.
        reducers: the keys that have a reducer.
    """

    graph_id: str
    revision: str
    nodes: dict[str, str] = field(default_factory=dict)
    joins: list[list[Any]] = field(default_factory=list)
    state: dict[str, str] = field(default_factory=dict)
    reducers: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, graph: CompiledGraph) -> GraphContract:
        """The contract of ``graph``."""
        return cls(
            graph_id=graph.graph_id,
            revision=graph.revision,
            nodes={name: spec.effect for name, spec in graph.nodes.items()},
            joins=[[list(j.sources), j.target] for j in graph.joins],
            state={k: _type_text(info.annotation)
                   for k, info in graph.state_model.model_fields.items()},
            reducers=sorted(graph.reducers),
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (what a history file holds)."""
        return {"graph_id": self.graph_id, "revision": self.revision, "nodes": dict(self.nodes),
                "joins": [[list(s), t] for s, t in self.joins], "state": dict(self.state),
                "reducers": list(self.reducers)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraphContract:
        """Read the JSON form back."""
        return cls(graph_id=str(data["graph_id"]), revision=str(data["revision"]),
                   nodes=dict(data.get("nodes", {})), joins=list(data.get("joins", [])),
                   state=dict(data.get("state", {})), reducers=list(data.get("reducers", [])))


@functools.lru_cache(maxsize=256)
def state_adapters(model: type[BaseModel]) -> dict[str, TypeAdapter[Any]]:
    """A validator of each state key's type (its annotation and constraints), by key."""
    out: dict[str, TypeAdapter[Any]] = {}
    for key, info in model.model_fields.items():
        annotation: Any = info.annotation
        if info.metadata:
            annotation = typing.Annotated[(annotation, *info.metadata)]
        out[key] = TypeAdapter(annotation)
    return out


def _state_problems(cp: Checkpoint, graph: CompiledGraph,
                    old: GraphContract | None) -> list[Incompatibility]:
    problems: list[Incompatibility] = []
    fields = graph.state_model.model_fields
    for key in cp.state:
        if key not in fields:
            problems.append(Incompatibility(
                "key_removed", key,
                f"state key {key!r} was removed: checkpoint {cp.id} holds a value for it "
                f"({_short(cp.state[key])}) that a resume would drop; keep the key (it may "
                "become unused) until no paused run holds it"))
    adapters = state_adapters(graph.state_model)
    for key, info in fields.items():
        if key not in cp.state:
            if info.is_required():
                problems.append(Incompatibility(
                    "key_added", key,
                    f"state key {key!r} is new and has no default: checkpoint {cp.id} has no "
                    "value for it; give the field a default"))
            continue
        try:
            adapters[key].validate_python(cp.state[key])
        except ValidationError as exc:
            was = "" if old is None or key not in old.state else f" (was {old.state[key]})"
            first = exc.errors()[0]["msg"] if exc.errors() else str(exc)
            problems.append(Incompatibility(
                "key_type", key,
                f"state key {key!r} changed type to {_type_text(info.annotation)}{was}: "
                f"checkpoint {cp.id} holds {_short(cp.state[key])}, which does not fit "
                f"({first}); accept the old values too (a union) or migrate them with "
                "store.fork(checkpoint_id, patch_state=...)"))
    if not problems:
        try:
            validate_state(graph, cp.state)
        except GraphflowError as exc:
            problems.append(Incompatibility(
                "state", graph.state_model.__name__,
                f"checkpoint {cp.id} state does not fit the schema: {exc}"))
    return problems


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def upgrade_problems(
    cp: Checkpoint, graph: CompiledGraph, old: GraphContract | None = None
) -> list[Incompatibility]:
    """Every reason ``cp`` cannot resume under ``graph`` (empty: it can).

    Args:
        cp: the checkpoint a resume would start from.
        graph: the graph it would resume under.
        old: the contract of the graph ``cp`` was written under, when known; it adds the
            rules that compare effect classes.
    """
    out: list[Incompatibility] = []
    if cp.format_version != FORMAT_VERSION:
        out.append(Incompatibility(
            "format", cp.id, f"checkpoint {cp.id} has format_version {cp.format_version}; this "
            f"build reads {FORMAT_VERSION}"))
    if graph.graph_id != cp.graph_id:
        out.append(Incompatibility(
            "graph_id", cp.graph_id, f"checkpoint {cp.id} is of graph {cp.graph_id!r}, not "
            f"{graph.graph_id!r}"))
        return out
    nodes = graph.nodes
    done = set(cp.completed)
    pending = {i.task_id for i in cp.interrupts}
    reported: set[str] = set()
    for task in cp.tasks:
        if task.node in nodes or task.task_id in done:
            continue
        reported.add(task.node)
        what = ("has a pending interrupt in" if task.task_id in pending
                else "is paused before")
        out.append(Incompatibility(
            "node_removed", task.node,
            f"run {cp.run_id} {what} node {task.node!r} (task {task.task_id}), which the "
            "graph no longer has (removed or renamed): keep the node, or finish or migrate "
            "the paused runs first"))
    for output in cp.completed.values():
        node = output.node
        if node not in nodes:
            if node not in reported:
                reported.add(node)
                out.append(Incompatibility(
                    "node_removed", node,
                    f"checkpoint {cp.id} holds the result of node {node!r} (task "
                    f"{output.task_id}) for a resume to replay, and the graph no longer has "
                    "that node (removed or renamed)"))
            continue
        for key in sorted(set(output.patch or {}) - graph.keys):
            out.append(Incompatibility(
                "key_removed", key,
                f"the recorded result of node {node!r} writes state key {key!r}, which the "
                "graph no longer has; a resume would apply that result"))
        targets = set(graph.allowed_targets(node)) | {END}
        for target in output.goto or ():
            if target not in targets:
                out.append(Incompatibility(
                    "route_removed", f"{node}->{target}",
                    f"the recorded result of node {node!r} routes to {target!r}, which is no "
                    "longer one of its targets (edges, branches or destinations)"))
        if output.expand is not None and output.expand.get("node") not in nodes:
            out.append(Incompatibility(
                "node_removed", str(output.expand.get("node")),
                f"the recorded result of node {node!r} expands into node "
                f"{output.expand.get('node')!r}, which the graph no longer has"))
    for name in dict.fromkeys(cp.visited):
        if name not in nodes and name not in reported:
            reported.add(name)
            out.append(Incompatibility(
                "node_removed", name,
                f"checkpoint {cp.id} names node {name!r} (visited), which the graph does not "
                "have (removed or renamed)"))
    joins = {j.key: j for j in graph.joins}
    for key, arrived in cp.arrivals.items():
        if not arrived or key in joins:
            continue
        target = key.rsplit("->", 1)[-1]
        now = [j.key for j in graph.joins if j.target == target]
        out.append(Incompatibility(
            "join_changed", key,
            f"run {cp.run_id} waits at join {key} ({sorted(arrived)} arrived); the join's "
            f"inputs changed (the graph's joins into {target!r}: {now or 'none'}), so the "
            "run would never (or wrongly) continue past it"))
    if old is not None:
        replayed = {o.node for o in cp.completed.values()}
        asking = {i.node for i in cp.interrupts}
        for name in sorted(replayed | asking):
            if name not in nodes or name not in old.nodes:
                continue
            before, after = old.nodes[name], nodes[name].effect
            if before == after:
                continue
            if name in asking:
                out.append(Incompatibility(
                    "effect_changed", name,
                    f"node {name!r} has a pending interrupt and changed effect class "
                    f"{before} -> {after}: the answer the run waits for was asked under the "
                    "old contract"))
            elif before in REPLAYED_EFFECTS and after not in REPLAYED_EFFECTS:
                out.append(Incompatibility(
                    "effect_changed", name,
                    f"node {name!r} completed in the halted step as {before} and is now "
                    f"{after}: on resume it would re-run instead of replaying its recorded "
                    "result, so its side effect would happen twice"))
    out.extend(_state_problems(cp, graph, old))
    return out
