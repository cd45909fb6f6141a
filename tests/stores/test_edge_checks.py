"""Argument checks happen once, at the runtime's edge, for every store (issue 25).

A store only stores: a user store that checks nothing (``NoChecksStore`` below) gets the same
``InvalidArgument`` through ``GraphRuntime`` as the built-in stores, with the same message
(naming the call, the argument and the fix), and a refused call changes nothing in the
store. ``patch_state`` of a fork is checked against the graph's state schema, which only the
runtime knows; a store's ``fork`` applies it as given.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Checkpoint,
    CompiledGraph,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    SQLiteCheckpointStore,
    VirtualClock,
)
from pytest_graphflow.stores import StoreFeatures

sys.path.insert(0, str(Path(__file__).parents[1] / "properties"))
from graphflow_dict_store import DictStore


class NoChecksStore(DictStore):
    """The store written from "Writing a store" (tests/properties/graphflow_dict_store.py,
    checking none of its arguments), with artifacts."""

    features = StoreFeatures(artifacts=True)

    def __init__(self) -> None:
        super().__init__()
        self.artifact_rows: dict[tuple[str, str], tuple[bytes, str]] = {}

    async def put_artifact(self, run_id: str, name: str, data: bytes | str,
                           media_type: str = "application/octet-stream") -> None:
        self.artifact_rows[(run_id, name)] = (data if isinstance(data, bytes)
                                              else data.encode(), media_type)

    async def artifacts(self, run_id: str) -> list[dict[str, Any]]:
        return [{"name": name, "media_type": media, "size": len(content)}
                for (run, name), (content, media) in self.artifact_rows.items() if run == run_id]


class Order(BaseModel):
    n: int = 0
    note: str = ""


def _count(state: Order) -> dict[str, int]:
    return {"n": state.n + 1}


def _graph() -> CompiledGraph:
    g = Graph("edge-checks", Order)
    g.node("count", _count)
    return g.edge(START, "count").edge("count", END).compile()


@dataclass
class Env:
    store: Any
    rt: GraphRuntime
    graph: CompiledGraph
    run_id: str
    cp: Checkpoint


@pytest.fixture(params=["user", "memory", "sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    """Each kind of store, holding one completed run (and an artifact of it)."""
    store: Any
    if request.param == "user":
        store = NoChecksStore()
    elif request.param == "memory":
        store = InMemoryCheckpointStore()
    elif request.param == "sqlite":
        store = SQLiteCheckpointStore(tmp_path / "store.db")
    else:
        store = request.getfixturevalue("make_pg_store")()
    rt = GraphRuntime(store, clock=VirtualClock(), seed=3)
    graph = _graph()
    result = rt.invoke(graph, {"n": 1}, thread_id="thread-1")
    anyio.run(rt.attach, result.run_id, "report", b"r", "text/plain")
    cp = anyio.run(store.latest, result.run_id)
    assert cp is not None
    yield Env(store, rt, graph, result.run_id, cp)
    close = getattr(store, "close", None)
    if close is not None:
        close()


def contents(e: Env) -> Any:
    """What the store holds: every checkpoint, and the run's artifacts."""
    async def read() -> Any:
        return ([cp.model_dump(mode="json") for cp in await e.store.list()],
                await e.store.artifacts(e.run_id))
    return anyio.run(read)


def _fresh(e: Env) -> GraphRuntime:
    """A runtime over the same store that knows no graph (another process)."""
    return GraphRuntime(e.store, clock=VirtualClock(), seed=4)


CASES: dict[str, tuple[Callable[[Env], Any], str]] = {
    "fork-unknown-key": (
        lambda e: e.rt.fork(e.cp.id, {"nope": 1}),
        "fork({cp!r}, patch_state=...): key 'nope' is not a state key of graph 'edge-checks'; "
        "its keys are ['n', 'note']"),
    "fork-value-of-another-type": (
        lambda e: e.rt.fork(e.cp.id, {"n": "one"}),
        "fork({cp!r}, patch_state=...): 'one' does not fit state key 'n' of graph "
        "'edge-checks' (Input should be a valid integer, unable to parse string as an "
        "integer); pass a value of its type"),
    "fork-no-graph-known-unknown-key": (
        lambda e: _fresh(e).fork(e.cp.id, {"nope": 1}),
        "fork({cp!r}, patch_state=...): key 'nope' is not a state key of the checkpoint; its "
        "keys are ['n', 'note']"),
    "fork-no-graph-known-other-kind": (
        lambda e: _fresh(e).fork(e.cp.id, {"n": "one"}),
        "fork({cp!r}, patch_state=...): 'n' holds a number, not a str; patch it with a "
        "value of the same kind"),
    "fork-graph-of-another-id": (
        lambda e: e.rt.fork(e.cp.id, {"n": 2}, graph=Graph("other", Order).node(
            "count", _count).edge(START, "count").edge("count", END).compile()),
        "fork({cp!r}, graph=...): the checkpoint is of graph 'edge-checks', not 'other'; "
        "pass its own graph or none"),
    "fork-patch-not-json": (
        lambda e: e.rt.fork(e.cp.id, {"n": math.inf}),
        "fork({cp!r}, patch_state=...): the value of 'n' is not JSON: inf is not a JSON "
        "value (it does not round-trip); pass a value with a JSON form"),
    "fork-patch-not-a-dict": (
        lambda e: e.rt.fork(e.cp.id, 5),  # type: ignore[arg-type]
        "fork(patch_state=5): pass a dict of state keys to values, or None"),
    "fork-id-empty": (
        lambda e: e.rt.fork(""), "fork(checkpoint_id=''): checkpoint_id must not be empty"),
    "fork-thread-newline": (
        lambda e: e.rt.fork(e.cp.id, thread_id="t\n"),
        "fork(thread_id='t\\n'): it contains a control character ('\\n' at index 1); "
        "use printable characters only"),
    "history-limit-zero": (
        lambda e: anyio.run(lambda: e.rt.history(e.run_id, limit=0)),
        "history(limit=0): limit must be an int >= 1 or None"),
    "attach-name-empty": (
        lambda e: anyio.run(e.rt.attach, e.run_id, "", b"x"),
        "attach({run!r}, name=''): name must be a non-empty str"),
    "attach-data-int": (
        lambda e: anyio.run(e.rt.attach, e.run_id, "a", 5),
        "attach({run!r}, 'a'): data must be bytes or str, got int"),
    "waiting-limit-zero": (
        lambda e: anyio.run(lambda: e.rt.waiting(limit=0)),
        "GraphRuntime.waiting(limit=0): give an int >= 1, or None for every waiting run"),
    "resume-id-int": (
        lambda e: e.rt.resume(5),  # type: ignore[arg-type]
        "resume(run_or_checkpoint_id=5): run_or_checkpoint_id must be a str, got int"),
    "invoke-thread-empty": (
        lambda e: e.rt.invoke(e.graph, thread_id=""),
        "invoke(thread_id=''): thread_id must not be empty"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_store_gets_the_same_refusal_from_the_runtime_and_keeps_its_contents(
        env: Env, case: str) -> None:
    call, message = CASES[case]
    before = contents(env)
    with pytest.raises(InvalidArgument) as info:
        call(env)
    assert str(info.value) == message.format(cp=env.cp.id, run=env.run_id)
    assert contents(env) == before


def test_a_fork_through_the_runtime_stores_the_value_as_the_schema_reads_it(env: Env) -> None:
    """A patch that fits is stored in its validated JSON form; the fork resumes."""
    run = env.rt.fork(env.cp.id, {"n": 41.0, "note": "checked"})
    forked = anyio.run(env.store.latest, run)
    assert forked is not None
    assert forked.state == {"n": 41, "note": "checked"}
    assert forked.parent_id == env.cp.id


def test_a_store_applies_a_patch_as_given() -> None:
    """Whether a patch fits is the runtime's question: the store's own ``fork`` applies it
    after cloning (a resume then judges the state against the graph)."""
    store = InMemoryCheckpointStore()
    rt = GraphRuntime(store, clock=VirtualClock(), seed=3)
    result = rt.invoke(_graph(), {"n": 1})
    cp = anyio.run(store.latest, result.run_id)
    assert cp is not None
    run = anyio.run(store.fork, cp.id, {"extra": [1]})
    forked = anyio.run(store.latest, run)
    assert forked is not None
    assert forked.state == {"n": 2, "note": "", "extra": [1]}
