"""Claims through runs (SPEC §5, seed 004), in one process on a virtual clock: one claim per
runtime instance, renewal while the run is live, fencing of a holder that lost its claim, the
failure's own error kept when its checkpoint is refused, tenants, and a crash at every store
operation of a run followed by a recovery (events without a gap, run record = last checkpoint,
effects exactly once where checkpointed)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    FaultyStore,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    MidExecution,
    NodeFailed,
    NothingToRecover,
    NotSuspended,
    Resume,
    SimulatedCrash,
    SQLiteCheckpointStore,
    StaleClaim,
    StoreFault,
    TenantMismatch,
    ThreadBusy,
    VirtualClock,
    interrupt,
)

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 1, 1, tzinfo=UTC)
TTL = 30.0


class S(BaseModel):
    n: int = 0
    answer: Any = None


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryCheckpointStore(claim_ttl=TTL)
        return
    sqlite = SQLiteCheckpointStore(tmp_path / "claims.db", claim_ttl=TTL)
    yield sqlite
    sqlite.close()


def _runtime(store: Any, clock: VirtualClock | None = None, **kw: Any) -> GraphRuntime:
    return GraphRuntime(store, clock=clock or VirtualClock(start=T0), seed=0, claim_ttl=TTL,
                        **kw)


async def test_a_node_sleeping_three_ttls_keeps_its_claim(store: Any) -> None:
    """Issue 11 acceptance: "A node sleeping 3x the TTL keeps its claim"."""
    clock = VirtualClock(start=T0)
    seen: list[Any] = []

    async def slow(state: S, ctx: Any) -> dict[str, Any]:
        await anyio.sleep(3 * TTL)
        # Another runtime asks for the thread now, 3 ttls after the claim was taken.
        try:
            await store.claim(ctx.thread_id, "run-intruder", now=clock.now())
        except ThreadBusy as exc:
            seen.append(exc)
        claim = await store.current_claim(ctx.thread_id)
        seen.append(claim)
        return {"n": 1}

    g = Graph("slow", S)
    g.node("slow", slow, effect="external")
    g.edge(START, "slow").edge("slow", END)
    result = await _runtime(store, clock).ainvoke(g.compile(), thread_id="t")
    assert result.status == "completed"
    assert result.data == {"n": 1, "answer": None}
    busy, (_run, _token, expires) = seen
    assert isinstance(busy, ThreadBusy)
    assert expires > T0 + timedelta(seconds=3 * TTL)  # renewed while the node slept
    assert clock.now() == T0 + timedelta(seconds=3 * TTL)  # renewal moved no node's time
    assert await store.current_claim("t") is None  # released at the end


async def test_a_holder_whose_claim_was_taken_over_cannot_commit(store: Any) -> None:
    """Issue 11 acceptance: "a holder whose claim was taken over cannot commit (its save is
    refused, nothing overwritten)"; seed 004 StaleClaim."""
    clock = VirtualClock(start=T0)
    faulty = FaultyStore(store, clock=clock).fail("renew")  # the holder cannot reach the store
    taken: list[int] = []
    before: list[Any] = []

    async def slow(state: S, ctx: Any) -> dict[str, Any]:
        before.append(await snapshot())
        await anyio.sleep(2 * TTL)  # its claim expires: another process takes the thread
        taken.append(await store.claim(ctx.thread_id, "run-other", now=clock.now()))
        return {"n": 99}

    async def snapshot() -> Any:
        return [(c.id, c.state, c.status) for c in await store.list(thread_id="t")]

    g = Graph("taken", S)
    g.node("first", lambda s: {"n": 1})
    g.node("slow", slow)
    g.edge(START, "first").edge("first", "slow").edge("slow", END)
    rt = _runtime(faulty, clock)
    graph = g.compile(checkpoint_policy="every_step")
    with pytest.raises(StaleClaim) as stale:
        await rt.ainvoke(graph, thread_id="t")
    assert before[0]  # the holder had saved checkpoints before it lost the thread
    assert stale.value.current == taken[0]
    assert "another run took the thread over. Nothing was written" in str(stale.value)
    assert await snapshot() == before[0]  # nothing of the stale holder's last piece landed
    assert (await store.current_claim("t"))[1] == taken[0]  # the new holder keeps the thread


async def test_a_save_after_the_claim_changed_hands_is_refused_on_the_fast_path(
    store: Any,
) -> None:
    """Seed 004 StaleClaim, on the path the runtime's every-step saves take over a bare
    in-memory store (the checkpoint handed over as its fields): a claim released and taken
    by another run in between fences the holder out, and nothing of it lands."""
    seen: list[Any] = []

    async def steal(state: S, ctx: Any) -> dict[str, Any]:
        _run_id, token, _expires = await store.current_claim(ctx.thread_id)
        await store.release(ctx.thread_id, token)
        seen.append(await store.claim(ctx.thread_id, "run-other", now=T0))
        seen.append([c.id for c in await store.list(thread_id="t")])
        return {"n": 2}

    g = Graph("stolen", S)
    g.node("first", lambda s: {"n": 1})
    g.node("steal", steal)
    g.edge(START, "first").edge("first", "steal").edge("steal", END)
    with pytest.raises(StaleClaim) as stale:
        await _runtime(store).ainvoke(g.compile(checkpoint_policy="every_step"), thread_id="t")
    taken, saved = seen
    assert stale.value.current == taken
    assert [c.id for c in await store.list(thread_id="t")] == saved  # nothing landed after
    assert (await store.current_claim("t"))[:2] == ("run-other", taken)


async def test_another_runtime_cannot_resume_or_recover_a_live_run(store: Any) -> None:
    """SPEC §5: "any other runtime or process asking for the thread (new run, resume,
    recover, ...) gets ThreadBusy until the claim is released or expires"."""
    clock = VirtualClock(start=T0)
    other = _runtime(store, clock)
    outcomes: list[BaseException] = []
    g = Graph("live", S)

    async def probe(state: S, ctx: Any) -> dict[str, Any]:
        for attempt in (lambda: other.aresume(ctx.run_id, graph=graph),
                        lambda: other.arecover("t", graph=graph),
                        lambda: other.ainvoke(graph, thread_id="t")):
            try:
                await attempt()
            except ThreadBusy as exc:
                outcomes.append(exc)
        return {"n": state.n + 1}

    g.node("first", lambda s: {"n": 1})
    g.node("probe", probe)
    g.edge(START, "first").edge("first", "probe").edge("probe", END)
    graph = g.compile(checkpoint_policy="every_step")
    result = await _runtime(store, clock).ainvoke(graph, thread_id="t")
    assert result.status == "completed"
    assert result.data["n"] == 2
    assert [type(e) for e in outcomes] == [ThreadBusy] * 3
    assert all(e.holder == result.run_id and "retry once" in str(e) for e in outcomes)


async def test_a_stale_resume_after_the_run_moved_on_is_refused(store: Any) -> None:
    """Seed 004 ThreadBusy: "...or it claimed the thread between this call reading it and
    claiming it"; a resume that read an interrupted checkpoint which another resume answered
    meanwhile does not run the run a second time."""
    charged: list[str] = []
    g = Graph("pay", S)

    def ask(state: S) -> dict[str, Any]:
        return {"answer": interrupt("pay?", id="pay")}

    def charge(state: S) -> dict[str, Any]:
        charged.append("x")
        return {"n": state.n + 1}

    g.node("ask", ask, effect="human").node("charge", charge, effect="external")
    g.edge(START, "ask").edge("ask", "charge").edge("charge", END)
    graph = g.compile()
    first = _runtime(store)
    paused = await first.ainvoke(graph, thread_id="t")
    assert paused.status == "interrupted"
    # A second runtime reads the run; between its read and its claim another one wins.
    second = _runtime(store)
    original = second._legs.claim

    async def late(thread_id: str, run_id: str, tenant: Any, *at: Any) -> Any:
        if not charged:
            assert (await first.aresume(paused.run_id, Resume("yes"))).status == "completed"
        return await original(thread_id, run_id, tenant, *at)

    second._legs.claim = late  # type: ignore[method-assign]
    with pytest.raises(ThreadBusy):
        await second.aresume(paused.run_id, Resume("yes"), graph=graph)
    assert charged == ["x"]
    with pytest.raises(NotSuspended, match="completed"):
        await second.aresume(paused.run_id, Resume("yes"), graph=graph)
    assert charged == ["x"]


def _asking_graph(charged: list[str]) -> Any:
    g = Graph("pay", S)

    def ask(state: S) -> dict[str, Any]:
        return {"answer": interrupt("pay?", id="pay")}

    def charge(state: S) -> dict[str, Any]:
        charged.append("x")
        return {"n": state.n + 1}

    g.node("ask", ask, effect="human").node("charge", charge, effect="external")
    g.edge(START, "ask").edge("ask", "charge").edge("charge", END)
    return g.compile()


async def test_the_runtime_that_paused_a_run_still_sees_a_resume_that_won_meanwhile(
        store: Any) -> None:
    """The same as above when the resuming runtime is the one that ran the run's last leg
    (it knows the checkpoint it read, and skips reading it again only when its claim is
    the thread's next one): another runtime's resume between its read and its claim is
    still seen, and the run is not run a second time."""
    charged: list[str] = []
    graph = _asking_graph(charged)
    first = _runtime(store)
    paused = await first.ainvoke(graph, thread_id="t")
    other = _runtime(store)
    original = first._legs.claim

    async def late(thread_id: str, run_id: str, tenant: Any, *at: Any) -> Any:
        if not charged:
            assert (await other.aresume(paused.run_id, Resume("yes"), graph=graph)
                    ).status == "completed"
        return await original(thread_id, run_id, tenant, *at)

    first._legs.claim = late  # type: ignore[method-assign]
    with pytest.raises(ThreadBusy):
        await first.aresume(paused.run_id, Resume("yes"))
    assert charged == ["x"]
    latest = await store.latest(paused.run_id)
    assert latest is not None
    assert latest.status == "completed"
    assert latest.state["n"] == 1


async def test_a_resume_after_an_update_by_the_same_runtime_reads_the_update(
        store: Any) -> None:
    """An ``update_state`` between a pause and the resume (it claims the thread and writes
    a checkpoint of its own) is what the resume continues from."""
    charged: list[str] = []
    graph = _asking_graph(charged)
    rt = _runtime(store)
    paused = await rt.ainvoke(graph, thread_id="t")
    await rt.aupdate_state(paused.run_id, {"n": 41})
    done = await rt.aresume(paused.run_id, Resume("yes"))
    assert done.status == "completed"
    assert done.data == {"n": 42, "answer": "yes"}
    assert charged == ["x"]


async def test_a_timed_out_thread_is_mid_execution(store: Any) -> None:
    """Seed 004: a timed-out run "stays Running, so recover with a new budget continues the
    run"; MidExecution: "start was called on a thread whose latest checkpoint is
    mid-execution; use recover." """
    async def slow(state: S) -> dict[str, Any]:
        await anyio.sleep(100)
        return {"n": 1}

    g = Graph("slow", S)
    g.node("slow", slow)
    g.edge(START, "slow").edge("slow", END)
    rt = _runtime(store)
    timed_out = await rt.ainvoke(g.compile(), thread_id="t", timeout=10)
    assert timed_out.status == "failed"
    with pytest.raises(MidExecution, match=r"arecover\('t'\)"):
        await rt.ainvoke(g.compile(), thread_id="t")
    assert (await rt.arecover("t")).status == "completed"
    with pytest.raises(NothingToRecover, match="completed"):
        await rt.arecover("t")


async def test_a_refused_failure_checkpoint_keeps_the_nodes_error(store: Any) -> None:
    """Seed 000: the store's error is raised; seed 004: "runError is the run's own failure
    when the commit failed while recording it"."""
    class Boom(Exception):
        pass

    def bad(state: S) -> dict[str, Any]:
        raise Boom("card declined")

    g = Graph("bad", S)
    g.node("bad", bad)
    g.edge(START, "bad").edge("bad", END)
    faulty = FaultyStore(store).reject_save(when=lambda cp: cp.status == "failed")
    rt = _runtime(faulty)
    with pytest.raises(StoreFault) as refused:
        await rt.ainvoke(g.compile(), thread_id="t")
    own = refused.value.run_error  # type: ignore[attr-defined]
    assert isinstance(own, NodeFailed)
    assert "card declined" in str(own.__cause__)
    record = rt.runs[-1]
    assert record.status == "failed"
    assert record.error is not None
    assert record.error["error_type"] == "StoreFault"
    assert record.error["run_error"]["error_type"] == "NodeFailed"
    stored = await store.run(record.run_id) if hasattr(store, "records_events") else None
    if stored is not None:  # the durable run record says the same
        assert stored["status"] == "failed"
        assert stored["error"]["run_error"]["error_type"] == "NodeFailed"
    assert await store.current_claim("t") is None


async def test_tenants_see_nothing_of_each_others_threads(store: Any) -> None:
    """Issue 11: "Tenant isolation on every read API, and no other tenant's ids in any
    message"; seed 004 TenantMismatch: "The owning tenant is deliberately not carried or
    printed"."""
    g = Graph("t", S)

    def ask(state: S) -> dict[str, Any]:
        return {"answer": interrupt("?", id="q")}

    g.node("ask", ask)
    g.edge(START, "ask").edge("ask", END)
    graph = g.compile()
    acme = _runtime(store, tenant_id="acme")
    paused = await acme.ainvoke(graph, thread_id="t")
    other = _runtime(store, tenant_id="globex")
    other.register(graph)
    cp_id = paused.checkpoint_id
    assert cp_id is not None
    attempts = [
        ("history", lambda: other.history(paused.run_id)),
        ("resume by run", lambda: other.aresume(paused.run_id, Resume("x"))),
        ("resume by checkpoint", lambda: other.aresume(cp_id, Resume("x"))),
        ("recover", lambda: other.arecover("t")),
        ("new run", lambda: other.ainvoke(graph, thread_id="t")),
    ]
    hidden = [paused.run_id.removeprefix("run-"), "acme"]
    for what, attempt in attempts:
        with pytest.raises(TenantMismatch) as refused:
            await attempt()
        message = str(refused.value)
        assert not [h for h in hidden if h in message.replace(f"'{paused.run_id}'", "")
                    .replace(f"'{cp_id}'", "")], (what, message)
        assert "globex" in message, what
    # ThreadBusy names a holder only to the thread's own tenant.
    token = await store.claim("t", "run-holder", now=T0)
    with pytest.raises(TenantMismatch):
        await other.ainvoke(graph, thread_id="t")
    with pytest.raises(ThreadBusy) as busy:
        await acme.aresume(paused.run_id, Resume("x"))
    assert busy.value.holder == "run-holder"
    await store.release("t", token)
    await store.claim("fresh", "run-holder", now=T0)
    with pytest.raises(ThreadBusy) as nameless:  # no checkpoint: no tenant to check
        await other.ainvoke(graph, thread_id="fresh")
    assert nameless.value.holder is None
    assert "run-holder" not in str(nameless.value)
    assert (await acme.aresume(paused.run_id, Resume("x"))).status == "completed"


# -- a crash at every store operation of a run, then a recovery ---------------------------------


class Pay(BaseModel):
    n: int = 0


def _pay_graph(effects: list[str]) -> Any:
    g = Graph("pay", Pay)
    g.node("prep", lambda s: {"n": 1})

    def charge(state: Pay) -> dict[str, Any]:
        effects.append("charge")
        return {"n": state.n + 1}

    g.node("charge", charge, effect="external")
    g.node("done", lambda s: {"n": s.n + 1})
    g.edge(START, "prep").edge("prep", "charge").edge("charge", "done").edge("done", END)
    return g.compile(checkpoint_policy="every_step")


def _crash_points(tmp_path: Path) -> list[tuple[str, int]]:
    effects: list[str] = []
    with SQLiteCheckpointStore(tmp_path / "oracle.db", claim_ttl=TTL) as inner:
        faulty = FaultyStore(inner)
        GraphRuntime(faulty, clock=VirtualClock(start=T0), seed=0,
                     claim_ttl=TTL).invoke(_pay_graph(effects), thread_id="t")
        seen: dict[str, int] = {}
        points = []
        for call in faulty.calls:
            seen[call.op] = seen.get(call.op, 0) + 1
            points.append((call.op, seen[call.op]))
    assert effects == ["charge"]
    return points


def test_a_crash_at_every_store_operation_then_recover(tmp_path: Path) -> None:
    """Issue 11 acceptance: "FaultyStore.crash_at(...) at every store operation of a run,
    then recover: events complete (no gap in seq), run record matches, effects exactly once
    where checkpointed"."""
    points = _crash_points(tmp_path)
    assert {op for op, _ in points} >= {"claim", "commit", "release"}
    for n, ((op, nth), phase) in enumerate((p, ph) for p in points
                                           for ph in ("before", "after")):
        where = f"crash {phase} {op} #{nth}"
        effects: list[str] = []
        graph = _pay_graph(effects)
        with SQLiteCheckpointStore(tmp_path / f"crash-{n}.db", claim_ttl=TTL) as inner:
            faulty = FaultyStore(inner).crash_at(op, nth, phase=phase)  # type: ignore[arg-type]
            with pytest.raises(SimulatedCrash):
                GraphRuntime(faulty, clock=VirtualClock(start=T0), seed=0,
                             claim_ttl=TTL).invoke(graph, thread_id="t")
            effects_at_crash = len(effects)
            checkpoints = anyio.run(lambda: inner.list(thread_id="t"))
            charged = any("charge" in c.visited for c in checkpoints)
            # The run record always says what the last checkpoint says (one transaction).
            for cp in checkpoints[-1:]:
                record = anyio.run(inner.run, cp.run_id)
                assert record is not None, where
                assert record["status"] == (
                    "completed" if cp.status == "completed" else "running"), where
            # A fresh process, once the dead one's claim expired, continues the thread.
            fresh = GraphRuntime(inner, clock=VirtualClock(start=T0 + timedelta(seconds=TTL)),
                                 seed=1, claim_ttl=TTL)
            if not checkpoints:
                result = fresh.invoke(graph, thread_id="t")
            elif checkpoints[-1].status == "completed":
                with pytest.raises(NothingToRecover, match="completed"):
                    fresh.recover("t", graph=graph)
                result = None
            else:
                result = fresh.recover("t", graph=graph)
            if result is not None:
                assert result.status == "completed", where
                assert result.data == {"n": 3}, where
            runs = anyio.run(lambda: inner.list(thread_id="t"))
            run_id = runs[-1].run_id
            seqs = [e["seq"] for e in anyio.run(inner.events, run_id)]
            assert seqs, where
            assert seqs == list(range(len(seqs))), where  # no gap in seq
            kinds = [e["type"] for e in anyio.run(inner.events, run_id)]
            assert kinds[0] == "run_start", where
            assert kinds[-1] == "run_end", where
            saved = {e["checkpoint_id"] for e in anyio.run(inner.events, run_id)
                     if e["type"] == "checkpoint_saved"}
            assert saved <= {c.id for c in runs}, where  # no event names a lost checkpoint
            record = anyio.run(inner.run, run_id)
            assert record is not None, where
            assert record["status"] == "completed", where
            # Effects: exactly once where a checkpoint recorded the charge before the crash;
            # otherwise at most once more (the effect ran, its commit did not land).
            assert effects.count("charge") == (1 if charged or effects_at_crash == 0 else 2), \
                where
