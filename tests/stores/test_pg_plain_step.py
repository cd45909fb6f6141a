"""The PostgreSQL store's plain step (``_stores/postgres/_plain.py``, issue 29): a commit of
one checkpoint and the runtime's own events on the thread and run ids the store checked
already skips the checks those ids passed (calls a step, sync 111 -> 59, async 121 -> 69).
It stores the bytes the general commit stores, and every bad input it is handed is still
refused with the general commit's error and message, nothing written."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_core import to_json

from graphflow_postgres import stored_rows
from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    InvalidArgument,
    MalformedCommit,
    ParentNotLatest,
    PostgresCheckpointStore,
    StaleClaim,
    VirtualClock,
)
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._json import DumpedEvents
from pytest_graphflow._stores.postgres import _commit, _plain

MakeStore = Callable[..., PostgresCheckpointStore]
MakeCheckpoint = Callable[..., Checkpoint]
T0 = datetime(2025, 1, 1, tzinfo=UTC)


class _Text(BaseModel):
    n: int = 0
    text: str = ""
    items: list[int] = []


def _chain(steps: int, name: str, words: str = "") -> Any:
    g = Graph(name, _Text)
    prev = START
    for i in range(steps):
        node = f"n{i}.a-b_c"
        g.node(node, lambda s: {"n": s.n + 1, "text": s.text + "é✓😀\"\\\n" + words})
        g.edge(prev, node)
        prev = node
    return g.edge(prev, END).compile(checkpoint_policy="every_step")


def _fan(width: int) -> Any:
    g = Graph("fan", _Text)
    for i in range(width):
        g.node(f"w{i}", lambda s: {})
        g.edge(START, f"w{i}")
        g.edge(f"w{i}", "join")
    g.node("join", lambda s: {"n": s.n + 1, "items": [1, 2]})
    return g.edge("join", END).compile(checkpoint_policy="every_step")


def _spy(monkeypatch: pytest.MonkeyPatch, *, general: bool) -> list[bool]:
    """``plain_step`` logged (whether it took each commit); with ``general``, it takes none."""
    taken: list[bool] = []

    def step(*args: Any) -> Any:
        found = None if general else _plain.plain_step(*args)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(_commit, "plain_step", step)
    return taken


def test_the_plain_step_stores_the_bytes_the_general_commit_stores(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dumps = []
    for name in ("plain", "general"):
        taken = _spy(monkeypatch, general=name == "general")
        store = make_pg_store(schema=f"{pg_schema}_{name}")
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=5)
        assert runtime.invoke(_chain(6, "chain")).data["n"] == 6
        assert runtime.invoke(_fan(3)).data["n"] == 1  # several nodes a step
        runtime.invoke(_chain(2, "again"), thread_id="kept")
        runtime.invoke(_chain(3, "again"), thread_id="kept")  # a thread's second run
        # The words a NaN check looks for, in a text (not a number): the general commit's.
        runtime.invoke(_chain(3, "words", " NaN Infinity"))
        dumps.append(stored_rows(store))
        store.drop()
        if name == "plain":
            assert sum(taken) >= 9, taken  # the middle steps went the plain way
        else:
            assert taken
            assert not any(taken)
    assert all(dumps[0][table] for table in ("checkpoints", "events", "runs", "claims"))
    assert dumps[0] == dumps[1]


def test_the_plain_step_keeps_the_events_as_the_runtime_wrote_them(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain step's events come written as JSON text (``DumpedEvents.text``): the plain
    step serialises none of them (it called ``to_json`` once an event), also when their
    strings need escaping (the runtime serialised the ``node_end`` alone); the bytes are
    the general commit's (the test above)."""
    taken = _spy(monkeypatch, general=False)
    serialised: list[int] = []
    def counted(*args: Any, **kwargs: Any) -> Any:
        serialised.append(1)
        return to_json(*args, **kwargs)

    monkeypatch.setattr(_plain, "to_json", counted)
    store = make_pg_store(schema=f"{pg_schema}_text")
    try:
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=5)
        assert runtime.invoke(_chain(8, "chain")).data["n"] == 8
    finally:
        store.drop()
    assert sum(taken) >= 6, taken
    assert serialised == []


def _ev(seq: int, **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "run_id": "run-a", "type": "custom", **fields}


def _saved(seq: int, checkpoint_id: str) -> dict[str, Any]:
    return _ev(seq, type="checkpoint_saved", checkpoint_id=checkpoint_id)


def _step(make_cp: MakeCheckpoint, **changes: Any) -> dict[str, Any]:
    """A plain step's commit after cp-2 (its arguments), with ``changes``."""
    cp = make_cp(changes.pop("cid", "cp-3"), at=3, parent_id=changes.pop("parent", "cp-2"),
                 node=changes.pop("node", "a"), run=changes.pop("run", "run-a"))
    cp = cp.model_copy(update=changes.pop("cp", {}))
    events = changes.pop("events", [_ev(3), _saved(4, cp.id)])
    return {"thread_id": "thread-a", "run_id": "run-a", "checkpoints": [cp],
            "events": DumpedEvents(events), **changes}


BAD_STEPS: list[tuple[str, Callable[[MakeCheckpoint, int], dict[str, Any]], type]] = [
    ("bad-checkpoint-id", lambda mk, t: _step(mk, cid="cp\x003"), InvalidArgument),
    ("empty-node-id", lambda mk, t: _step(mk, node=""), InvalidArgument),
    ("long-checkpoint-id", lambda mk, t: _step(mk, cid="c" * 513), InvalidArgument),
    ("bool-token", lambda mk, t: {**_step(mk), "token": True}, InvalidArgument),
    ("str-token", lambda mk, t: {**_step(mk), "token": str(t)}, InvalidArgument),
    ("stale-token", lambda mk, t: {**_step(mk), "token": t + 1}, StaleClaim),
    ("another-runs-checkpoint", lambda mk, t: _step(mk, run="run-b"),
     InvalidArgument),
    ("bad-graph-id", lambda mk, t: _step(mk, cp={"graph_id": "g\n"}), InvalidArgument),
    ("parent-not-latest", lambda mk, t: _step(mk, parent="cp-1"), ParentNotLatest),
    ("events-out-of-order", lambda mk, t: _step(mk, events=[_ev(4), _ev(3)]), MalformedCommit),
    ("event-names-another-checkpoint",
     lambda mk, t: _step(mk, events=[_ev(3), _saved(4, "cp-1")]), MalformedCommit),
    ("a-real-nan", lambda mk, t: _step(mk, events=[_ev(3, x=float("nan"))]), InvalidArgument),
]


async def _refusal(store: PostgresCheckpointStore, make_cp: MakeCheckpoint,
                   bad: Callable[[MakeCheckpoint, int], dict[str, Any]]) -> tuple[str, str]:
    """The error a bad step after a plain one raises, its message; nothing written."""
    token = await store.claim("thread-a", "run-a", now=T0)
    await store.commit("thread-a", token, run_id="run-a",  # the general way: ids checked
                       checkpoints=[make_cp("cp-1", at=1, node="a")],
                       events=[_ev(0), _saved(1, "cp-1")], run={"run_id": "run-a"})
    await store.commit("thread-a", token, run_id="run-a",  # a plain step
                       checkpoints=[make_cp("cp-2", at=2, parent_id="cp-1", node="a")],
                       events=DumpedEvents([_saved(2, "cp-2")]))
    before = stored_rows(store)
    args = {"token": token, **bad(make_cp, token)}
    with pytest.raises(GraphflowErrors) as caught:
        await store.commit(**args)
    assert stored_rows(store) == before
    return type(caught.value).__name__, str(caught.value)


GraphflowErrors = (InvalidArgument, MalformedCommit, ParentNotLatest, StaleClaim)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(("name", "bad", "error"), BAD_STEPS, ids=[b[0] for b in BAD_STEPS])
@pytest.mark.anyio
async def test_a_bad_step_after_plain_ones_is_refused_as_the_general_commit_refuses_it(
    make_pg_store: MakeStore, pg_schema: str, make_cp: MakeCheckpoint,
    monkeypatch: pytest.MonkeyPatch, anyio_backend: str, name: str,
    bad: Callable[[MakeCheckpoint, int], dict[str, Any]], error: type,
) -> None:
    found = []
    for how in ("plain", "general"):
        taken = _spy(monkeypatch, general=how == "general")
        store = make_pg_store(schema=f"{pg_schema}_{how}")
        try:
            found.append(await _refusal(store, make_cp, bad))
        finally:
            store.drop()
        if how == "plain":
            assert taken[:2] == [False, True]  # the second commit went the plain way
    assert found[0] == found[1]
    assert found[0][0] == error.__name__


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_plain_step_rewriting_the_latest_goes_on_as_the_general_commit_does(
    make_pg_store: MakeStore, pg_schema: str, make_cp: MakeCheckpoint,
    monkeypatch: pytest.MonkeyPatch, anyio_backend: str,
) -> None:
    """A plain step whose statement finds another latest (the checkpoint it rewrites) checks
    the lineage against it, and its taken id sends it to the transaction, which upserts."""
    dumps = []
    for how in ("plain", "general"):
        taken = _spy(monkeypatch, general=how == "general")
        store = make_pg_store(schema=f"{pg_schema}_{how}")
        try:
            token = await store.claim("thread-a", "run-a", now=T0)
            await store.commit("thread-a", token, run_id="run-a",
                               checkpoints=[make_cp("cp-1", at=1, node="a")],
                               events=[_ev(0), _saved(1, "cp-1")], run={"run_id": "run-a"})
            for at, state in ((2, {"n": 1}), (3, {"n": 2})):  # cp-2, then cp-2 rewritten
                await store.commit(
                    "thread-a", token, run_id="run-a",
                    checkpoints=[make_cp("cp-2", at=at, parent_id="cp-1", node="a",
                                         state=state)],
                    events=DumpedEvents([_ev(at * 2), _saved(at * 2 + 1, "cp-2")]))
            assert (await store.latest("run-a")).state == {"n": 2}  # type: ignore[union-attr]
            dumps.append(stored_rows(store))
        finally:
            store.drop()
        assert taken == [False, how == "plain", how == "plain"]
    assert dumps[0] == dumps[1]


def test_the_plain_step_takes_only_the_runtimes_plain_step(make_cp: MakeCheckpoint) -> None:
    """What ``plain_step`` leaves to the general commit (``None``), beside what it takes."""
    cp = make_cp("cp-3", at=3, parent_id="cp-2", node="a")
    ids = ("thread-a", "run-a")
    run = ("run-a", "thread-a", "g", None)
    events = DumpedEvents([_ev(3), _saved(4, "cp-3")])

    def plain(**changes: Any) -> Any:
        args: dict[str, Any] = {"ids": ids, "checked_run": run, "thread_id": "thread-a", "token": 7,
                "run_id": "run-a", "checkpoints": [cp], "events": events, "run": None,
                **changes}
        return _plain.plain_step(**args)

    taken = plain()
    assert taken is not None
    assert taken[0] is cp
    assert taken[1] == (3, 4, "3,4", '{"seq":3,"run_id":"run-a","type":"custom"}\n'
                        '{"seq":4,"run_id":"run-a","type":"checkpoint_saved",'
                        '"checkpoint_id":"cp-3"}')
    assert taken[2] is False  # a parent: the statement checks the thread's latest
    assert plain(checkpoints=[make_cp("cp-3", at=3, node="a")])[2] is True
    assert plain(events=DumpedEvents([_saved(3, "cp-2")]))[2] is False  # names the parent
    refused: list[dict[str, Any]] = [
        {"ids": None}, {"ids": ("thread-b", "run-a")}, {"ids": ("thread-a", "run-b")},
        {"checked_run": ("run-a", "thread-a", "h", None)}, {"run": {"run_id": "run-a"}},
        {"events": [_ev(3)]}, {"events": DumpedEvents()}, {"checkpoints": (cp,)},
        {"checkpoints": [cp, cp]}, {"token": True}, {"token": 7.0},
        {"events": DumpedEvents([_ev(3), _ev(3)])},
        {"events": DumpedEvents([_ev(3, x=float("inf"))])},
        {"events": DumpedEvents([_saved(3, "cp-1")])},
        {"events": DumpedEvents([{"seq": 3, "run_id": "run-a"}])},
        {"events": DumpedEvents([_ev(-1)])},
    ]
    for changes in refused:
        assert plain(**changes) is None, changes
