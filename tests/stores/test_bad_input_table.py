"""Bad input through every public entry (issue 12): the runtime constructor, invoke/stream/
start/resume/recover/history, every store method on every store (in-memory, SQLite,
PostgreSQL), the PostgreSQL store's run queue and the ``graphflow`` command.

Each case must raise the ``GraphflowError`` subclass it names (never a raw exception, never
silently accepted), with a message naming the argument, and the store file's bytes must be
unchanged. A node whose update cannot be stored fails its run with ``UpdateRejected`` in the
result, and the thread stays usable."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CheckpointNotFound,
    Graph,
    GraphflowError,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    NothingToRecover,
    NotSuspended,
    Resume,
    SQLiteCheckpointStore,
    UnknownKey,
    UpdateRejected,
    VirtualClock,
)
from pytest_graphflow._cli._main import main
from pytest_graphflow._engine._runtime import CompiledGraph
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._json import MAX_DEPTH


class S(BaseModel):
    n: int = 0
    data: Any = None


def _step(state: S) -> dict[str, Any]:
    return {"n": state.n + 1}


def _graph() -> CompiledGraph:
    g = Graph("bad-input", S)
    g.node("a", _step)
    return g.edge(START, "a").edge("a", END).compile()


@dataclass
class Env:
    path: Path | None
    store: Any
    rt: GraphRuntime
    graph: CompiledGraph
    run_id: str
    thread_id: str
    cp: Checkpoint


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    path = tmp_path / "store.db"
    store = SQLiteCheckpointStore(path)
    rt = GraphRuntime(store, clock=VirtualClock(), seed=7)
    graph = _graph()
    result = rt.invoke(graph, thread_id="thread-1")
    cp = anyio.run(store.latest, result.run_id)
    assert cp is not None
    yield Env(path, store, rt, graph, result.run_id, "thread-1", cp)
    store.close()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    """Each store with one completed run, an artifact, a live claim (and, on PostgreSQL, a
    queued job)."""
    kind = request.param
    path = tmp_path / "store.db"
    store: Any
    if kind == "memory":
        store = InMemoryCheckpointStore()
    elif kind == "sqlite":
        store = SQLiteCheckpointStore(path)
    else:
        store = request.getfixturevalue("make_pg_store")()
    rt = GraphRuntime(store, clock=VirtualClock(), seed=7)
    graph = _graph()
    result = rt.invoke(graph, thread_id="thread-1")
    cp = anyio.run(store.latest, result.run_id)
    assert cp is not None

    async def extras() -> None:
        await store.put_artifact(result.run_id, "report", b"r", "text/plain")
        await store.claim("thread-c", "run-c", now=NOW)
        if kind == "postgres":
            await store.enqueue("bad-input", {"n": 1}, thread_id="thread-q")

    anyio.run(extras)
    yield Env(path if kind == "sqlite" else None, store, rt, graph, result.run_id, "thread-1",
              cp)
    store.close()


def contents(e: Env) -> Any:
    """Everything the store holds that a bad call could change (and the file's bytes)."""
    store = e.store

    async def read() -> list[Any]:
        out = [await store.list(), await store.runs(), await store.events(e.run_id),
               await store.artifacts(e.run_id), await store.get_artifact(e.run_id, "report"),
               await store.current_claim("thread-c"), await store.current_claim(e.thread_id)]
        if hasattr(store, "jobs"):
            out.append(await store.jobs())
        return out

    return anyio.run(read), None if e.path is None else files(e.path)


def files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (path, path.with_name(path.name + "-wal"))
            if p.exists()}


NOW = datetime(2025, 1, 1, tzinfo=UTC)
DEEP: Any = 0
for _ in range(150):
    DEEP = [DEEP]
LONG = "x" * 600


def _cp(e: Env, **changes: Any) -> Checkpoint:
    return e.cp.clone(**{"id": "cp-new", **changes})


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[Env], Any]
    error: type[GraphflowError]
    says: str


CASES = [
    # -- GraphRuntime(...) --
    Case("runtime-store-not-a-store", lambda e: GraphRuntime("file.db"), InvalidArgument,  # type: ignore[arg-type]
         "CheckpointStore"),
    Case("runtime-clock-str", lambda e: GraphRuntime(e.store, clock="wall"),  # type: ignore[arg-type]
         InvalidArgument, "clock"),
    Case("runtime-seed-str", lambda e: GraphRuntime(e.store, seed="1"),  # type: ignore[arg-type]
         InvalidArgument, "seed"),
    Case("runtime-max-supersteps-zero", lambda e: GraphRuntime(e.store, max_supersteps=0),
         InvalidArgument, "max_supersteps"),
    Case("runtime-timeout-negative", lambda e: GraphRuntime(e.store, timeout=-1),
         InvalidArgument, "timeout"),
    Case("runtime-on-interrupt-int", lambda e: GraphRuntime(e.store, on_interrupt=5),  # type: ignore[arg-type]
         InvalidArgument, "on_interrupt"),
    Case("runtime-on-leg-int", lambda e: GraphRuntime(e.store, on_leg=5),  # type: ignore[arg-type]
         InvalidArgument, "on_leg"),
    Case("runtime-tenant-empty", lambda e: GraphRuntime(e.store, tenant_id=""),
         InvalidArgument, "tenant_id"),
    Case("runtime-tenant-newline", lambda e: GraphRuntime(e.store, tenant_id="t\n"),
         InvalidArgument, "control character"),
    Case("runtime-claim-ttl-negative", lambda e: GraphRuntime(e.store, claim_ttl=-1),
         InvalidArgument, "claim_ttl"),
    Case("runtime-claim-ttl-str", lambda e: GraphRuntime(e.store, claim_ttl="30"),  # type: ignore[arg-type]
         InvalidArgument, "claim_ttl"),
    Case("runtime-backend-bogus", lambda e: GraphRuntime(e.store, backend="bogus"),
         InvalidArgument, "backend"),
    Case("runtime-policy-bogus", lambda e: GraphRuntime(e.store, checkpoint_policy="x"),  # type: ignore[arg-type]
         InvalidArgument, "checkpoint_policy"),
    # -- invoke / stream / start --
    Case("invoke-graph-uncompiled", lambda e: e.rt.invoke(Graph("g", S)),  # type: ignore[arg-type]
         InvalidArgument, "compile()"),
    Case("invoke-input-int", lambda e: e.rt.invoke(e.graph, 5),  # type: ignore[arg-type]
         InvalidArgument, "input"),
    Case("invoke-input-unknown-key", lambda e: e.rt.invoke(e.graph, {"nope": 1}),
         UnknownKey, "nope"),
    Case("invoke-input-nan", lambda e: e.rt.invoke(e.graph, {"data": math.nan}),
         UpdateRejected, "JSON"),
    Case("invoke-input-lone-surrogate", lambda e: e.rt.invoke(e.graph, {"data": "\ud800"}),
         UpdateRejected, "surrogate"),
    Case("invoke-input-too-deep", lambda e: e.rt.invoke(e.graph, {"data": DEEP}),
         UpdateRejected, "levels"),
    Case("invoke-input-set", lambda e: e.rt.invoke(e.graph, {"data": {"b", "a"}}),
         UpdateRejected, "a set has no order"),
    Case("invoke-input-complex", lambda e: e.rt.invoke(e.graph, {"data": 1 + 2j}),
         UpdateRejected, "a complex number"),
    Case("invoke-input-int-key", lambda e: e.rt.invoke(e.graph, {"data": {1: "a"}}),
         UpdateRejected, "dict key 1 is not a string"),
    Case("invoke-thread-int", lambda e: e.rt.invoke(e.graph, thread_id=123),  # type: ignore[arg-type]
         InvalidArgument, "thread_id"),
    Case("invoke-thread-empty", lambda e: e.rt.invoke(e.graph, thread_id=""),
         InvalidArgument, "thread_id"),
    Case("invoke-thread-newline", lambda e: e.rt.invoke(e.graph, thread_id="t\n"),
         InvalidArgument, "control character"),
    Case("invoke-thread-escape", lambda e: e.rt.invoke(e.graph, thread_id="\x1b[31mred"),
         InvalidArgument, "control character"),
    Case("invoke-thread-surrogate", lambda e: e.rt.invoke(e.graph, thread_id="t\udc80"),
         InvalidArgument, "lone surrogate"),
    Case("invoke-thread-too-long", lambda e: e.rt.invoke(e.graph, thread_id=LONG),
         InvalidArgument, "at most"),
    Case("invoke-unknown-option", lambda e: e.rt.invoke(e.graph, retries=3),
         InvalidArgument, "retries"),
    Case("invoke-tenant-option-int", lambda e: e.rt.invoke(e.graph, tenant_id=5),
         InvalidArgument, "tenant_id"),
    Case("stream-thread-int", lambda e: e.rt.stream(e.graph, thread_id=5),  # type: ignore[arg-type]
         InvalidArgument, "thread_id"),
    Case("start-thread-empty", lambda e: e.rt.start(e.graph, thread_id=""),
         InvalidArgument, "thread_id"),
    # -- resume / recover / history --
    Case("resume-id-int", lambda e: e.rt.resume(5), InvalidArgument, "run_or_checkpoint_id"),  # type: ignore[arg-type]
    Case("resume-id-empty", lambda e: e.rt.resume(""), InvalidArgument, "must not be empty"),
    Case("resume-id-newline", lambda e: e.rt.resume("run-1\n"), InvalidArgument,
         "control character"),
    Case("resume-unknown-id", lambda e: e.rt.resume("run-nope"), CheckpointNotFound,
         "run-nope"),
    Case("resume-answer-not-resume", lambda e: e.rt.resume(e.run_id, "yes"),  # type: ignore[arg-type]
         InvalidArgument, "Resume"),
    Case("resume-completed-run", lambda e: e.rt.resume(e.run_id, graph=e.graph),
         NotSuspended, "completed"),
    Case("resume-stream-id-none", lambda e: e.rt.resume_stream(None),  # type: ignore[arg-type]
         InvalidArgument, "run_or_checkpoint_id"),
    Case("recover-thread-int", lambda e: e.rt.recover(5), InvalidArgument, "thread_id"),  # type: ignore[arg-type]
    Case("recover-thread-empty", lambda e: e.rt.recover(""), InvalidArgument, "thread_id"),
    Case("recover-completed-thread", lambda e: e.rt.recover(e.thread_id), NothingToRecover,
         "thread-1"),
    Case("recover-graph-uncompiled", lambda e: e.rt.recover(e.thread_id, graph=Graph("g", S)),  # type: ignore[arg-type]
         InvalidArgument, "compile()"),
    Case("history-run-int", lambda e: e.rt.history(5), InvalidArgument, "run_id"),  # type: ignore[arg-type]
    Case("history-limit-zero", lambda e: e.rt.history(e.run_id, limit=0), InvalidArgument,
         "limit"),
    Case("history-limit-bool", lambda e: e.rt.history(e.run_id, limit=True), InvalidArgument,
         "limit"),
    Case("history-before-unknown", lambda e: e.rt.history(e.run_id, limit=2, before="cp-no"),
         CheckpointNotFound, "cp-no"),
    # -- the SQLite store --
    Case("store-path-int", lambda e: SQLiteCheckpointStore(5), InvalidArgument, "path"),  # type: ignore[arg-type]
    Case("store-path-empty", lambda e: SQLiteCheckpointStore(""), InvalidArgument, "path"),
    Case("store-readonly-str", lambda e: SQLiteCheckpointStore(e.path, readonly="yes"),  # type: ignore[arg-type]
         InvalidArgument, "readonly"),
    Case("store-synchronous-unknown",
         lambda e: SQLiteCheckpointStore(e.path, synchronous="extra"),  # type: ignore[arg-type]
         InvalidArgument, "synchronous='extra'"),
    Case("store-synchronous-upper",
         lambda e: SQLiteCheckpointStore(e.path, synchronous="OFF"),  # type: ignore[arg-type]
         InvalidArgument, "'normal' (the default), 'full' or 'off'"),
    Case("store-synchronous-int", lambda e: SQLiteCheckpointStore(e.path, synchronous=0),  # type: ignore[arg-type]
         InvalidArgument, "synchronous=0"),
    Case("store-claim-ttl-zero", lambda e: SQLiteCheckpointStore(e.path, claim_ttl=0),
         InvalidArgument, "ttl"),
]



DEEP_300: Any = 0
for _ in range(300):
    DEEP_300 = [DEEP_300]

# Every store method, on every store (in-memory, SQLite, PostgreSQL): the same checks, one rule
# each (``_stores/_args.py``, ``_records/_checks.py``, ``_stores/_claims.py``).
STORE_CASES = [
    Case("save-not-a-checkpoint", lambda e: e.store.save({"id": "x"}),  # type: ignore[arg-type]
         InvalidArgument, "Checkpoint"),
    Case("save-id-empty", lambda e: e.store.save(_cp(e, id="")), InvalidArgument,
         "checkpoint.id"),
    Case("save-thread-int", lambda e: e.store.save(_cp(e, thread_id=123)), InvalidArgument,
         "checkpoint.thread_id"),
    Case("save-run-newline", lambda e: e.store.save(_cp(e, run_id="run\n")), InvalidArgument,
         "control character"),
    Case("save-state-surrogate", lambda e: e.store.save(_cp(e, state={"data": "\ud800"})),
         InvalidArgument, "cannot be stored"),
    Case("get-int", lambda e: e.store.get(5), InvalidArgument, "checkpoint_id"),  # type: ignore[arg-type]
    Case("get-empty", lambda e: e.store.get(""), InvalidArgument, "checkpoint_id"),
    Case("latest-none", lambda e: e.store.latest(None), InvalidArgument, "run_id"),  # type: ignore[arg-type]
    Case("load-node-int", lambda e: e.store.load(e.run_id, 5), InvalidArgument, "node_id"),  # type: ignore[arg-type]
    Case("list-thread-int", lambda e: e.store.list(thread_id=5), InvalidArgument,  # type: ignore[arg-type]
         "thread_id"),
    Case("list-limit-negative", lambda e: e.store.list(limit=-1), InvalidArgument, "limit"),
    Case("list-before-unknown", lambda e: e.store.list(before="cp-no"), CheckpointNotFound,
         "cp-no"),
    Case("delete-empty", lambda e: e.store.delete(""), InvalidArgument, "checkpoint_id"),
    Case("fork-id-int", lambda e: e.store.fork(5), InvalidArgument, "checkpoint_id"),  # type: ignore[arg-type]
    Case("fork-unknown", lambda e: e.store.fork("cp-no"), CheckpointNotFound, "cp-no"),
    Case("fork-patch-not-a-dict", lambda e: e.store.fork(e.cp.id, 5),  # type: ignore[arg-type]
         InvalidArgument, "patch_state"),
    Case("fork-patch-not-json", lambda e: e.store.fork(e.cp.id, {"n": math.inf}),
         InvalidArgument, "not JSON"),
    Case("fork-patch-set", lambda e: e.store.fork(e.cp.id, {"data": {1, 2}}),
         InvalidArgument, "a set has no order"),
    Case("prune-keep-negative", lambda e: e.store.prune(e.run_id, -1), InvalidArgument,
         "keep_last"),
    Case("prune-keep-bool", lambda e: e.store.prune(e.run_id, True), InvalidArgument,
         "keep_last"),
    Case("prune-run-empty", lambda e: e.store.prune("", 1), InvalidArgument, "run_id"),
    Case("record-events-not-a-list", lambda e: e.store.record_events(e.run_id, "x"),  # type: ignore[arg-type]
         InvalidArgument, "list"),
    Case("record-events-seq-str", lambda e: e.store.record_events(e.run_id, [{"seq": "1"}]),
         InvalidArgument, "seq"),
    Case("record-events-nan", lambda e: e.store.record_events(
        e.run_id, [{"seq": 99, "x": math.nan}]), InvalidArgument, "not JSON"),
    Case("record-events-surrogate", lambda e: e.store.record_events(
        e.run_id, [{"seq": 99, "x": "\udfff"}]), InvalidArgument, "not JSON"),
    Case("record-events-object", lambda e: e.store.record_events(
        e.run_id, [{"seq": 99, "x": object()}]), InvalidArgument, "not JSON"),
    Case("record-events-set", lambda e: e.store.record_events(
        e.run_id, [{"seq": 99, "x": {1, 2}}]), InvalidArgument, "a set has no order"),
    Case("record-events-int-key", lambda e: e.store.record_events(
        e.run_id, [{"seq": 99, "x": {1: "a"}}]), InvalidArgument, "dict key 1"),
    Case("commit-event-set", lambda e: e.store.commit(
        e.thread_id, 1, run_id=e.run_id, events=[{"seq": 99, "x": [{2, 1}]}]),
         InvalidArgument, "a set has no order"),
    Case("commit-event-complex", lambda e: e.store.commit(
        e.thread_id, 1, run_id=e.run_id, events=[{"seq": 99, "x": 1j}]),
         InvalidArgument, "a complex number"),
    Case("record-events-run-newline", lambda e: e.store.record_events("r\n", [{"seq": 1}]),
         InvalidArgument, "control character"),
    Case("events-after-str", lambda e: e.store.events(e.run_id, "1"),  # type: ignore[arg-type]
         InvalidArgument, "after_seq"),
    Case("compact-before-negative", lambda e: e.store.compact_events(e.run_id, -1),
         InvalidArgument, "before_seq"),
    Case("record-run-not-a-dict", lambda e: e.store.record_run(5),  # type: ignore[arg-type]
         InvalidArgument, "run record"),
    Case("record-run-id-empty", lambda e: e.store.record_run({"run_id": ""}),
         InvalidArgument, "run_id"),
    Case("record-run-id-escape", lambda e: e.store.record_run({"run_id": "r\x1b"}),
         InvalidArgument, "control character"),
    Case("run-int", lambda e: e.store.run(5), InvalidArgument, "run_id"),  # type: ignore[arg-type]
    Case("put-artifact-name-empty", lambda e: e.store.put_artifact(e.run_id, "", b"x"),
         InvalidArgument, "name"),
    Case("put-artifact-data-int", lambda e: e.store.put_artifact(e.run_id, "a", 5),  # type: ignore[arg-type]
         InvalidArgument, "bytes or str"),
    Case("put-artifact-media-newline", lambda e: e.store.put_artifact(
        e.run_id, "a", b"x", "text/\nplain"), InvalidArgument, "control character"),
    Case("get-artifact-name-int", lambda e: e.store.get_artifact(e.run_id, 5),  # type: ignore[arg-type]
         InvalidArgument, "name"),
    Case("artifacts-run-empty", lambda e: e.store.artifacts(""), InvalidArgument, "run_id"),
    Case("claim-thread-empty", lambda e: e.store.claim("", "run-x", now=NOW),
         InvalidArgument, "thread_id"),
    Case("claim-now-naive", lambda e: e.store.claim("t", "run-x", now=datetime(2025, 1, 1)),
         InvalidArgument, "timezone-aware"),
    Case("claim-ttl-zero", lambda e: e.store.claim("t", "run-x", now=NOW, ttl=0),
         InvalidArgument, "ttl"),
    Case("renew-token-str", lambda e: e.store.renew("t", "1", now=NOW),  # type: ignore[arg-type]
         InvalidArgument, "token"),
    Case("release-thread-int", lambda e: e.store.release(5, 1), InvalidArgument,  # type: ignore[arg-type]
         "thread_id"),
    Case("current-claim-thread-int", lambda e: e.store.current_claim(5),  # type: ignore[arg-type]
         InvalidArgument, "thread_id"),
    Case("get-nul", lambda e: e.store.get("cp-\x00"), InvalidArgument, "control character"),
    Case("save-id-nul", lambda e: e.store.save(_cp(e, id="cp-\x00")), InvalidArgument,
         "control character"),
    Case("save-node-int", lambda e: e.store.save(_cp(e, node_id=5)), InvalidArgument,
         "checkpoint.node_id"),
    Case("save-state-nested-150-levels", lambda e: e.store.save(_cp(e, state={"data": DEEP})),
         InvalidArgument, "nests deeper than 105 levels"),
    Case("commit-state-nested-150-levels", lambda e: e.store.commit(
        e.thread_id, 1, run_id=e.run_id, checkpoints=[_cp(e, state={"data": DEEP})]),
         InvalidArgument, "a checkpoint's values nest at most 100 levels"),
    Case("save-state-too-deep-to-serialise", lambda e: e.store.save(
        _cp(e, state={"data": DEEP_300})), InvalidArgument, "cannot be stored"),
    Case("latest-nul", lambda e: e.store.latest("run-\x00"), InvalidArgument,
         "control character"),
    Case("load-run-empty", lambda e: e.store.load(""), InvalidArgument, "run_id"),
    Case("list-run-nul", lambda e: e.store.list("run\x00"), InvalidArgument,
         "control character"),
    Case("list-limit-bool", lambda e: e.store.list(limit=True), InvalidArgument, "limit"),
    Case("list-before-int", lambda e: e.store.list(before=5), InvalidArgument, "before"),  # type: ignore[arg-type]
    Case("delete-int", lambda e: e.store.delete(5), InvalidArgument, "checkpoint_id"),  # type: ignore[arg-type]
    Case("fork-thread-newline", lambda e: e.store.fork(e.cp.id, thread_id="t\n"),
         InvalidArgument, "control character"),
    Case("prune-run-nul", lambda e: e.store.prune("run\x00", 1), InvalidArgument,
         "control character"),
    Case("record-events-run-int", lambda e: e.store.record_events(5, [{"seq": 1}]),  # type: ignore[arg-type]
         InvalidArgument, "run_id"),
    Case("record-events-too-deep", lambda e: e.store.record_events(
        e.run_id, [{"seq": 99, "x": DEEP_300}]), InvalidArgument, "not JSON"),
    Case("events-run-nul", lambda e: e.store.events("run\x00"), InvalidArgument,
         "control character"),
    Case("compact-run-int", lambda e: e.store.compact_events(5, 1), InvalidArgument,  # type: ignore[arg-type]
         "run_id"),
    Case("commit-thread-nul", lambda e: e.store.commit("t\x00", 1, run_id=e.run_id),
         InvalidArgument, "control character"),
    Case("commit-run-int", lambda e: e.store.commit(e.thread_id, 1, run_id=5),  # type: ignore[arg-type]
         InvalidArgument, "run_id"),
    Case("commit-checkpoint-id-nul", lambda e: e.store.commit(
        e.thread_id, 1, run_id=e.run_id, checkpoints=[_cp(e, id="cp-\x00")]),
         InvalidArgument, "control character"),
    Case("record-run-id-nul", lambda e: e.store.record_run({"run_id": "r\x00"}),
         InvalidArgument, "control character"),
    Case("run-nul", lambda e: e.store.run("run\x00"), InvalidArgument, "control character"),
    Case("put-artifact-text-surrogate", lambda e: e.store.put_artifact(
        e.run_id, "a", "ok\udc80"), InvalidArgument, "the text contains a lone surrogate "
         "('\\udc80' at index 2)"),
    Case("put-artifact-name-surrogate", lambda e: e.store.put_artifact(
        e.run_id, "a\ud800", b"x"), InvalidArgument, "lone surrogate"),
    Case("put-artifact-media-surrogate", lambda e: e.store.put_artifact(
        e.run_id, "a", b"x", "text/\ud800"), InvalidArgument, "lone surrogate"),
    Case("put-artifact-run-nul", lambda e: e.store.put_artifact("run\x00", "a", b"x"),
         InvalidArgument, "control character"),
    Case("get-artifact-run-nul", lambda e: e.store.get_artifact("run\x00", "a"),
         InvalidArgument, "control character"),
    Case("artifacts-run-int", lambda e: e.store.artifacts(5), InvalidArgument, "run_id"),  # type: ignore[arg-type]
    Case("claim-run-nul", lambda e: e.store.claim("t", "run\x00", now=NOW),
         InvalidArgument, "control character"),
    Case("claim-thread-int", lambda e: e.store.claim(5, "run-x", now=NOW),  # type: ignore[arg-type]
         InvalidArgument, "thread_id"),
    Case("renew-thread-nul", lambda e: e.store.renew("t\x00", 1, now=NOW), InvalidArgument,
         "control character"),
    Case("release-thread-empty", lambda e: e.store.release("", 1), InvalidArgument,
         "thread_id"),
    Case("current-claim-thread-nul", lambda e: e.store.current_claim("t\x00"),
         InvalidArgument, "control character"),
]

# The PostgreSQL store's run queue.
QUEUE_CASES = [
    Case("enqueue-graph-int", lambda e: e.store.enqueue(5), InvalidArgument, "graph_id"),
    Case("enqueue-graph-empty", lambda e: e.store.enqueue(""), InvalidArgument, "graph_id"),
    Case("enqueue-graph-nul", lambda e: e.store.enqueue("g\x00"), InvalidArgument,
         "control character"),
    Case("enqueue-input-list", lambda e: e.store.enqueue("g", [1, 2]), InvalidArgument,
         "the input is a dict"),
    Case("enqueue-input-nan", lambda e: e.store.enqueue("g", {"n": math.nan}),
         InvalidArgument, "not JSON"),
    Case("enqueue-thread-int", lambda e: e.store.enqueue("g", thread_id=5), InvalidArgument,
         "thread_id"),
    Case("enqueue-thread-nul", lambda e: e.store.enqueue("g", thread_id="t\x00"),
         InvalidArgument, "control character"),
    Case("enqueue-tenant-int", lambda e: e.store.enqueue("g", tenant_id=5), InvalidArgument,
         "tenant_id"),
    Case("enqueue-tenant-newline", lambda e: e.store.enqueue("g", tenant_id="t\n"),
         InvalidArgument, "control character"),
    Case("enqueue-queued-thread", lambda e: e.store.enqueue("g", thread_id="thread-q"),
         InvalidArgument, "already has a queued job"),
    Case("enqueue-resume-thread-int", lambda e: e.store.enqueue_resume(5), InvalidArgument,
         "thread_id"),
    Case("enqueue-resume-thread-nul", lambda e: e.store.enqueue_resume("t\x00"),
         InvalidArgument, "control character"),
    Case("enqueue-resume-answers-list", lambda e: e.store.enqueue_resume(
        "thread-q", answers=[1]), InvalidArgument, "answers is a dict"),
    Case("enqueue-resume-recover-str", lambda e: e.store.enqueue_resume(
        "thread-q", recover="yes"), InvalidArgument, "recover is True or False"),
    Case("enqueue-resume-still-queued", lambda e: e.store.enqueue_resume("thread-q", 1),
         InvalidArgument, "no ended job"),
    Case("take-job-worker-int", lambda e: e.store.take_job(5, now=NOW, hold=1),
         InvalidArgument, "worker"),
    Case("take-job-worker-nul", lambda e: e.store.take_job("w\x00", now=NOW, hold=1),
         InvalidArgument, "control character"),
    Case("take-job-hold-negative", lambda e: e.store.take_job("w", now=NOW, hold=-1),
         InvalidArgument, "hold must be a positive number"),
    Case("take-job-hold-nan", lambda e: e.store.take_job("w", now=NOW, hold=math.nan),
         InvalidArgument, "hold must be a positive number"),
    Case("take-job-hold-str", lambda e: e.store.take_job("w", now=NOW, hold="5"),
         InvalidArgument, "hold must be a positive number"),
    Case("take-job-now-naive", lambda e: e.store.take_job(
        "w", now=datetime(2025, 1, 1), hold=1), InvalidArgument, "timezone-aware"),
    Case("take-job-graph-ids-str", lambda e: e.store.take_job(
        "w", now=NOW, hold=1, graph_ids="bad-input"), InvalidArgument, "a list of graph ids"),
    Case("take-job-graph-id-nul", lambda e: e.store.take_job(
        "w", now=NOW, hold=1, graph_ids=["g\x00"]), InvalidArgument, "control character"),
    Case("note-error-thread-nul", lambda e: e.store.note_error("t\x00", "boom"),
         InvalidArgument, "control character"),
    Case("note-error-error-int", lambda e: e.store.note_error("thread-q", 5),
         InvalidArgument, "error is a str"),
    Case("finish-job-thread-int", lambda e: e.store.finish_job(5, "completed"),
         InvalidArgument, "thread_id"),
    Case("finish-job-status-bogus", lambda e: e.store.finish_job("thread-q", "done"),
         InvalidArgument, "status='done'"),
    Case("finish-job-run-nul", lambda e: e.store.finish_job(
        "thread-q", "completed", run_id="r\x00"), InvalidArgument, "control character"),
    Case("finish-job-error-int", lambda e: e.store.finish_job(
        "thread-q", "failed", error=5), InvalidArgument, "error is a str or None"),
    Case("jobs-status-bogus", lambda e: e.store.jobs("done"), InvalidArgument,
         "status='done'"),
]


def _settle(result: Any) -> Any:
    if inspect.isawaitable(result):
        async def wait() -> Any:
            return await result

        return anyio.run(wait)
    return result


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_clearly_and_changes_nothing(env: Env, case: Case) -> None:
    before = files(env.path)
    listed = anyio.run(env.store.list)

    def call() -> Any:
        result = case.call(env)
        if inspect.isawaitable(result):
            async def wait() -> Any:
                return await result

            return anyio.run(wait)
        return result

    with pytest.raises(GraphflowError) as caught:
        call()
    assert type(caught.value) is case.error or isinstance(caught.value, case.error), \
        caught.value
    assert case.says in str(caught.value)
    assert files(env.path) == before
    assert anyio.run(env.store.list) == listed


def _refused_and_unchanged(e: Env, case: Case) -> None:
    before = contents(e)
    with pytest.raises(GraphflowError) as caught:  # never a raw error, never accepted
        _settle(case.call(e))
    assert isinstance(caught.value, case.error), caught.value
    assert case.says in str(caught.value)
    assert contents(e) == before


@pytest.mark.parametrize("case", STORE_CASES, ids=[c.id for c in STORE_CASES])
def test_every_store_refuses_bad_input_clearly_and_changes_nothing(
    store_env: Env, case: Case
) -> None:
    _refused_and_unchanged(store_env, case)


@pytest.mark.parametrize("store_env", ["postgres"], indirect=True)
@pytest.mark.parametrize("case", QUEUE_CASES, ids=[c.id for c in QUEUE_CASES])
def test_the_run_queue_refuses_bad_input_clearly_and_changes_nothing(
    store_env: Env, case: Case
) -> None:
    _refused_and_unchanged(store_env, case)


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def test_a_state_at_the_nesting_limit_is_stored_by_every_store(store_env: Env) -> None:
    """docs/stores.md: "a checkpoint's values must have a JSON form nesting at most 100
    levels" -- a value of exactly 100 levels runs and reads back on every store (its events
    hold it a few levels further down)."""
    def deep(levels: int) -> CompiledGraph:
        g = Graph("deep", S)
        g.node("a", _Node({"data": _nested(levels)}))
        return g.edge(START, "a").edge("a", END).compile()

    rt = GraphRuntime(store_env.store, clock=VirtualClock(), seed=3)
    result = rt.invoke(deep(MAX_DEPTH))
    assert result.status == "completed", result.error
    latest = anyio.run(store_env.store.latest, result.run_id)
    assert latest is not None
    assert latest.state["data"] == _nested(MAX_DEPTH)
    too_deep = rt.invoke(deep(MAX_DEPTH + 1))
    assert isinstance(too_deep.error, UpdateRejected)  # one level more: the run fails cleanly
    saved = latest.clone(id="cp-saved", run_id="run-saved")  # and saved directly, the same
    anyio.run(store_env.store.save, saved)
    assert anyio.run(store_env.store.get, "cp-saved") == saved


@pytest.mark.parametrize("store_env", ["postgres"], indirect=True)
def test_a_jobs_error_with_a_nul_or_a_lone_surrogate_is_kept_readable(store_env: Env) -> None:
    store = store_env.store
    anyio.run(lambda: store.finish_job("thread-q", "failed", error="bad \x00 name \udc80.txt"))
    (job,) = anyio.run(store.jobs)
    assert (job["status"], job["error"]) == ("failed", "bad \\x00 name \\udc80.txt")


# -- a node's update that cannot be stored fails the run; the thread stays usable ---------------


class _Node:
    def __init__(self, update: Any) -> None:
        self.update = update

    def __call__(self, state: S) -> Any:
        return self.update


UNSTORABLE = [
    ("nested-150-levels", {"data": DEEP}, "levels"),
    ("lone-surrogate-value", {"data": "ok\ud800"}, "surrogate"),
    ("lone-surrogate-key", {"data": {"\udc00": 1}}, "surrogate"),
    ("nan", {"data": math.nan}, "JSON"),
    ("infinity-inside", {"data": [1, math.inf]}, "JSON"),
    ("an-object", {"data": object()}, "JSON"),
    # pydantic would store these silently as something else (a list, a string, "1")
    ("a-set", {"data": {"b", "a"}}, "a set has no order"),
    ("a-frozenset-in-a-list", {"data": [frozenset([1])]}, "a set has no order"),
    ("a-complex-number", {"data": 1 + 2j}, "a complex number ((1+2j))"),
    ("an-int-key", {"data": {1: "a"}}, "dict key 1 is not a string"),
    ("a-tuple-key-inside", {"data": {"ok": [{(1, 2): "a"}]}}, "dict key (1, 2) is not a string"),
]


@pytest.mark.parametrize(("update", "says"), [u[1:] for u in UNSTORABLE],
                         ids=[u[0] for u in UNSTORABLE])
def test_an_unstorable_update_fails_the_run_and_leaves_the_thread_usable(
    tmp_path: Path, update: dict[str, Any], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    g = Graph("unstorable", S)
    g.node("a", _step).node("bad", _Node(update))
    graph = g.edge(START, "a").edge("a", "bad").edge("bad", END).compile()
    path = tmp_path / "store.db"
    with SQLiteCheckpointStore(path) as store:
        rt = GraphRuntime(store, clock=VirtualClock(), seed=3)
        result = rt.invoke(graph, thread_id="t-1")  # never raises for the node's update
        assert result.status == "failed"
        assert isinstance(result.error, UpdateRejected)
        assert says in str(result.error)
        latest = anyio.run(store.latest, result.run_id)
        assert latest is not None
        assert latest.status == "failed"  # resumable, not stuck mid-execution
        assert latest.state["n"] == 1
        assert [c.status for c in anyio.run(store.list)][-1] == "failed"
    assert main(["runs", str(path)]) == 0
    assert result.run_id in capsys.readouterr().out


class Typed(BaseModel):
    tags: set[int] = set()
    z: complex = 0j
    names: dict[int, str] = {}


@pytest.mark.anyio
async def test_a_key_whose_declared_type_converts_back_takes_such_values(tmp_path: Path) -> None:
    # The schema says how to read them back from JSON: that conversion is intended (docs/
    # graphs.md), so a node may write a set, a complex number or int keys to such a key.
    g = Graph("typed", Typed)
    g.node("a", lambda s: {"tags": {3, 1}, "z": 1 + 2j, "names": {7: "seven"}})
    graph = g.edge(START, "a").edge("a", END).compile()
    with SQLiteCheckpointStore(tmp_path / "store.db") as store:
        result = await GraphRuntime(store, clock=VirtualClock(), seed=3).ainvoke(graph)
        assert result.status == "completed"
        latest = await store.latest(result.run_id)
        assert latest is not None
        back = Typed.model_validate(latest.state)
        assert (back.tags, back.z, back.names) == ({1, 3}, 1 + 2j, {7: "seven"})


# -- the graphflow command ------------------------------------------------------------------------


CLI = [
    ("runs-missing-file", ["runs", "{dir}/missing.db"], "no store file"),
    ("runs-a-directory", ["runs", "{dir}"], "is a directory, not a store file"),
    ("export-onto-the-store", ["export", "{file}", "{run}", "{file}", "--force"],
     "is the store file"),
    ("events-unknown-run", ["events", "{file}", "run-nope"], "no run 'run-nope'"),
    ("events-run-with-escape", ["events", "{file}", "run-\x1b[2J"], "\\x1b[2J"),
    ("show-unknown-checkpoint", ["show", "{file}", "cp-\nforged"], "cp-\\nforged"),
    ("show-empty-id", ["show", "{file}", ""], "must not be empty"),
    ("mermaid-bad-target", ["mermaid", "no-colon"], "MODULE:GRAPH"),
]


@pytest.mark.parametrize(("argv", "says"), [c[1:] for c in CLI], ids=[c[0] for c in CLI])
def test_the_cli_refuses_bad_input_with_one_escaped_line(
    env: Env, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files(env.path)
    args = [a.format(dir=env.path.parent, file=env.path, run=env.run_id) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err
    assert err.count("\n") == 1
    assert "\x1b" not in err
    assert files(env.path) == before


def test_resume_with_a_resume_object_on_a_completed_run_changes_nothing(env: Env) -> None:
    before = files(env.path)
    with pytest.raises(NotSuspended):
        env.rt.resume(env.run_id, Resume("x"), graph=env.graph)
    assert files(env.path) == before
