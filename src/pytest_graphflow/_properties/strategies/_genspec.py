"""``GraphSpec``: a generated graph as plain data, and the real graph it compiles to.

Every node's behaviour is data (which keys it reads and writes, whether it interrupts, fails,
expands, branches or loops), so a failing example prints as a readable graph and Hypothesis can
shrink it. ``GraphSpec.compile()`` builds a :class:`CompiledGraph` whose node functions
interpret that data. They are deterministic functions of the state they run on (plus the
task's expansion item, its attempt number and the interrupt answers), so two runs that see the
same states make the same writes, and every cycle is bounded by a counter key.

State keys of a generated graph:

* ``x``: an input ``int``;
* ``v_<node>``: the ``int`` a node writes when ``writes`` is set;
* ``c_<node>``: the iteration counter of a loop node;
* ``log``: ``list[str]`` with the reducer ``operator.add`` (when the spec has reducers): nodes
  with ``log`` append their name, expansion workers append ``<worker>:<item>``.
"""

from __future__ import annotations

import functools
import json
import operator
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import anyio
from pydantic import BaseModel, create_model

from ..._graph._builder import (
    END,
    START,
    Command,
    CompiledGraph,
    Expand,
    Graph,
    Reducer,
    Retry,
    reachable,
)
from ..._graph._node import NodeContext, interrupt

__all__ = ["Failure", "GraphSpec", "JoinSpec", "PlannedFailure", "SpecNode"]

Route = Literal["static", "branch", "goto", "loop", "expand"]


class PlannedFailure(Exception):
    """What a generated node with a :class:`Failure` raises."""


@dataclass(frozen=True)
class Failure:
    """When a generated node raises :class:`PlannedFailure`.

    Attributes:
        attempts: the node raises on its attempts ``1..attempts`` (so with
            ``Retry(attempts > attempts)`` it succeeds in the end); ``None``: on every attempt.
    """

    attempts: int | None = 1

    def fails(self, attempt: int) -> bool:
        """Whether the node raises on ``attempt`` (1-based)."""
        return self.attempts is None or attempt <= self.attempts

    def __str__(self) -> str:
        if self.attempts is None:
            return "always fails"
        if self.attempts == 1:
            return "fails on attempt 1"
        return f"fails on attempts 1..{self.attempts}"


@dataclass(frozen=True)
class SpecNode:
    """One generated node: its behaviour and its outgoing route, as data.

    Attributes:
        name: the node's name (``n0``, ``n1``, ...: declared order).
        effect: the node's effect class.
        reads: state keys whose values feed the value it writes.
        writes: write ``v_<name>`` = ``(index + 1 + sum(reads) + answers) % 1000``.
        log: append to the ``log`` reducer key.
        interrupts: ids of the ``interrupt()`` calls it makes, in order, before anything else.
        fail: when it raises, if ever.
        retry: attempts in all (``1``: no retry policy).
        sleep: virtual seconds an ``async`` node sleeps first (``0``: a sync node).
        checkpoint: ``checkpoint=True`` (a checkpoint after its step, whatever the policy).
        worker: the node is an expansion worker (its tasks read ``ctx.item``).
        emits: the node emits a custom event (``ctx.emit``) before it writes.
        route: ``static`` (edges to ``children``, END without children), ``branch`` (a
            conditional edge picking one of ``children`` + END by ``state[route_key] % n``),
            ``goto`` (the node returns ``Command(goto=...)``, picking the same way on the state
            it ran on), ``loop`` (back to ``loop_to`` while its counter ``c_<name> <=
            loop_bound``, then on to ``children`` or END) or ``expand`` (``Expand(expand_to,
            items)`` with ``items`` tasks).
        route_raises: a ``branch`` whose edge function raises :class:`PlannedFailure` when
            ``state[route_key] % (n + 1) == n`` (C7).
        children: static children, branch targets or a loop's onward targets.
        on_error: the failure route.
    """

    name: str
    effect: str = "pure"
    reads: tuple[str, ...] = ()
    writes: bool = False
    log: bool = False
    interrupts: tuple[str, ...] = ()
    fail: Failure | None = None
    retry: int = 1
    sleep: float = 0.0
    checkpoint: bool = False
    worker: bool = False
    emits: bool = False
    route: Route = "static"
    children: tuple[str, ...] = ()
    route_key: str | None = None
    route_raises: bool = False
    loop_to: str | None = None
    loop_bound: int = 0
    expand_to: str | None = None
    items: int = 0
    on_error: str | None = None

    @property
    def keys_written(self) -> tuple[str, ...]:
        """The state keys this node may write (its ``writes=`` contract)."""
        out = []
        if self.writes:
            out.append(f"v_{self.name}")
        if self.log or self.worker:
            out.append("log")
        if self.route == "loop":
            out.append(f"c_{self.name}")
        return tuple(out)

    def describe(self) -> str:
        """One line: the node, its effect class and its behaviour."""
        parts = [f"{self.name} [{self.effect}{', async' if self.sleep else ''}]"]
        if self.worker:
            parts.append("worker (logs its item)")
        if self.reads:
            parts.append(f"reads {', '.join(self.reads)}")
        if self.writes:
            parts.append(f"writes v_{self.name}")
        if self.log:
            parts.append("logs")
        if self.sleep:
            parts.append(f"sleeps {self.sleep:g}s")
        if self.interrupts:
            parts.append(f"interrupts {', '.join(self.interrupts)}")
        if self.fail is not None:
            parts.append(str(self.fail))
        if self.retry > 1:
            parts.append(f"retry attempts={self.retry}")
        if self.emits:
            parts.append("emits")
        if self.checkpoint:
            parts.append("checkpoint=True")
        return "; ".join(parts)

    def describe_route(self) -> str:
        """One line: where the node goes next."""
        kids = ", ".join(self.children)
        if self.route in ("branch", "goto"):
            targets = [*self.children, "END"]
            how = "Command(goto=...)" if self.route == "goto" else "edge"
            text = (f"{self.name} {how} by {self.route_key} % {len(targets)} -> one of "
                    f"[{', '.join(targets)}]")
            if self.route_raises:
                text += f"; the edge raises when {self.route_key} % {len(targets) + 1} == " \
                        f"{len(targets)}"
            return text
        if self.route == "loop":
            return (f"{self.name} loops to {self.loop_to} while c_{self.name} <= "
                    f"{self.loop_bound}, then -> {kids or 'END'}")
        if self.route == "expand":
            return f"{self.name} expands {self.expand_to} x{self.items}"
        return f"{self.name} -> {kids or 'END'}"


@dataclass(frozen=True)
class JoinSpec:
    """``g.edge(list(sources), target)``: ``target`` runs once every source has run."""

    sources: tuple[str, ...]
    target: str


@functools.lru_cache(maxsize=256)
def _state_model(keys: tuple[str, ...]) -> type[BaseModel]:
    """The state model of a generated graph with ``keys``: building a pydantic model costs
    about a millisecond, more than drawing the graph's nodes, and few key sets recur."""
    fields: dict[str, Any] = {"x": (int, 0)}
    for key in keys[1:]:
        if key == "log":
            fields[key] = (Annotated[list[str], Reducer(operator.add)], [])
        else:
            fields[key] = (int, 0)
    return create_model("GeneratedState", **fields)


@dataclass(frozen=True)
class GraphSpec:
    """A generated graph as data; ``compile()`` builds the runnable graph.

    Build them with :func:`pytest_graphflow.strategies.graphs`. ``repr()`` is the readable
    graph (one line per node and per route), which is what a failing Hypothesis example shows.

    Attributes:
        nodes: the nodes, in declared order.
        entry: the nodes ``START`` leads to (one parallel batch when several).
        joins: the joins.
        reducers: whether the state has the ``log`` reducer key.
        checkpoint_policy: the ``compile(checkpoint_policy=...)``.
        graph_id: the graph's id.
    """

    nodes: tuple[SpecNode, ...]
    entry: tuple[str, ...]
    joins: tuple[JoinSpec, ...] = ()
    reducers: bool = True
    checkpoint_policy: str = "every_step"
    graph_id: str = "generated"
    _model: Any = field(default=None, init=False, repr=False, compare=False, hash=False)

    # ----------------------------------------------------------------- views

    @property
    def size(self) -> int:
        """The number of nodes (what shrinking minimises)."""
        return len(self.nodes)

    def node(self, name: str) -> SpecNode:
        """The node called ``name``."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def keys(self) -> tuple[str, ...]:
        """Every state key, in schema order."""
        out = ["x"]
        out += [f"v_{n.name}" for n in self.nodes if n.writes]
        out += [f"c_{n.name}" for n in self.nodes if n.route == "loop"]
        if self.reducers:
            out.append("log")
        return tuple(out)

    @property
    def interrupt_points(self) -> tuple[str, ...]:
        """``"<node>:<id>"`` for every ``interrupt()`` call of the graph."""
        return tuple(f"{n.name}:{i}" for n in self.nodes for i in n.interrupts)

    @property
    def effectful_nodes(self) -> tuple[str, ...]:
        """Nodes of effect class ``write`` or ``external``."""
        return tuple(n.name for n in self.nodes if n.effect in ("write", "external"))

    def describe(self) -> str:
        """The graph as readable text: keys, entry, nodes with behaviour, routes and joins."""
        lines = [f"GraphSpec {self.graph_id!r} ({self.size} nodes, "
                 f"checkpoint_policy={self.checkpoint_policy!r})",
                 f"  state: {', '.join(self.keys)}" + (" (log: Reducer(operator.add))"
                                                        if self.reducers else ""),
                 f"  START -> {', '.join(self.entry)}"]
        for n in self.nodes:
            lines.append(f"  {n.describe()}")
            lines.append(f"      {n.describe_route()}"
                         + (f"; on error -> {n.on_error}" if n.on_error else ""))
        for j in self.joins:
            lines.append(f"  join [{', '.join(j.sources)}] -> {j.target}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.describe()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis' pretty printer (falsifying examples) calls this.
        printer.text(self.describe())

    # ----------------------------------------------------------------- compiling

    def state_model(self) -> type[BaseModel]:
        """The pydantic state model (one per set of keys: specs with the same keys share it)."""
        if self._model is None:
            object.__setattr__(self, "_model", _state_model(self.keys))
        return self._model  # type: ignore[no-any-return]

    def compile(self, *, calls: list[Any] | None = None) -> CompiledGraph:
        """Build the real graph.

        Args:
            calls: when given, every node call appends ``(node, task_id, step, attempt,
                outcome)`` with ``outcome`` one of ``"ok"``, ``"failed"``, ``"interrupted"``.

        Returns:
            the compiled graph (``GraphValidationError`` here would be a bug of the strategy).
        """
        g = Graph(self.graph_id, self.state_model())
        index = {n.name: i for i, n in enumerate(self.nodes)}
        for n in self.nodes:
            g.node(
                n.name, _node_function(n, index[n.name], calls), effect=n.effect,  # type: ignore[arg-type]
                retry=Retry(attempts=n.retry, backoff=1.0) if n.retry > 1 else None,
                on_error=n.on_error, writes=n.keys_written, checkpoint=n.checkpoint,
                destinations=[n.expand_to] if n.expand_to else
                (list(n.children) if n.route == "goto" else None),
            )
        g.edge(START, list(self.entry))
        for n in self.nodes:
            if n.route == "static":
                g.edge(n.name, list(n.children) or END)
            elif n.route == "goto" and not n.children:
                g.edge(n.name, END)  # validation needs a route; Command.goto replaces it
            elif n.route == "branch":
                assert n.route_key is not None
                targets = [*n.children, END]
                g.branch(n.name, _branch_route(n.route_key, targets, n.route_raises), targets)
            elif n.route == "loop":
                assert n.loop_to is not None
                onward = list(n.children) or [END]
                g.branch(n.name, _loop_route(n, onward), [n.loop_to, *onward])
        for j in self.joins:
            g.edge(list(j.sources), j.target)
        return g.compile(checkpoint_policy=self.checkpoint_policy)  # type: ignore[arg-type]


def answer_number(answer: Any) -> int:
    """A stable small number for an interrupt answer (any JSON value)."""
    if isinstance(answer, bool):
        return int(answer)
    if isinstance(answer, int):
        return answer % 1000
    text = json.dumps(answer, sort_keys=True)
    return zlib.crc32(text.encode()) % 100


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        return len(value)
    return 0


def _node_function(
    n: SpecNode, index: int, calls: list[Any] | None
) -> Callable[..., Any]:
    # What the body reads of ``n``, once (it runs on every call of the node): its calls
    # are the node's own (interrupt, emit, the planned failure, the patch), in that order.
    name, reads, interrupts, fail = n.name, n.reads, n.interrupts, n.fail
    start = index + 1
    value_key = f"v_{name}" if n.writes else None
    loop_key = f"c_{name}" if n.route == "loop" else None

    def body(state: BaseModel, ctx: NodeContext) -> Any:
        answers: Sequence[Any] = ()
        if interrupts:
            try:
                answers = [interrupt({"node": name, "id": i}, id=i) for i in interrupts]
            except BaseException:
                if calls is not None:
                    calls.append((name, ctx.task_id, ctx.step, ctx.attempt, "interrupted"))
                raise
        if n.emits:
            ctx.emit({"node": name, "attempt": ctx.attempt})
        if fail is not None and fail.fails(ctx.attempt):
            if calls is not None:
                calls.append((name, ctx.task_id, ctx.step, ctx.attempt, "failed"))
            raise PlannedFailure(f"node {name!r} fails on attempt {ctx.attempt} (planned)")
        value = start
        for k in reads:  # (_as_int, inline for a plain int)
            v = getattr(state, k)
            value += v if type(v) is int else _as_int(v)
        for a in answers:  # (answer_number, inline for a plain int)
            value += a % 1000 if type(a) is int else answer_number(a)
        patch: dict[str, Any] = {}
        if value_key is not None:
            patch[value_key] = value % 1000
        if n.log:
            patch["log"] = [name]
        if n.worker and "log" in type(state).model_fields:
            patch["log"] = [f"{name}:{ctx.item}"]
        if loop_key is not None:
            patch[loop_key] = getattr(state, loop_key) + 1
        if calls is not None:
            calls.append((name, ctx.task_id, ctx.step, ctx.attempt, "ok"))
        if n.route == "expand":
            assert n.expand_to is not None
            items = [f"{name}.{j}" for j in range(n.items)]
            return Expand(n.expand_to, items, update=patch or None)
        if n.route == "goto":
            assert n.route_key is not None
            targets = [*n.children, END]
            return Command(update=patch or None,
                           goto=targets[_as_int(getattr(state, n.route_key)) % len(targets)])
        return patch or None

    if not n.sleep:
        def sync_node(state: BaseModel, ctx: NodeContext) -> Any:
            return body(state, ctx)

        fn: Callable[..., Any] = sync_node
    else:
        async def async_node(state: BaseModel, ctx: NodeContext) -> Any:
            await anyio.sleep(n.sleep)
            return body(state, ctx)

        fn = async_node
    fn.__name__ = fn.__qualname__ = n.name
    return fn


def _branch_route(key: str, targets: list[str], raises: bool) -> Callable[[BaseModel], str]:
    def route(state: BaseModel) -> str:
        value = _as_int(getattr(state, key))
        if raises and value % (len(targets) + 1) == len(targets):
            raise PlannedFailure(f"edge function on {key}={value} raises (planned)")
        return targets[value % len(targets)]

    return route


def _loop_route(n: SpecNode, onward: list[str]) -> Callable[[BaseModel], list[str]]:
    counter, back, bound = f"c_{n.name}", n.loop_to, n.loop_bound

    def route(state: BaseModel) -> list[str]:
        return [back] if getattr(state, counter) <= bound else onward  # type: ignore[list-item]

    return route


def descendants(spec: GraphSpec, start: str) -> set[str]:
    """Nodes reachable from ``start`` (itself included) through every kind of edge."""
    return reached(start, ((n.name, n.children, n.loop_to, n.expand_to, n.on_error)
                           for n in spec.nodes), spec.joins)


def reached(
    start: str,
    edges: Iterable[tuple[str, Sequence[str], str | None, str | None, str | None]],
    joins: Iterable[JoinSpec],
) -> set[str]:
    """Nodes reachable from ``start`` (itself included), given each node's ``(name,
    children, loop_to, expand_to, on_error)`` and the joins: :func:`descendants` for a graph
    still being drawn, before it is a :class:`GraphSpec`."""
    succ: dict[str, list[str]] = {}
    for name, children, loop_to, expand_to, on_error in edges:
        out = list(children)
        if loop_to:
            out.append(loop_to)
        if expand_to:
            out.append(expand_to)
        if on_error:
            out.append(on_error)
        succ[name] = out
    for j in joins:
        for s in j.sources:
            succ[s].append(j.target)
    return reachable(start, succ)

