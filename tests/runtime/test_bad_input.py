"""Bad input, each with a test: invalid graphs, unknown ids, resuming what is not suspended,
wrong answers (which change nothing), non-JSON state values, caller misuse."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_graphflow import (
    END,
    START,
    CheckpointNotFound,
    Graph,
    GraphRuntime,
    GraphValidationError,
    InvalidArgument,
    NotSuspended,
    Resume,
    ResumeError,
    UnknownKey,
    UpdateRejected,
)

from .conftest import Boom, S, Script, chain_graph, collect, fan_graph, of, run, runtime, snapshot

pytestmark = pytest.mark.anyio


def noop(state: S) -> None:
    return None


# -- invalid graphs ----------------------------------------------------------------------------


def test_compile_lists_every_structural_problem_at_once() -> None:
    """SPEC §1: "compile() checks structure and raises GraphValidationError listing every
    problem (unknown node in an edge, unreachable node, no path to END, duplicate node, reserved
    name, branch target missing, ...), each with the node/edge it concerns." """
    g = Graph("broken", S)
    g.node("a", noop)
    g.node("a", noop)  # duplicate
    g.node(END, noop)  # reserved name
    g.node("island", noop)  # unreachable
    g.node("sink", noop)  # reachable, no path to END
    g.edge(START, "a")
    g.edge("a", "ghost")  # unknown node in an edge
    g.edge("a", "sink")
    g.branch("a", lambda s: "x", {"x": "phantom"})  # branch target missing
    g.edge("island", END)
    with pytest.raises(GraphValidationError) as info:
        g.compile()
    problems = info.value.problems
    text = str(info.value)
    expected = {
        "duplicate": "'a'",
        "reserved": repr(END),
        "unknown edge target": "'ghost'",
        "unreachable": "'island'",
        "no path to END": "'sink'",
        "branch target": "'phantom'",
    }
    for what, name in expected.items():
        assert any(name in p for p in problems), (what, problems)
        assert name in text, what
    assert len(problems) >= len(expected)
    assert info.value.graph_id == "broken"


@pytest.mark.parametrize(
    ("build", "names"),
    [
        (lambda g: g.edge(START, "a").edge("a", "nowhere").edge("a", END), ["'nowhere'"]),
        (lambda g: g.edge(START, "a").edge("a", END).node("b", noop), ["'b'"]),
        (lambda g: g.edge(START, "a").edge("a", "b").node("b", noop), ["'b'"]),
        (lambda g: g.edge(START, "a").edge("a", END).node("a", noop), ["'a'"]),
        (lambda g: g.edge(START, "a").edge("a", END).node(START, noop), [repr(START)]),
        (lambda g: g.edge(START, "a").branch("a", lambda s: "k", {"k": "gone"}), ["'gone'"]),
        (lambda g: g.edge("a", END), ["START"]),
        (lambda g: g.edge(START, "a").edge(["a", "zz"], END), ["'zz'"]),
    ],
    ids=["unknown-edge-node", "unreachable", "no-path-to-end", "duplicate", "reserved-name",
         "branch-target-missing", "no-entry", "unknown-join-source"],
)
def test_each_structural_problem_is_reported(build: Any, names: list[str]) -> None:
    """SPEC §1: each problem names the node or edge it concerns."""
    g = Graph("bad", S)
    g.node("a", noop)
    build(g)
    with pytest.raises(GraphValidationError) as info:
        g.compile()
    for name in names:
        assert any(name in p for p in info.value.problems), info.value.problems


BAD_GRAPH_IDS = [
    ("empty", ""),
    ("not-a-str", 7),
    ("newline", "billing\n"),
    ("tab", "bill\ting"),
    ("nul", "bill\x00ing"),
    ("lone-surrogate", "bill\ud800"),
    ("too-long", "g" * 513),
]


@pytest.mark.parametrize("graph_id", [g for _, g in BAD_GRAPH_IDS],
                         ids=[name for name, _ in BAD_GRAPH_IDS])
def test_a_graph_id_no_store_accepts_is_refused_by_graph(graph_id: Any) -> None:
    """Issue 23 (19): a graph id the stores refuse (their one id rule) is refused when the
    graph is built, naming the call and the fix, not mid-run after the run record was
    written."""
    with pytest.raises(InvalidArgument) as info:
        Graph(graph_id, S)
    assert str(info.value).startswith("Graph(graph_id=")


@pytest.mark.parametrize("graph_id", ["billing", "billing/v2", "g" * 512, "café ☕"],
                         ids=["plain", "slash", "longest", "non-ascii"])
async def test_a_graph_id_every_store_accepts_runs(graph_id: str, tmp_path: Any) -> None:
    """The passing twin: the same ids run to the end on a SQLite store."""
    from pytest_graphflow import SQLiteCheckpointStore, VirtualClock

    g = Graph(graph_id, S)
    g.node("a", noop).edge(START, "a").edge("a", END)
    store = SQLiteCheckpointStore(str(tmp_path / "ids.db"))
    try:
        result = await GraphRuntime(store=store, clock=VirtualClock(), seed=0).ainvoke(
            g.compile())
    finally:
        store.close()
    assert result.status == "completed"


def test_declared_destinations_make_targets_reachable() -> None:
    """SPEC §1: "Reachability counts static edges, branch targets and declared destinations"
    (the passing twin of the unreachable case)."""
    g = Graph("ok", S)
    g.node("a", noop, destinations=["b"])
    g.node("b", noop)
    g.edge(START, "a").edge("b", END)
    assert g.compile().graph_id == "ok"


# -- unknown ids, nothing to resume ------------------------------------------------------------


@pytest.mark.parametrize("ref", ["run-000000000000", "cp-000000000000-1", "nonsense"])
async def test_resuming_an_unknown_id_is_checkpoint_not_found(ref: str) -> None:
    """Seed 000 resume/resumeStream: "Throws When no checkpoint exists for the given
    identifier." (``CheckpointNotFound``; nothing is changed)."""
    rt = runtime()
    await rt.ainvoke(chain_graph(Script(interrupts={"one"})))
    before = await snapshot(rt.store)
    with pytest.raises(CheckpointNotFound):
        await rt.aresume(ref, Resume("x"))
    with pytest.raises(CheckpointNotFound):
        await collect(rt.resume_stream(ref))
    assert await snapshot(rt.store) == before


def test_sync_resume_of_an_unknown_id(anyio_backend: str) -> None:
    """Seed 000 resume "Throws When no checkpoint exists" — through the sync API."""
    rt = GraphRuntime(clock=runtime().clock, seed=0, backend=anyio_backend)
    with pytest.raises(CheckpointNotFound):
        rt.resume("run-000000000000")


async def test_resuming_a_completed_run_is_not_suspended() -> None:
    """Seed 004 NotSuspended: "resume was called on a thread that is not suspended." — by run
    id and by its final checkpoint id; nothing is changed."""
    rt = runtime()
    done = await rt.ainvoke(chain_graph(Script()))
    before = await snapshot(rt.store)
    for ref in (done.run_id, done.checkpoint_id):
        with pytest.raises(NotSuspended):
            await rt.aresume(ref)
        with pytest.raises(NotSuspended):
            await rt.aresume(ref, Resume("x"))
    assert await snapshot(rt.store) == before


# -- wrong answers ------------------------------------------------------------------------------


def _wrong(kind: str, keys: list[str]) -> Resume | None:
    return {
        "value-for-two": lambda: Resume("one answer"),
        "missing-key": lambda: Resume(answers={keys[0]: 1}),
        "unknown-key": lambda: Resume(answers={keys[0]: 1, keys[1]: 2, "task-x:q": 3}),
        "wrong-keys": lambda: Resume(answers={"task-x:q": 1, "task-y:q": 2}),
        "no-resume": lambda: None,
        "non-json-answer": lambda: Resume(answers={keys[0]: object(), keys[1]: 2}),
        "nan-answer": lambda: Resume(answers={keys[0]: math.nan, keys[1]: 2}),
    }[kind]()


@pytest.mark.parametrize("kind", ["value-for-two", "missing-key", "unknown-key", "wrong-keys",
                                  "no-resume", "non-json-answer", "nan-answer"])
async def test_wrong_answers_are_refused_and_change_nothing(kind: str) -> None:
    """Seed 004 ResumeError: "A resume was refused: no answers, an interrupt that is not
    parked, or an answer that does not decode." — nothing changes: the store is the same and a
    correct resume still works after."""
    script = Script(interrupts={"a", "b"})
    rt = runtime()
    paused = await rt.ainvoke(fan_graph(script))
    keys = sorted(paused.interrupts, key=lambda k: paused.interrupts[k].node)
    before = await snapshot(rt.store)
    calls = list(script.calls)
    with pytest.raises(ResumeError):
        await rt.aresume(paused.run_id, _wrong(kind, keys))
    with pytest.raises(ResumeError):
        await collect(rt.resume_stream(paused.run_id, _wrong(kind, keys)))
    assert await snapshot(rt.store) == before
    assert script.calls == calls  # no node ran
    result = await rt.aresume(paused.run_id, Resume(answers={keys[0]: "A", keys[1]: "B"}))
    assert result.status == "completed"
    assert script.got == {"a": "A", "b": "B"}


async def test_a_resume_value_for_a_run_without_pending_interrupts_is_refused() -> None:
    """Seed 001 Resume answers "every pending interrupt": a failed run has none, so a Resume is
    a ResumeError (SPEC §2: a failed run is resumed without a Resume); nothing changes."""
    script = Script(fails={"two": Boom("x")})
    rt = runtime()
    failed = await rt.ainvoke(chain_graph(script))
    before = await snapshot(rt.store)
    with pytest.raises(ResumeError):
        await rt.aresume(failed.run_id, Resume("unexpected"))
    assert await snapshot(rt.store) == before
    script.fails.clear()
    assert (await rt.aresume(failed.run_id)).status == "completed"


# -- non-JSON state values ----------------------------------------------------------------------


class Opaque:
    """Something with no JSON form."""


@pytest.mark.parametrize(
    ("patch", "key"),
    [({"answer": Opaque()}, "answer"), ({"answer": math.nan}, "answer"),
     ({"answers": [{"deep": Opaque()}]}, "answers"), ({"answer": math.inf}, "answer")],
    ids=["object", "nan", "nested-object", "inf"],
)
async def test_a_non_json_state_value_fails_the_run_naming_node_and_key(patch: dict[str, Any],
                                                                       key: str) -> None:
    """SPEC §1: "State is a pydantic model; its values must round-trip through JSON
    (checkpoints are JSON)." — a clear error naming the node and the key, the run fails, and
    the bad value is in no checkpoint."""
    g = Graph("json", S)
    g.node("fine", lambda s: {"n": 1})
    g.node("culprit", lambda s: patch)
    g.edge(START, "fine").edge("fine", "culprit").edge("culprit", END)
    rt = runtime()
    events, result = await run(rt, g.compile())
    assert result.status == "failed"
    assert isinstance(result.error, UpdateRejected)
    assert result.error.node == "culprit"
    assert result.error.key == key
    assert "'culprit'" in str(result.error)
    assert f"'{key}'" in str(result.error)
    (error,) = of(events, "error")
    assert error.node == "culprit"
    for cp in await rt.store.list(result.run_id):
        assert cp.state["answer"] is None
        assert cp.state["answers"] == []
        assert all(out.node != "culprit" for out in cp.completed.values())
        cp.model_dump_json()  # every stored checkpoint is JSON


async def test_non_json_input_is_refused_by_the_call() -> None:
    """SPEC §6: "stream/ainvoke themselves raise ... for misuse by the caller (bad
    arguments...)" — a non-JSON input value, an unknown input key."""
    rt = runtime()
    with pytest.raises(UpdateRejected):
        await rt.ainvoke(chain_graph(Script()), {"answer": Opaque()})
    with pytest.raises(UnknownKey):
        await rt.ainvoke(chain_graph(Script()), {"nope": 1})
    assert await rt.store.list() == []


async def test_bad_run_options_are_invalid_arguments() -> None:
    """SPEC §2 run options are ``max_supersteps``, ``timeout``, ``on_interrupt``,
    ``tenant_id``; stream modes are seed 001's. Anything else is ``InvalidArgument``."""
    rt = runtime()
    with pytest.raises(InvalidArgument):
        await rt.ainvoke(chain_graph(Script()), retries=3)
    with pytest.raises(InvalidArgument):
        await rt.ainvoke(chain_graph(Script()), timeout=-1)
    with pytest.raises(InvalidArgument):
        await rt.ainvoke(Graph("uncompiled", S))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await rt.aresume("run-x", "yes")  # type: ignore[arg-type]


def test_an_invalid_stream_mode_is_invalid_argument_and_warns_nothing() -> None:
    """Seed 001 StreamEvent modes; SPEC §2 ``stream(..., mode=)`` — another mode is
    ``InvalidArgument``, raised cleanly (the half-built stream must not fail later in
    ``__del__``: pytest runs with ``filterwarnings=error``)."""
    import gc

    rt = runtime()
    with pytest.raises(InvalidArgument):
        rt.stream(chain_graph(Script()), mode="tokens-please")  # type: ignore[arg-type]
    gc.collect()


def test_with_policy_keeps_structure_and_rejects_unknown_policies() -> None:
    """CompiledGraph.with_policy: the same graph (revision included) under another policy."""
    from pydantic import BaseModel

    from pytest_graphflow import END, START, Graph, GraphRuntime, InvalidArgument, VirtualClock

    class S(BaseModel):
        n: int = 0

    g = Graph("policy", S)
    g.node("a", lambda s: {"n": s.n + 1})
    g.edge(START, "a")
    g.edge("a", END)
    graph = g.compile()
    never = graph.with_policy("never")

    assert never.revision == graph.revision
    assert never.checkpoint_policy == "never"
    assert graph.checkpoint_policy == "every_step"  # the original is unchanged
    assert graph.with_policy("every_step") is graph
    runtime = GraphRuntime(clock=VirtualClock(), seed=0)
    # A run that never halts saves nothing under "never"; "every_step" saves input + step.
    assert runtime.trace(never, {}).events.of_type("checkpoint_saved") == []
    assert len(runtime.trace(graph, {}).events.of_type("checkpoint_saved")) == 2
    with pytest.raises(InvalidArgument, match="with_policy"):
        graph.with_policy("sometimes")  # type: ignore[arg-type]
