"""Shared graphs, stores and checks for the runtime-core acceptance tests.

Every graph here runs under ``GraphRuntime(clock=VirtualClock(), seed=N)``: node code sleeps
with ``anyio.sleep`` only (virtual time), so the whole folder runs in well under a second per
test, on asyncio and on trio (the ``anyio_backend`` fixture below).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Checkpoint,
    CompiledGraph,
    EventBase,
    Graph,
    GraphResult,
    GraphRuntime,
    InMemoryCheckpointStore,
    Reducer,
    RunStream,
    VirtualClock,
    interrupt,
)

BACKENDS = ["asyncio", "trio"]
SEEDS = [0, 1, 2, 3, 7, 11]


@pytest.fixture(params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every ``@pytest.mark.anyio`` test runs on asyncio and on trio; sync tests pass it to
    ``GraphRuntime(backend=...)``."""
    return str(request.param)


class S(BaseModel):
    """The state most test graphs share."""

    log: Annotated[list[str], Reducer(operator.add)] = []
    n: int = 0
    answer: Any = None
    answers: Annotated[list[Any], Reducer(operator.add)] = []


class Boom(Exception):
    """A node's (or an edge function's) own exception."""


def runtime(
    seed: int = 0,
    store: Any = None,
    backend: str = "asyncio",
    **options: Any,
) -> GraphRuntime:
    """The deterministic runtime: a fresh virtual clock, a seed, an in-memory store."""
    return GraphRuntime(
        store=InMemoryCheckpointStore() if store is None else store,
        clock=VirtualClock(),
        seed=seed,
        backend=backend,
        **options,
    )


async def collect(stream: RunStream, on_event: Callable[[EventBase], None] | None = None
                  ) -> list[EventBase]:
    """Every event of ``stream`` (calling ``on_event`` as each one arrives)."""
    events: list[EventBase] = []
    async for event in stream:
        events.append(event)
        if on_event is not None:
            on_event(event)
    return events


async def run(rt: GraphRuntime, graph: CompiledGraph, input: Any = None, **kw: Any
              ) -> tuple[list[EventBase], GraphResult[Any]]:
    """Stream a run to its end: its events and its result."""
    stream = rt.stream(graph, input, **kw)
    events = await collect(stream)
    return events, stream.result()


async def resume(rt: GraphRuntime, ref: str, answer: Any = None, **kw: Any
                 ) -> tuple[list[EventBase], GraphResult[Any]]:
    """Resume ``ref`` (with ``answer`` when given) to the end: its events and its result."""
    stream = rt.resume_stream(ref, answer, **kw)
    events = await collect(stream)
    return events, stream.result()


def types(events: Iterable[EventBase]) -> list[str]:
    return [e.type for e in events]  # type: ignore[attr-defined]


def brief(events: Iterable[EventBase]) -> list[str]:
    """``"type:node"`` (or ``"edge:src>dst"``) per event: easy to compare orders."""
    out = []
    for e in events:
        kind = e.type  # type: ignore[attr-defined]
        if kind == "edge_transition":
            out.append(f"edge:{e.source}>{e.target}")  # type: ignore[attr-defined]
        elif e.node is not None:
            out.append(f"{kind}:{e.node}")
        else:
            out.append(kind)
    return out


def of(events: Iterable[EventBase], kind: str, node: str | None = None) -> list[Any]:
    return [e for e in events if e.type == kind and (node is None or e.node == node)]  # type: ignore[attr-defined]


# -- stores -------------------------------------------------------------------------------------


class RecordingStore(InMemoryCheckpointStore):
    """Records, for each checkpoint, how many events the consumer had seen when ``save``
    *returned* (the test sets ``consumed`` as it reads the stream)."""

    def __init__(self) -> None:
        super().__init__()
        self.consumed = 0
        self.saved_at: dict[str, int] = {}
        self.saved: list[Checkpoint] = []

    async def save(self, checkpoint: Checkpoint) -> None:
        await super().save(checkpoint)
        self.saved_at[checkpoint.id] = self.consumed
        self.saved.append(checkpoint.clone())


class RejectingStore(InMemoryCheckpointStore):
    """Rejects the save of chosen calls (1-based ``nth``) or checkpoints (``when``), raising
    the given exception object itself."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.rules: list[tuple[Callable[[int, Checkpoint], bool], BaseException]] = []
        self.rejected: list[Checkpoint] = []

    def reject(self, error: BaseException, *, nth: int | None = None,
               when: Callable[[Checkpoint], bool] | None = None) -> RejectingStore:
        def match(n: int, cp: Checkpoint) -> bool:
            return (nth is None or n == nth) and (when is None or when(cp))

        self.rules.append((match, error))
        return self

    def clear(self) -> None:
        self.rules.clear()

    async def save(self, checkpoint: Checkpoint) -> None:
        self.calls += 1
        for match, error in self.rules:
            if match(self.calls, checkpoint):
                self.rejected.append(checkpoint.clone())
                raise error
        await super().save(checkpoint)


async def snapshot(store: InMemoryCheckpointStore) -> list[dict[str, Any]]:
    """The whole store's checkpoints in wire form (to assert that nothing changed)."""
    return [cp.model_dump(mode="json") for cp in await store.list()]


# -- graphs -------------------------------------------------------------------------------------


@dataclass
class Script:
    """What the nodes of a scripted graph do; tests change it between legs of a run.

    Attributes:
        calls: ``(node, state)`` for every call of a node function, in call order.
        finished: nodes whose function returned, in return order.
        sleeps: virtual seconds a node sleeps before it finishes.
        interrupts: nodes that call ``interrupt({"ask": node}, id="q")``.
        fails: node -> the exception object it raises.
        edge_errors: node -> the exception object its conditional edge raises.
        got: node -> the answer its ``interrupt()`` returned.
    """

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    sleeps: dict[str, float] = field(default_factory=dict)
    interrupts: set[str] = field(default_factory=set)
    fails: dict[str, BaseException] = field(default_factory=dict)
    edge_errors: dict[str, BaseException] = field(default_factory=dict)
    got: dict[str, Any] = field(default_factory=dict)

    def count(self, node: str) -> int:
        return sum(1 for n, _ in self.calls if n == node)

    def states(self, node: str) -> list[dict[str, Any]]:
        return [s for n, s in self.calls if n == node]

    def called(self) -> list[str]:
        return [n for n, _ in self.calls]

    def worker(self, name: str) -> Callable[..., Any]:
        async def work(state: S) -> dict[str, Any]:
            self.calls.append((name, state.model_dump(mode="json")))
            if self.sleeps.get(name):
                await anyio.sleep(self.sleeps[name])
            if name in self.fails:
                raise self.fails[name]
            out: dict[str, Any] = {"log": [name]}
            if name in self.interrupts:
                answer = interrupt({"ask": name}, id="q")
                self.got[name] = answer
                out["answers"] = [answer]
            self.finished.append(name)
            return out

        work.__name__ = name
        return work

    def route(self, name: str, target: str = END) -> Callable[[S], str]:
        def decide(state: S) -> str:
            if name in self.edge_errors:
                raise self.edge_errors[name]
            return target

        return decide


def fan_graph(
    script: Script,
    workers: tuple[str, ...] = ("a", "b", "c"),
    *,
    effects: dict[str, str] | None = None,
    routed: Iterable[str] = (),
    policy: str = "every_step",
    graph_id: str = "fan",
) -> CompiledGraph:
    """``plan -> [workers...] -> join -> END``: the workers are one parallel batch (step 1).

    A worker in ``routed`` also has a conditional edge (to END) that raises
    ``script.edge_errors[worker]`` when set.
    """
    effects = effects or {}
    g = Graph(graph_id, S)
    g.node("plan", script.worker("plan"), effect=effects.get("plan", "pure"))  # type: ignore[arg-type]
    for w in workers:
        g.node(w, script.worker(w), effect=effects.get(w, "pure"))  # type: ignore[arg-type]
    g.node("join", script.worker("join"), effect=effects.get("join", "pure"))  # type: ignore[arg-type]
    g.edge(START, "plan")
    g.edge("plan", list(workers))
    g.edge(list(workers), "join")
    for w in routed:
        g.branch(w, script.route(w), [END])
    g.edge("join", END)
    return g.compile(checkpoint_policy=policy)  # type: ignore[arg-type]


def chain_graph(
    script: Script,
    nodes: tuple[str, ...] = ("one", "two", "three"),
    *,
    effects: dict[str, str] | None = None,
    routed: Iterable[str] = (),
    policy: str = "every_step",
    graph_id: str = "chain",
) -> CompiledGraph:
    """``START -> nodes[0] -> nodes[1] -> ... -> END``, one node per step.

    A node in ``routed`` reaches the next node through a conditional edge (that raises
    ``script.edge_errors[node]`` when set) instead of a static edge.
    """
    effects = effects or {}
    routed = set(routed)
    g = Graph(graph_id, S)
    for name in nodes:
        g.node(name, script.worker(name), effect=effects.get(name, "pure"))  # type: ignore[arg-type]
    g.edge(START, nodes[0])
    for src, dst in zip(nodes, (*nodes[1:], END), strict=True):
        if src in routed:
            g.branch(src, script.route(src, dst), [dst])
        else:
            g.edge(src, dst)
    return g.compile(checkpoint_policy=policy)  # type: ignore[arg-type]


# -- invariant checks ---------------------------------------------------------------------------


def check_leg(events: list[EventBase]) -> None:
    """C1, C2, C3 and C10 over the events of one leg of a run that did not raise."""
    kinds = types(events)
    # C1: one run_start first and one run_end last.
    assert kinds[0] == "run_start", kinds
    assert kinds[-1] == "run_end", kinds
    assert kinds.count("run_start") == 1, kinds
    assert kinds.count("run_end") == 1, kinds
    # C10: seq strictly increases (consecutively: one log), time never decreases.
    seqs = [e.seq for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    times = [e.time for e in events]
    assert times == sorted(times), times
    # C2: per task, node_start then exactly one of node_end / interrupt / error.
    per_task: dict[str, list[str]] = {}
    for e in events:
        if e.task_id is not None and e.type in ("node_start", "node_end", "interrupt", "error"):  # type: ignore[attr-defined]
            if e.type == "error" and e.will_retry:  # type: ignore[attr-defined]
                continue  # a failed attempt that retries; the next attempt has its own start
            per_task.setdefault(e.task_id, []).append(e.type)  # type: ignore[attr-defined]
    for task, seen in per_task.items():
        starts = [k for k in seen if k == "node_start"]
        ends = [k for k in seen if k != "node_start"]
        assert seen[0] == "node_start", (task, seen)
        assert len(ends) == 1, (task, seen)
        assert seen[-1] == ends[0], (task, seen)
        assert len(starts) >= 1, (task, seen)
    # C3: an edge comes after its source's result and before its target's node_start.
    result_at: dict[str, int] = {}
    for i, e in enumerate(events):
        if e.type in ("node_end", "error") and e.task_id is not None:  # type: ignore[attr-defined]
            result_at[e.task_id] = i
    for i, e in enumerate(events):
        if e.type != "edge_transition":  # type: ignore[attr-defined]
            continue
        assert e.task_id in result_at, (i, brief(events))
        assert result_at[e.task_id] < i, (i, brief(events))
        later_starts = [j for j, x in enumerate(events)
                        if x.type == "node_start" and x.node == e.target and x.step > e.step]  # type: ignore[attr-defined]
        assert all(j > i for j in later_starts), (i, brief(events))
    for j, x in enumerate(events):
        if x.type == "node_start" and x.step > events[0].step:  # type: ignore[attr-defined]
            incoming = [i for i, e in enumerate(events[:j])
                        if e.type == "edge_transition" and e.target == x.node]  # type: ignore[attr-defined]
            assert incoming or x.step == events[0].step, (j, brief(events))
