"""The Hypothesis strategies behind :mod:`pytest_graphflow.strategies`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from typing import Any

from hypothesis import strategies as st

try:  # the choice sequence's own draws (see _chooser)
    from hypothesis.internal.conjecture.data import ConjectureData as _Data
except ImportError:  # pragma: no cover - a Hypothesis without it: strategies only
    _Data = None  # type: ignore[assignment,misc]
try:  # the span label Hypothesis's mutator leaves alone (see _nodes_in_spans)
    from hypothesis.internal.conjecture.data import UNIQUE_COLLECTION_LABEL as _UNMUTATED
except ImportError:  # pragma: no cover - a Hypothesis without it: the nodes are mutated
    _UNMUTATED = None  # type: ignore[assignment]

from ..._stores._plan import FaultPlan
from ..._stores.faults._faults import Fault
from ...errors import InvalidArgument
from ._genspec import (
    Failure,
    GraphSpec,
    JoinSpec,
    PlannedFailure,
    SpecNode,
    reached,
)
from ._instrument import Schedule

__all__ = [
    "Failure",
    "GraphSpec",
    "JoinSpec",
    "PlannedFailure",
    "Schedule",
    "SpecNode",
    "fault_plans",
    "graph_inputs",
    "graphs",
    "resume_answers",
    "schedules",
]

_EFFECTS = ("pure", "read", "write", "external", "human")
_POLICIES = ("every_step", "on_halt", "never")


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (
        high is not None and value > high
    ):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise InvalidArgument(f"{name}={value!r} must be an int {bound}")
    return value


# --------------------------------------------------------------------------- graphs


class _Builder:
    """The graph while it is drawn (mutable); ``freeze()`` gives the :class:`GraphSpec`."""

    def __init__(self, reducers: bool, min_nodes: int = 1, max_nodes: int = 6,
                 flags: dict[str, bool] | None = None) -> None:
        self.reducers = reducers
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.flags = flags or {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.entry: list[str] = []
        self.joins: list[JoinSpec] = []
        self.incoming: dict[str, str] = {}
        self.parent: dict[str, str | None] = {}
        self.loop_body: set[str] = set()
        self.join_sources: set[str] = set()

    def keys(self) -> list[str]:
        out = ["x"]
        out += [f"v_{n}" for n, d in self.nodes.items() if d["writes"]]
        out += [f"c_{n}" for n, d in self.nodes.items() if d["route"] == "loop"]
        if self.reducers:
            out.append("log")
        return out

    def certain(self, name: str) -> bool:
        """Whether ``name`` runs exactly once in every run that gets past it (a join source)."""
        if name in self.loop_body:
            return False
        kind = self.incoming[name]
        if kind in ("entry", "join"):
            return True
        if kind != "child":
            return False
        p = self.parent[name]
        assert p is not None
        d = self.nodes[p]
        return d["route"] == "static" and d["on_error"] is None and self.certain(p)

    def spec(self, policy: str = "every_step") -> GraphSpec:
        # The node dicts' lists (reads, interrupts, children) become tuples.
        nodes = tuple(SpecNode(**{**d, "reads": tuple(d["reads"]),
                                  "interrupts": tuple(d["interrupts"]),
                                  "children": tuple(d["children"])})
                      for d in self.nodes.values())
        return GraphSpec(nodes=nodes, entry=tuple(self.entry), joins=tuple(self.joins),
                         reducers=self.reducers, checkpoint_policy=policy)

    def descendants(self, start: str) -> set[str]:
        """Nodes reachable from ``start`` so far (itself included), as :func:`descendants`
        gives for the spec, without building one."""
        return reached(start, ((n, d["children"], d["loop_to"], d["expand_to"], d["on_error"])
                               for n, d in self.nodes.items()), self.joins)

    def ancestors(self, name: str) -> list[str]:
        """``name`` and its single-parent ancestors, nearest first."""
        out = [name]
        p = self.parent.get(name)
        while p is not None:
            out.append(p)
            p = self.parent.get(p)
        return out


def _new_node(name: str) -> dict[str, Any]:
    return {
        "name": name, "effect": "pure", "reads": [], "writes": False, "log": False,
        "interrupts": [], "fail": None, "retry": 1, "sleep": 0.0, "checkpoint": False,
        "worker": False, "emits": False, "route": "static", "children": [], "route_key": None,
        "route_raises": False,
        "loop_to": None, "loop_bound": 0, "expand_to": None, "items": 0, "on_error": None,
    }


# Every node is drawn with the same *shape* of choices, whatever its position: indexes are
# drawn from fixed ranges and clamped to what exists; five choices whatever its route, plus
# two for a join's sources or one for an expansion's items when its reach draws that kind
# (the kind drawn, not the kind it may fall back to: a node's shape is its own choices'). So
# when the shrinker deletes a node, the nodes after it replay as the same nodes one place
# earlier instead of as garbage, and each node is one span the shrinker can delete whole.
_KINDS = ("child", "join", "worker", "handler")
# The choices' strategies for a Hypothesis without ``ConjectureData.draw_integer``, built
# once: a strategy made at each draw costs a cache look-up and a validation per draw.
_INTS = {(low, high): st.integers(low, high)
         for low, high in ((0, 1), (0, 2), (0, 3), (0, 9), (0, 15), (0, 63), (0, 159),
                           (0, 191))}


Choose = Callable[[int, int], int]
"""``choose(low, high)``: one integer choice in ``[low, high]``, shrinking toward ``low``."""


def _chooser(draw: Any) -> Choose:
    """The example's own integer choices, for ``draw`` of a composite.

    ``draw(st.integers(low, high))`` makes exactly the choice ``data.draw_integer(low, high)``
    makes, inside a span of its own and a strategy's checks: half of what a choice costs
    (about 40 µs against 20). A graph is some 50 such choices, each already inside its
    node's span, which is what the shrinker deletes and replays; a span around each single
    integer gives it nothing more. Without a ``ConjectureData`` behind ``draw`` (another
    Hypothesis), the strategies are drawn as before.
    """
    data = getattr(draw, "__self__", None)
    if _Data is not None and isinstance(data, _Data):
        return data.draw_integer

    def choose(low: int, high: int) -> int:
        return draw(_INTS.get((low, high)) or st.integers(low, high))  # type: ignore[no-any-return]

    return choose


def _pick(options: Sequence[str], i: int) -> str:
    return options[min(i, len(options) - 1)]


def _attach(choose: Choose, b: _Builder, name: str, flags: dict[str, bool], reach: int
            ) -> None:
    """Add node ``name``, reached as ``reach`` says (five bits: the kind, then the parent's
    offset 0..7); the simplest (a child of the last node) first."""
    parallel = flags["parallel"]
    kind, offset = _KINDS[reach >> 3], reach & 7
    node = _new_node(name)
    # Parents, most recent first (offset 0: a chain), START last (fan-out from the entry).
    parents: list[str] = []
    for p in reversed(b.nodes):
        d = b.nodes[p]
        if d["route"] == "expand":
            continue
        if not parallel and d["route"] not in ("branch", "goto") and d["children"]:
            continue
        parents.append(p)
    if parallel or not b.nodes:
        parents.append("START")
    # A join source must arrive exactly once: it runs once, and it cannot be routed away by
    # a failure route (a routed failure takes no static edge, so no join edge either).
    joinable = [n for n in reversed(b.nodes)
                if b.certain(n) and b.nodes[n]["route"] in ("static", "branch")
                and b.nodes[n]["on_error"] is None]
    expanders = [n for n in reversed(b.nodes)
                 if b.nodes[n]["route"] == "static" and not b.nodes[n]["children"]
                 and b.nodes[n]["on_error"] is None and n not in b.join_sources
                 and not b.nodes[n]["worker"]]
    failing = [n for n in reversed(b.nodes)
               if b.nodes[n]["fail"] is not None and b.nodes[n]["on_error"] is None
               and b.nodes[n]["route"] == "static" and not b.nodes[n]["children"]
               and n not in b.join_sources]
    # A node's choices depend on its own choices only (the kind drawn, not the kind it
    # falls back to), so a node keeps its shape when the shrinker moves it.
    if kind == "join":
        pair, third = choose(0, 63), choose(0, 15)
    elif kind == "worker":
        items = choose(0, 3 if parallel else 1)
    if kind == "join" and not (parallel and len(joinable) >= 2):
        kind = "child"
    if kind == "worker" and not (flags["expansions"] and expanders):
        kind = "child"
    if kind == "handler" and not failing:
        kind = "child"
    if not parents:  # defensive: the last node is always a possible parent
        parents.append("START")
    b.nodes[name] = node
    b.incoming[name] = kind
    b.parent[name] = None
    if kind == "child":
        p = _pick(parents, offset)
        if p == "START":
            b.entry.append(name)
            b.incoming[name] = "entry"
        else:
            b.nodes[p]["children"].append(name)
            b.parent[name] = p
            if p in b.loop_body:
                b.loop_body.add(name)
    elif kind == "join":
        # Two sources (three bits each) in one choice, a third in another (half the time).
        picks = (pair & 7, pair >> 3) if third < 8 else (pair & 7, pair >> 3, third - 8)
        sources = list(dict.fromkeys(_pick(joinable, i) for i in picks))
        for extra in joinable:
            if len(sources) >= 2:
                break
            if extra not in sources:
                sources.append(extra)
        order = list(b.nodes)
        sources.sort(key=order.index)
        b.joins.append(JoinSpec(tuple(sources), name))
        b.join_sources.update(sources)
    elif kind == "worker":
        p = _pick(expanders, offset)
        d = b.nodes[p]
        d["route"], d["expand_to"] = "expand", name
        d["items"] = items
        node["worker"] = True
        b.parent[name] = p
        if p in b.loop_body:
            b.loop_body.add(name)
    else:  # handler
        p = _pick(failing, offset)
        b.nodes[p]["on_error"] = name
        b.parent[name] = p
        if p in b.loop_body:
            b.loop_body.add(name)


def _batch_siblings(b: _Builder, name: str) -> list[str]:
    """Earlier nodes that run in the same batch as ``name``: entry nodes, or the other
    children of a node with static edges."""
    if b.incoming[name] == "entry":
        return [n for n in b.entry if n != name]
    p = b.parent.get(name)
    if b.incoming[name] != "child" or p is None or b.nodes[p]["route"] != "static":
        return []
    return [c for c in b.nodes[p]["children"] if c != name and not b.nodes[c]["worker"]]


def _ask_like_a_sibling(b: _Builder, name: str) -> None:
    """Make ``name`` ask the interrupt ids of its last batch sibling that asks any, and both
    write their answers and succeed; with no such sibling, ``name`` asks ``q0``. (An earlier
    sibling is never made to ask here: a failure needing one interrupting node would then
    shrink to this pair, since dropping ``name`` would drop the sibling's interrupt too.)"""
    asking = [s for s in _batch_siblings(b, name) if b.nodes[s]["interrupts"]]
    d = b.nodes[name]
    if not asking:  # ask anyway, so a later sibling can ask the same
        d["interrupts"] = d["interrupts"] or ["q0"]
        return
    sib = b.nodes[asking[-1]]
    d["interrupts"] = list(sib["interrupts"])
    for node in (sib, d):  # both answers reach the state: written, by nodes that succeed
        node["writes"], node["fail"], node["retry"] = True, None, 1


def _reads(choice: int, keys: Sequence[str]) -> list[str]:
    """The keys a node reads, from one choice (0..23): none below 4, one key index below 12,
    two above (shrinking toward fewer reads, then lower indexes)."""
    if choice < 4:
        return []
    picks = [choice - 4] if choice < 12 else [(choice - 12) % 8, (choice - 12) // 8]
    return list(dict.fromkeys(keys[i % len(keys)] for i in picks))


def _behaviour(choose: Choose, b: _Builder, name: str, flags: dict[str, bool]) -> bool:
    """Draw what node ``name`` does (next to how it is reached, so they shrink together).

    Three choices, each packing fields as digits: one field of any range on top, fields of
    2, 4 or 32 values below it, at most 192 values in all (Hypothesis draws a range of up to
    256 uniformly). Each choice costs Hypothesis some 50 Python calls of bookkeeping, so a
    node is five choices (with its reach and its route) where it was ten. A packed choice
    shrinks toward 0 ("off" in every field); subtracting clears the fields below a needed
    top field, and masking off high bits clears a top field above needed low ones (every low
    field spans a power of two). What it does not do: lower a top field that stays on while
    a field below it is needed (two interrupts stay two beside a needed sleep). Every field
    keeps its distribution but a failure's (9 of 32, was 9 of 30) and ``checkpoint=True``'s
    (see _route).
    """
    d = b.nodes[name]
    # effect (top) | failure (5 bits): 0..22 none, then (fails on attempt 1, on 1..2,
    # always) x (retry attempts 1, 2, 3), simplest first.
    look = choose(0, 5 * 32 - 1)
    if flags["effects"]:
        d["effect"] = _EFFECTS[look >> 5]
    f = look & 31
    if f >= 23 and flags["failures"]:
        how, retry = divmod(f - 23, 3)
        d["fail"] = Failure(None if how == 2 else how + 1)
        d["retry"] = retry + 1
    # reads (top, 0..23, see _reads) | writes and log (2 bits) | one bit for the route
    # (_route: whether a branch's edge raises, or a loop's bound).
    io = choose(0, 24 * 8 - 1)
    d["reads"] = _reads(io >> 3, b.keys())
    if not d["worker"]:
        d["writes"] = bool(io & 2)
        d["log"] = bool(io & 4) and b.reducers
    route_bit = io & 1 == 1
    # interrupts and the twin (top, 0..11) | sleep (2 bits) | emits (2 bits). The top field:
    # 0..7 no interrupt of its own (7: the twin alone), 8..9 one id, 10..11 two ids; odd
    # values from 7 up are the twin: one node in four (it was one in two, every odd value,
    # which made two nodes in three ask for input and the checks pay a resume for each).
    act = choose(0, 12 * 16 - 1)
    asks = act >> 4
    n, twin = asks >> 1, asks & 1 == 1 and asks >= 7
    if flags["interrupts"]:
        d["interrupts"] = [f"q{i}" for i in range(max(0, n - 3))]
    if flags["sleeps"]:
        d["sleep"] = (0.0, 0.0, 1.0, 2.5)[(act >> 2) & 3]
    if flags["emits"]:
        d["emits"] = act & 3 == 3
    # A targeted draw for a rare shape (issue 14): two nodes of one batch pausing with the same
    # interrupt id at once, both answers reaching the state. Drawn independently, it needs two
    # siblings that both interrupt, both write and neither fails: too rare for 30 examples.
    # (The twin is the low bit of the interrupts' field, so every node's span has one shape.)
    if twin and flags["interrupts"] and not d["worker"]:
        _ask_like_a_sibling(b, name)
    return route_bit


_ROUTES = ("static", "static", "static", "branch", "goto", "loop")


def _route(choose: Choose, b: _Builder, name: str, flags: dict[str, bool], bit: bool
           ) -> None:
    """Draw how node ``name`` decides where to go: static edges first (weighted: they also
    make joins possible), then a branch, a ``Command(goto=...)``, a loop. ``bit`` (drawn
    with the node's reads): whether a branch's edge raises, or a loop's bound is 2."""
    d = b.nodes[name]
    # route (top) | the state key a branch or goto picks by, or the offset of a loop's
    # target (3 bits) | checkpoint=True (2 bits: one node in four, was one in five). With the
    # bit drawn with the node's reads, every node draws the same choices whatever its route,
    # so the shrinker can turn a branch into a static edge without the choices after it
    # moving.
    packed = choose(0, len(_ROUTES) * 32 - 1)
    d["checkpoint"] = packed & 3 == 3
    index, route = (packed >> 2) & 7, _ROUTES[packed >> 5]
    if route in ("branch", "goto") and not flags["branches"]:
        route = "static"
    loop_targets: list[str] = []
    if route == "loop":
        if flags["cycles"] and not d["worker"]:
            loop_targets = [j for j in b.ancestors(name)
                            if not (b.descendants(j) & b.join_sources)]
        if not loop_targets:
            route = "static"
    if route in ("branch", "goto"):
        d["route"] = route
        keys = b.keys()
        d["route_key"] = keys[index % len(keys)]
        if route == "branch" and flags["edge_errors"]:
            d["route_raises"] = bit
    elif route == "loop":
        d["route"] = "loop"
        d["loop_to"] = _pick(loop_targets, index)
        d["loop_bound"] = 1 + bit
        b.loop_body |= b.descendants(d["loop_to"])


# The graph being drawn, for the node strategies below. They are built once and read the
# builder from here instead of taking it as an argument: a strategy made per node cost a
# validation per draw, a sixth of what drawing a graph cost. (Same choices, same spans: a
# composite's label comes from its function, not its arguments.)
_BUILDING: ContextVar[_Builder] = ContextVar("graphflow_building")


_HEAD = 5 * 32 - 1
"""The largest value of a node's head choice: "one more node?" (top, 0..4: 0 is no, so a
graph stops after a node one time in five) | how the node is reached (5 bits)."""


@st.composite
def _node(draw: Any) -> bool:
    return _one_node(draw)


def _one_node(draw: Any) -> bool:
    """Draw the next node into the graph being built; ``False`` when the graph ends here."""
    b = _BUILDING.get()
    i = len(b.nodes)
    name, flags = f"n{i}", b.flags
    # "One more node?" comes first in the node's own span, drawn even when the node is forced
    # (min_nodes), so every node's span has the same shape: deleting a span deletes a node.
    if i >= b.max_nodes:
        _no_more(draw)
        return False
    choose = _chooser(draw)
    # One choice: "one more node?" (top, 0..4: 0 is no) | how it is reached (5 bits).
    head = choose(0, _HEAD)
    if not (head >> 5 or i < b.min_nodes):
        return False
    _attach(choose, b, name, flags, head & 31)
    _route(choose, b, name, flags, _behaviour(choose, b, name, flags))
    return True


def _no_more(draw: Any) -> None:
    """The "one more node?" of a graph at ``max_nodes``: a forced "no", so a graph at the
    maximum ends in the same choice as a smaller one. The shrinker cuts a node out by
    replacing a node's span with the span of the node after it; without that last choice, a
    graph of ``max_nodes`` nodes came out one choice short and no node of it could be cut."""
    data = getattr(draw, "__self__", None)
    if _Data is not None and isinstance(data, _Data):
        data.draw_integer(0, _HEAD, forced=0)


_NODE = _node()


@st.composite
def _nodes(draw: Any) -> None:
    # Recursive on purpose: the rest of the graph is drawn *inside* this node's span, so the
    # shrinker's "replace a span with a descendant span" pass can cut out any one node and the
    # nodes after it replay one place earlier (every node draws the same shape of choices).
    # Each node drawn adds one to ``b.nodes``, so its length is this node's index.
    if draw(_NODE):
        draw(_NODES)


_NODES = _nodes()


def _nodes_in_spans(data: Any, draw: Any) -> None:
    """What ``draw(_NODES)`` does, with the spans opened by hand: the same spans (labels,
    nesting, one pair a node), the same choices, without a composite's draw around each
    (its checks, its recorded value: some 40 Python calls a node).

    The node spans sit inside one span labelled as a unique collection's, the one label
    Hypothesis's mutator skips the spans inside of (the shrinker reads no such label: its
    passes see the same spans). The mutator copies a span over another of its label: here
    a run of nested node spans into the graph, or one node over another. After each new
    example it ran up to five such copies, so three examples in four were copies of a few
    drawn graphs grown toward ``max_nodes`` (4.2 nodes against 3.2 drawn), and each copy
    cost its replay through the example tree on top of its run: 1,800 of the 4,400 Python
    calls an example cost. Now every example is a graph drawn afresh; the shape a copy
    made on purpose, two siblings asking the same ids, is a targeted draw (``_behaviour``).
    """
    nodes_label, node_label = _NODES.label, _NODE.label
    depth = 0
    if _UNMUTATED is not None:
        data.start_span(_UNMUTATED)
        depth += 1
    try:
        while True:
            data.start_span(nodes_label)
            depth += 1
            data.start_span(node_label)
            try:
                more = _one_node(draw)
            finally:
                data.stop_span()
            if not more:
                return
    finally:
        for _ in range(depth):
            data.stop_span()


@st.composite
def _graph_specs(
    draw: Any, min_nodes: int, max_nodes: int, flags: dict[str, bool], policies: tuple[str, ...]
) -> GraphSpec:
    b = _Builder(flags["reducers"], min_nodes, max_nodes, flags)
    policy = policies[_chooser(draw)(0, len(policies) - 1)]
    token = _BUILDING.set(b)
    data = getattr(draw, "__self__", None)
    try:
        if _Data is not None and isinstance(data, _Data) and hasattr(data, "start_span"):
            _nodes_in_spans(data, draw)
        else:
            draw(_NODES)
    finally:
        _BUILDING.reset(token)
    return b.spec(policy)


def graphs(
    *,
    min_nodes: int = 1,
    max_nodes: int = 6,
    parallel: bool = True,
    branches: bool = True,
    cycles: bool = True,
    expansions: bool = True,
    interrupts: bool = True,
    failures: bool = True,
    reducers: bool = True,
    effects: bool = True,
    sleeps: bool = True,
    emits: bool = True,
    edge_errors: bool = False,
    checkpoint_policies: Sequence[str] = _POLICIES,
) -> st.SearchStrategy[GraphSpec]:
    """Valid graphs, as :class:`GraphSpec` values (``.compile()`` gives the real graph).

    Each feature can be turned off. Graphs are built node by node: each new node is reached
    from an earlier node (or START), by a join of earlier nodes that run exactly once, as an
    expansion's worker or as a failure route, so every graph compiles, every node is
    reachable, every join gets all its arrivals and every run ends (cycles are bounded by a
    counter key). Node behaviour is deterministic: the same states give the same writes.

    Args:
        min_nodes: at least this many nodes (>= 1).
        max_nodes: at most this many nodes; keep it small (runs are cheap, shrinking too).
        parallel: fan-outs, joins and multi-item expansions (parallel batches).
        branches: conditional edges, and nodes returning ``Command(goto=...)``, picking a
            target by a pure function of the state.
        cycles: loops back to an ancestor, bounded by a counter key.
        expansions: ``Expand(worker, items)``.
        interrupts: nodes calling ``interrupt()`` (one or two ids, from a pool of two).
            A targeted draw makes a rare shape common: two nodes of one batch pausing with
            the same id at once, both writing their answers to the state.
        failures: nodes raising on their first attempts or always, with retries and routes.
        reducers: the ``log`` key with ``Reducer(operator.add)``.
        effects: effect classes other than ``pure``.
        sleeps: ``async`` nodes sleeping in virtual time (interleavings).
        emits: nodes emitting custom events.
        edge_errors: conditional edges that raise for some states (C7: the stream raises);
            off by default, since such runs end in an exception rather than a status.
        checkpoint_policies: the ``compile(checkpoint_policy=...)`` values to draw from.

    Shrinking: nodes are drawn one at a time behind a "one more?" draw, a node's reach, its
    behaviour and its route are drawn together, parents are indexed from the most recent node
    (a chain is the simplest shape) and every choice puts the simpler alternative first
    (static edges, pure nodes, no interrupt, no failure, ``every_step``). A failing example
    therefore shrinks to few nodes with only the features the failure needs.
    """
    _check_int("min_nodes", min_nodes, 1)
    _check_int("max_nodes", max_nodes, 1)
    if min_nodes > max_nodes:
        raise InvalidArgument(f"min_nodes={min_nodes!r} must be <= max_nodes={max_nodes!r}")
    policies = tuple(checkpoint_policies)
    bad = [p for p in policies if p not in _POLICIES]
    if not policies or bad:
        raise InvalidArgument(f"checkpoint_policies={checkpoint_policies!r}: use a non-empty "
                              f"subset of {list(_POLICIES)}")
    flags = {"parallel": parallel, "branches": branches, "cycles": cycles,
             "expansions": expansions, "interrupts": interrupts, "failures": failures,
             "reducers": reducers, "effects": effects, "sleeps": sleeps, "emits": emits,
             "edge_errors": edge_errors}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgument(f"{name}={value!r} must be a bool")
    return _graph_specs(min_nodes, max_nodes, flags, policies)


# --------------------------------------------------------------------------- inputs


def graph_inputs(spec: GraphSpec) -> st.SearchStrategy[dict[str, Any]]:
    """Inputs for ``spec``'s graph: ``x`` and, optionally, starting values of ``v_*`` keys.

    Shrinks toward ``{"x": 0}``.
    """
    if not isinstance(spec, GraphSpec):
        raise InvalidArgument(f"graph_inputs(spec={spec!r}): pass a GraphSpec from graphs()")
    return _inputs(spec.keys)


@st.composite
def _input_dict(draw: Any, optional: tuple[str, ...]) -> dict[str, Any]:
    # Two choices whatever the keys: x (0..9), then one integer with four bits per optional key,
    # the first key lowest (0..5: left out, 6..15: the value 0..9), so each key shrinks toward
    # leaving it out, then toward 0, and the smallest input with a key gives the first one.
    # A fixed count keeps the choices after it in place when Hypothesis' mutator gives the
    # graph other keys: one choice per key overran the example's choices instead.
    choose = _chooser(draw)
    out = {"x": choose(0, 9)}
    packed = choose(0, (1 << (4 * len(optional))) - 1)
    for key in optional:
        if packed & 15 >= 6:
            out[key] = (packed & 15) - 6
        packed >>= 4
    return out


@functools.lru_cache(maxsize=256)
def _inputs(keys: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    # One strategy per key set, reused: a strategy made per example is validated per example.
    return _input_dict(tuple(k for k in keys if k.startswith("v_")))


_ANSWER_POOL: tuple[Any, ...] = (None, False, True, 0, 1, -1, 2, -2, 3, -3, "", "a", "b", "c",
                                 "ab", "ba", "ca", "abc", "cab", "bca")
"""The default answers, drawn by index (a ``one_of`` with a text costs four or five choices an
answer): ``None``, booleans, small ints and short strings of ``abc``, simplest first (shrinks
toward ``None``)."""


def resume_answers(
    interrupts: GraphSpec | Iterable[Any], *, values: st.SearchStrategy[Any] | None = None
) -> st.SearchStrategy[dict[str, Any]]:
    """One answer per interrupt, as a dict.

    Args:
        interrupts: a :class:`GraphSpec` (answers keyed ``"<node>:<id>"``, for every
            ``interrupt()`` call of the graph: what the ``answers`` of the whole-run checks in
            :mod:`pytest_graphflow.invariants` take), or pending
            :class:`~pytest_graphflow.Interrupt` objects (keyed by ``Interrupt.key``: pass the
            dict as ``Resume(answers=...)``), or the keys themselves.
        values: the answers' strategy (JSON values); default: ``None``, booleans, small ints
            and short strings, shrinking toward ``None``.
    """
    if isinstance(interrupts, GraphSpec):
        keys = list(interrupts.interrupt_points)
    else:
        keys = []
        for item in interrupts:
            key = getattr(item, "key", item)
            if not isinstance(key, str):
                raise InvalidArgument(f"resume_answers: {item!r} is not an Interrupt or a key")
            keys.append(key)
    if values is None:
        return _answers(tuple(dict.fromkeys(keys)))
    return st.fixed_dictionaries({k: values for k in dict.fromkeys(keys)})


@st.composite
def _answer_dict(draw: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    # One choice whatever the keys: five bits per answer, the first key lowest, each an index
    # into the pool (20..31 wrap around to its start), so every answer shrinks toward None.
    # A fixed count: one choice per key overran the example's choices whenever Hypothesis'
    # mutator gave the graph more interrupts (see _input_dict).
    packed = _chooser(draw)(0, (1 << (5 * len(keys))) - 1)
    size = len(_ANSWER_POOL)
    return {k: _ANSWER_POOL[((packed >> (5 * i)) & 31) % size] for i, k in enumerate(keys)}


@functools.lru_cache(maxsize=256)
def _answers(keys: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    # One strategy per key set, reused (as for graph_inputs).
    return _answer_dict(keys)


# --------------------------------------------------------------------------- store faults


def fault_plans(
    *,
    ops: Sequence[str] = ("save", "get", "latest", "list"),
    kinds: Sequence[str] = ("reject", "fail", "delay"),
    max_faults: int = 2,
    max_nth: int = 4,
) -> st.SearchStrategy[FaultPlan]:
    """:class:`~pytest_graphflow.FaultPlan` values for ``FaultyStore``.

    ``plan.apply(store)`` wraps a store with the plan's rules. Shrinks toward the empty plan,
    then toward fewer, earlier (``nth=1``) and simpler faults.

    Args:
        ops: store operations the ``fail``/``delay``/``crash`` rules may target.
        kinds: ``"reject"`` (``reject_save``), ``"fail"``, ``"delay"``, ``"crash"``
            (``crash_at``, before or after the call).
        max_faults: at most this many rules.
        max_nth: rules fire on a call numbered at most this.
    """
    _check_int("max_faults", max_faults, 0)
    _check_int("max_nth", max_nth, 1)
    known = ("reject", "fail", "delay", "crash")
    if not kinds or any(k not in known for k in kinds):
        raise InvalidArgument(f"kinds={kinds!r}: use a non-empty subset of {list(known)}")
    if not ops or any(not isinstance(o, str) for o in ops):
        raise InvalidArgument(f"ops={ops!r}: pass store operation names")
    nth = st.integers(1, max_nth)
    op = st.sampled_from(tuple(ops))
    options: list[st.SearchStrategy[Fault]] = []
    for kind in kinds:
        if kind == "reject":
            options.append(st.builds(Fault.reject_save, nth))
        elif kind == "fail":
            options.append(st.builds(Fault.fail, op, nth))
        elif kind == "delay":
            options.append(st.builds(lambda o, s, n: Fault.delay(o, s, nth=n), op,
                                     st.sampled_from((0.5, 5.0, 60.0)), nth))
        else:
            options.append(st.builds(lambda o, n, p: Fault.crash_at(o, n, phase=p), op, nth,
                                     st.sampled_from(("before", "after"))))
    return st.lists(st.one_of(options), max_size=max_faults).map(lambda f: FaultPlan(tuple(f)))


# --------------------------------------------------------------------------- schedules


def schedules(batch_size: int = 4, *, batches: int = 1) -> st.SearchStrategy[Schedule]:
    """Start orders for parallel batches, drawn by Hypothesis.

    ``schedule.apply(graph)`` returns the graph whose parallel batches start their nodes in the
    drawn order: the n-th parallel batch of a run uses the n-th order (positions in declared
    order); a batch of another size keeps the positions it has, then the rest in declared
    order; batches past the last order start in declared order. Later wake-ups (after a
    ``sleep`` inside a node) still follow the runtime's seed. Needs a
    :class:`~pytest_graphflow.VirtualClock`.

    Each order is ``st.permutations(range(batch_size))``, so a failing schedule shrinks toward
    declared order along with the rest of the example.
    """
    _check_int("batch_size", batch_size, 1, 8)
    _check_int("batches", batches, 1)
    order = st.permutations(range(batch_size)).map(tuple)
    return st.lists(order, min_size=batches, max_size=batches).map(
        lambda orders: Schedule(tuple(orders))
    )


st.register_type_strategy(GraphSpec, lambda _: graphs())
