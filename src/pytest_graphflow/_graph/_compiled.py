"""``CompiledGraph``: a validated graph, ready to run (SPEC §1)."""

from __future__ import annotations

import copy
import hashlib
import json
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ._names import END, START
from ._primitives import POLICIES, CheckpointPolicy, Reducer
from ._schema import StateCodec

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ._deadlines import TimeoutAnswer
    from ._middleware import Guardrail, Middleware
    from ._specs import Branch, DeclaredGraph, Join, NodeSpec

__all__ = ["CompiledGraph"]


_CODECS: weakref.WeakKeyDictionary[type, tuple[object, StateCodec]] = \
    weakref.WeakKeyDictionary()
"""Each state model's codec, with the fields it was made from: graphs of one model share it
(it is a function of the model alone; a generated graph's checks compile many graphs over
few models)."""


def _codec(model: type[BaseModel], keys: frozenset[str], reducers: dict[str, Reducer]
           ) -> StateCodec:
    """The codec of ``model``, made once per model (again if its fields were rebuilt)."""
    fields = model.__pydantic_fields__
    found = _CODECS.get(model)
    if found is not None and found[0] is fields:
        return found[1]
    codec = StateCodec(model)
    codec.checked_on_write = frozenset(
        k for k in keys if k not in reducers or reducers[k].pure)
    if model.__pydantic_complete__:
        _CODECS[model] = (fields, codec)
    return codec


class CompiledGraph:
    """A validated graph, ready to run. Build one with :meth:`Graph.compile`.

    Attributes:
        graph_id: the graph's name.
        revision: a stable hash of the structure; checkpoints record it.
        state_model: the pydantic state model.
        checkpoint_policy: ``every_step``, ``on_halt`` or ``never``.
        interrupt_before: nodes every run pauses before (breakpoints).
        interrupt_after: nodes every run pauses after (breakpoints).
        middleware: the graph's ``Middleware``, outermost first (not part of ``revision``).
        guardrails: the graph's ``Guardrail`` checks, in order (not part of ``revision``).
        on_timeout: what an expired question does (``compile(on_timeout=...)``): a node
            name, a ``TimeoutAnswer``, or ``None`` (the run fails with ``DeadlineExpired``);
            not part of ``revision``.
    """

    def __init__(self, graph: DeclaredGraph, checkpoint_policy: str) -> None:
        self.on_timeout: str | TimeoutAnswer | None = None
        self.interrupt_before: frozenset[str] = frozenset()
        self.interrupt_after: frozenset[str] = frozenset()
        self.graph_id = graph.graph_id
        self.state_model = graph.state
        self.checkpoint_policy = checkpoint_policy
        self.nodes: dict[str, NodeSpec] = dict(graph._nodes)
        self.middleware: tuple[Middleware, ...] = graph.middleware
        self.guardrails: tuple[Guardrail, ...] = graph.guardrails
        self.keys: frozenset[str] = frozenset(graph.state.model_fields)
        self.reducers: dict[str, Reducer] = dict(graph._reducers)
        self.joins: tuple[Join, ...] = tuple(graph._joins)
        edges: dict[str, list[str]] = {}
        for src, dst in graph._edges:
            if dst not in edges.setdefault(src, []):
                edges[src].append(dst)
        self.edges: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in edges.items()}
        branches: dict[str, list[Branch]] = {}
        for b in graph._branches:
            branches.setdefault(b.source, []).append(b)
        self.branches: dict[str, tuple[Branch, ...]] = {k: tuple(v) for k, v in branches.items()}
        joins_from: dict[str, list[Join]] = {}
        for j in self.joins:
            for s in j.sources:
                joins_from.setdefault(s, []).append(j)
        self.joins_from: dict[str, tuple[Join, ...]] = {k: tuple(v) for k, v in joins_from.items()}
        self.every_step = checkpoint_policy == "every_step"
        self.entry: tuple[str, ...] | None = None if START in self.branches else tuple(
            sorted(dict.fromkeys(t for t in self.edges.get(START, ()) if t != END),
                   key=lambda n: self.nodes[n].index))
        """The nodes a run starts at, in declared order, when ``START`` has static edges
        only (``None`` when a route picks them)."""
        self.revision = self._revision()
        self.codec = _codec(graph.state, self.keys, self.reducers)

    def _revision(self) -> str:
        structure = {
            "graph_id": self.graph_id,
            "state": sorted(self.keys),
            "reducers": sorted(self.reducers),
            "nodes": [
                [n.name, n.effect, sorted(n.writes) if n.writes is not None else None,
                 n.on_error, list(n.destinations), n.checkpoint,
                 None if n.retry is None else [n.retry.attempts, n.retry.backoff, n.retry.factor,
                                               n.retry.max_delay]]
                for n in self.nodes.values()
            ],
            "edges": sorted([s, d] for s, ds in self.edges.items() for d in ds),
            "joins": sorted([list(j.sources), j.target] for j in self.joins),
            "branches": sorted([b.source, list(b.targets)] for bs in self.branches.values()
                               for b in bs),
        }
        digest = hashlib.sha256(json.dumps(structure, sort_keys=True).encode()).hexdigest()
        return f"rev-{digest[:16]}"

    def with_policy(self, checkpoint_policy: CheckpointPolicy) -> CompiledGraph:
        """The same graph (same structure and ``revision``) under another checkpoint policy.

        Raises:
            InvalidArgument: for an unknown policy.
        """
        if checkpoint_policy not in POLICIES:
            raise InvalidArgument(f"with_policy({checkpoint_policy!r}): use one of "
                                  f"{sorted(POLICIES)}")
        if checkpoint_policy == self.checkpoint_policy:
            return self
        twin = copy.copy(self)
        twin.checkpoint_policy = checkpoint_policy
        twin.every_step = checkpoint_policy == "every_step"
        return twin

    def step(self, runtime: Any, input: Any = None, *, run_id: str | None = None,
             resume: Any = None, **options: Any) -> Any:
        """Run one superstep of this graph on ``runtime`` (a ``GraphRuntime``); see
        ``GraphRuntime.step``: start a run, or continue ``run_id`` by one superstep.

        Returns:
            the ``GraphResult`` after that superstep (``interrupted`` with a ``breakpoint``
            while the run has more to do).
        """
        return runtime.step(self, input, run_id=run_id, resume=resume, **options)

    def allowed_targets(self, node: str) -> tuple[str, ...]:
        """Every target ``node`` may reach: static edges, branch targets, destinations."""
        spec = self.nodes[node]
        out = list(self.edges.get(node, ()))
        for b in self.branches.get(node, ()):
            out.extend(b.targets)
        out.extend(spec.destinations)
        return tuple(dict.fromkeys(out))

    def mermaid(self, *, path: Sequence[tuple[str, str]] | None = None) -> str:
        """The graph as a Mermaid flowchart; ``path`` edges taken by a run are drawn bold."""
        from ._mermaid import render

        return render(self, path=path)

    def __repr__(self) -> str:
        return (f"<CompiledGraph {self.graph_id!r} {self.revision} "
                f"nodes={list(self.nodes)}>")
