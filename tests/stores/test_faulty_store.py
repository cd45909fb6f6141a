"""``FaultyStore`` rules, one at a time, each followed by what the inner store holds.

Runs on asyncio and trio (the ``anyio_backend`` fixture of ``tests/stores/conftest.py``).
Nothing here sleeps in real time: delays run on a ``VirtualClock``, on a clock the test
opens by hand, or on a patched ``anyio.sleep``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from pytest_graphflow import (
    CheckpointStore,
    FaultPlan,
    FaultyStore,
    InMemoryCheckpointStore,
    StoreCall,
)
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._stores.faults import _calls as _faulty_calls
from pytest_graphflow._stores.faults._store import Fault
from pytest_graphflow._time._clock import VirtualClock
from pytest_graphflow.errors import (
    CheckpointNotFound,
    InvalidArgument,
    SimulatedCrash,
    StoreFault,
)

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def cp(n: int, *, run: str = "run-a", node: str | None = None, **extra: Any) -> Checkpoint:
    return Checkpoint(
        id=f"cp-{n}", run_id=run, thread_id=f"thread-of-{run}", graph_id="g", revision="r",
        node_id=node, step=n, timestamp=T0 + timedelta(seconds=n), state={"n": n}, **extra,
    )


async def held(inner: CheckpointStore, run_id: str | None = None) -> list[str]:
    return [c.id for c in await inner.list(run_id)]


def outcomes(store: FaultyStore, op: str | None = None) -> list[str]:
    return [c.outcome for c in store.calls if op is None or c.op == op]


async def save_all(store: FaultyStore, *checkpoints: Checkpoint) -> list[str]:
    """Save each checkpoint; return the outcome the caller saw for each."""
    seen = []
    for c in checkpoints:
        try:
            await store.save(c)
        except StoreFault:
            seen.append("error")
        else:
            seen.append("ok")
    return seen


class ExtraStore(InMemoryCheckpointStore):
    """An in-memory store with methods beyond the protocol, like the real backends."""

    flavour = "extra"

    def __init__(self) -> None:
        super().__init__()
        self.claims: dict[str, str] = {}

    async def claim(self, thread_id: str, run_id: str) -> int:
        self.claims[thread_id] = run_id
        return len(self.claims)

    def describe(self) -> str:
        return f"{len(self.claims)} claim(s)"


class CountingStore(InMemoryCheckpointStore):
    """Counts the calls that reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.reached: list[str] = []

    async def save(self, checkpoint: Checkpoint) -> None:
        self.reached.append("save")
        await super().save(checkpoint)

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        self.reached.append("get")
        return await super().get(checkpoint_id)


class GateClock:
    """A clock whose ``sleep`` waits until the test opens the gate (no real time passes)."""

    virtual = True

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.waiting = 0

    def now(self) -> datetime:
        return T0

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        self.waiting += 1
        await self.gate.wait()


# ----------------------------------------------------------------------------- no rules


async def test_without_rules_the_wrapper_is_transparent() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner)
    assert isinstance(store, CheckpointStore)
    await store.save(cp(1, node="a"))
    await store.save(cp(2, node="b"))
    got = await store.get("cp-1")
    assert got is not None
    assert got.id == "cp-1"
    assert (await store.latest("run-a")).id == "cp-2"  # type: ignore[union-attr]
    assert (await store.load("run-a", "a")).id == "cp-1"  # type: ignore[union-attr]
    assert [c.id for c in await store.list(thread_id="thread-of-run-a")] == ["cp-1", "cp-2"]
    new_run = await store.fork("cp-1", {"n": 9})
    assert (await inner.latest(new_run)).state == {"n": 9}  # type: ignore[union-attr]
    assert await store.delete("cp-2") is True

    assert outcomes(store) == ["ok"] * 8
    assert [c.op for c in store.calls] == [
        "save", "save", "get", "latest", "load", "list", "fork", "delete",
    ]
    assert [c.index for c in store.calls] == list(range(8))
    assert store.saves == ["cp-1", "cp-2"]
    assert await held(inner) == ["cp-1", next(c.id for c in await inner.list(new_run))]
    assert not store.dead
    assert store.crash is None


async def test_call_args_are_short_and_readable() -> None:
    store = FaultyStore(InMemoryCheckpointStore())
    await store.save(cp(1))
    await store.load("run-a")
    await store.load("run-a", "b")
    await store.list()
    await store.list("run-a", thread_id="t")
    await store.fork("cp-1", {"n": 2})
    assert [c.args for c in store.calls] == [
        "cp-1 of run run-a", "run-a", "run-a, b", "", "run-a, thread_id=t", "cp-1, {n}",
    ]
    assert str(store.calls[0]) == "#0 save(cp-1 of run run-a) -> ok"
    assert store.calls[0].time is None  # no clock bound
    assert "#3 list() -> ok" in store.format_calls()
    assert FaultyStore(InMemoryCheckpointStore()).format_calls() == "(no store calls)"


# ----------------------------------------------------------------------------- reject_save


async def test_reject_nth_save_keeps_it_out_of_the_inner_store() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner).reject_save(nth=2)
    rule = store.last_rule

    await store.save(cp(1))
    with pytest.raises(StoreFault, match=r"^injected: save #2 of checkpoint cp-2 rejected$"):
        await store.save(cp(2))
    assert await held(inner) == ["cp-1"]  # only the first reached the store

    await store.save(cp(3))
    assert await held(inner) == ["cp-1", "cp-3"]
    assert outcomes(store) == ["ok", "rejected", "ok"]
    assert store.saves == ["cp-1", "cp-3"]
    assert rule.hits == 1
    assert rule.seen == 3
    assert rule.exhausted
    rejected = store.calls[1]
    assert rejected.injected
    assert rejected.error is not None
    assert "StoreFault" in rejected.error


async def test_nth_counts_saves_made_since_the_rule_was_added() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner)
    await store.save(cp(1))
    await store.save(cp(2))
    store.reject_save(nth=1)
    assert await save_all(store, cp(3), cp(4)) == ["error", "ok"]
    assert await held(inner) == ["cp-1", "cp-2", "cp-4"]


async def test_reject_every_kth_save_up_to_times() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner).reject_save(every=2, times=2)
    seen = await save_all(store, *(cp(n) for n in range(1, 8)))
    assert seen == ["ok", "error", "ok", "error", "ok", "ok", "ok"]
    assert await held(inner) == ["cp-1", "cp-3", "cp-5", "cp-6", "cp-7"]
    assert store.last_rule.hits == 2


async def test_reject_saves_matching_a_predicate_with_the_given_error() -> None:
    inner = InMemoryCheckpointStore()
    error = ConnectionError("disk full")
    store = FaultyStore(inner).reject_save(when=lambda c: c.run_id == "run-b", error=error)

    await store.save(cp(1))
    with pytest.raises(ConnectionError) as info:
        await store.save(cp(2, run="run-b"))
    assert info.value is error  # the very exception given, not a wrapper (C6)
    await store.save(cp(3))
    with pytest.raises(ConnectionError):
        await store.save(cp(4, run="run-b"))

    assert await held(inner) == ["cp-1", "cp-3"]
    assert outcomes(store) == ["ok", "rejected", "ok", "rejected"]
    assert store.calls[1].error == repr(error)


async def test_when_and_nth_count_only_matching_saves() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner).reject_save(nth=2, when=lambda c: c.run_id == "run-b")
    seen = await save_all(
        store, cp(1, run="run-b"), cp(2), cp(3), cp(4, run="run-b"), cp(5, run="run-b")
    )
    assert seen == ["ok", "ok", "ok", "error", "ok"]
    assert await held(inner, "run-b") == ["cp-1", "cp-5"]
    rule = store.last_rule
    assert (rule.seen, rule.matched, rule.hits) == (5, 3, 1)


async def test_an_error_class_is_raised_with_the_readable_message() -> None:
    store = FaultyStore(InMemoryCheckpointStore()).reject_save(error=TimeoutError)
    with pytest.raises(TimeoutError, match="injected: save #1 of checkpoint cp-1 rejected"):
        await store.save(cp(1))


async def test_clear_rules_lets_saves_through_again() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner).reject_save()
    assert await save_all(store, cp(1)) == ["error"]
    store.clear_rules()
    assert store.rules == []
    assert await save_all(store, cp(2)) == ["ok"]
    assert await held(inner) == ["cp-2"]
    assert outcomes(store) == ["rejected", "ok"]  # the log is kept


# ----------------------------------------------------------------------------- fail


async def _call(store: FaultyStore, op: str) -> Any:
    args: dict[str, tuple[Any, ...]] = {
        "get": ("cp-1",), "load": ("run-a",), "latest": ("run-a",), "list": ("run-a",),
        "delete": ("cp-1",), "fork": ("cp-1",),
    }
    return await getattr(store, op)(*args[op])


@pytest.mark.parametrize("op", ["get", "load", "latest", "list", "delete", "fork"])
async def test_fail_makes_any_operation_raise_without_reaching_the_store(op: str) -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner)
    await store.save(cp(1))
    store.fail(op, nth=1)

    with pytest.raises(StoreFault, match=rf"^injected: {op} #1 \(.*\) failed$"):
        await _call(store, op)
    assert await held(inner) == ["cp-1"]  # no delete, no fork happened
    assert outcomes(store) == ["ok", "failed"]
    assert store.calls[-1].injected

    await _call(store, op)  # nth=1 only: the next call goes through
    assert outcomes(store)[-1] == "ok"


async def test_fail_predicate_receives_the_call_arguments() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner)
    await store.save(cp(1, node="a"))
    await store.save(cp(2, node="b"))
    seen: list[tuple[Any, ...]] = []

    def only_node_b(run_id: str, node_id: str | None) -> bool:
        seen.append((run_id, node_id))
        return node_id == "b"

    store.fail("load", when=only_node_b, error=KeyError("b"))
    assert (await store.load("run-a", "a")).id == "cp-1"  # type: ignore[union-attr]
    with pytest.raises(KeyError):
        await store.load("run-a", "b")
    assert seen == [("run-a", "a"), ("run-a", "b")]


async def test_fail_save_is_logged_as_failed() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner).fail("save", every=2)
    assert await save_all(store, cp(1), cp(2), cp(3)) == ["ok", "error", "ok"]
    assert outcomes(store) == ["ok", "failed", "ok"]
    assert await held(inner) == ["cp-1", "cp-3"]


async def test_errors_of_the_inner_store_pass_through_and_are_logged() -> None:
    store = FaultyStore(InMemoryCheckpointStore())
    with pytest.raises(CheckpointNotFound):
        await store.fork("cp-missing")
    call = store.calls[0]
    assert (call.outcome, call.injected) == ("failed", False)
    assert call.error is not None
    assert "CheckpointNotFound" in call.error


async def test_a_predicate_that_raises_is_logged_and_propagates() -> None:
    def broken(c: Checkpoint) -> bool:
        raise ValueError("bad predicate")

    store = FaultyStore(InMemoryCheckpointStore()).reject_save(when=broken)
    with pytest.raises(ValueError, match="bad predicate"):
        await store.save(cp(1))
    assert outcomes(store) == ["failed"]


async def test_the_first_rule_added_decides_but_every_rule_counts() -> None:
    inner = InMemoryCheckpointStore()
    first, second = StoreFault("first"), StoreFault("second")
    store = FaultyStore(inner).reject_save(nth=1, error=first).reject_save(error=second)
    with pytest.raises(StoreFault, match="first"):
        await store.save(cp(1))
    with pytest.raises(StoreFault, match="second"):
        await store.save(cp(2))
    a, b = store.rules
    assert (a.hits, a.seen, b.hits, b.seen) == (1, 2, 1, 2)


# ----------------------------------------------------------------------------- delay


async def test_delay_moves_a_virtual_clock_by_exactly_the_delay() -> None:
    clock = VirtualClock(start=T0, patch_wall_clock=False)
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner, clock=clock).delay("save", 2.5)

    await store.save(cp(1))
    assert clock.elapsed == 2.5
    await store.get("cp-1")  # not delayed
    assert clock.elapsed == 2.5
    await store.save(cp(2))
    assert clock.elapsed == 5.0

    assert await held(inner) == ["cp-1", "cp-2"]
    assert [(c.op, c.delay, c.time) for c in store.calls] == [
        ("save", 2.5, T0),
        ("get", 0.0, T0 + timedelta(seconds=2.5)),
        ("save", 2.5, T0 + timedelta(seconds=2.5)),
    ]
    assert outcomes(store) == ["ok"] * 3
    assert str(store.calls[0]) == (
        "2025-01-01T00:00:00+00:00 #0 save(cp-1 of run run-a) -> ok after 2.5s"
    )


async def test_delays_add_up_and_can_target_one_call() -> None:
    clock = VirtualClock(start=T0, patch_wall_clock=False)
    store = FaultyStore(InMemoryCheckpointStore(), clock=clock)
    store.delay("latest", 1).delay("latest", 0.25, nth=2)
    await store.latest("run-a")
    assert clock.elapsed == 1
    await store.latest("run-a")
    assert clock.elapsed == 2.25
    assert [c.delay for c in store.calls] == [1, 1.25]


async def test_a_delayed_rejection_waits_first_then_fails() -> None:
    clock = VirtualClock(start=T0, patch_wall_clock=False)
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner, clock=clock).delay("save", 3).reject_save()
    assert await save_all(store, cp(1)) == ["error"]
    assert clock.elapsed == 3
    assert await held(inner) == []
    assert (store.calls[0].outcome, store.calls[0].delay) == ("rejected", 3)


async def test_without_a_clock_delay_uses_anyio_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(_faulty_calls.anyio, "sleep", fake_sleep)
    store = FaultyStore(InMemoryCheckpointStore()).delay("get", 7)
    await store.get("cp-1")
    assert slept == [7]
    assert store.calls[0].time is None


async def test_bind_clock_binds_only_when_no_clock_is_bound() -> None:
    store = FaultyStore(InMemoryCheckpointStore()).delay("get", 1)
    first = VirtualClock(start=T0, patch_wall_clock=False)
    second = VirtualClock(start=T0, patch_wall_clock=False)
    store.bind_clock(first)
    store.bind_clock(second)  # a second runtime does not steal the clock
    assert store.clock is first
    await store.get("x")
    assert (first.elapsed, second.elapsed) == (1, 0)
    store.bind_clock(second, replace=True)
    await store.get("x")
    assert (first.elapsed, second.elapsed) == (1, 1)


async def test_a_call_cancelled_while_delayed_reaches_nothing() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner, clock=GateClock()).delay("save", 10)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await store.save(cp(1))
    assert await held(inner) == []
    assert outcomes(store) == ["cancelled"]


# ----------------------------------------------------------------------------- crash_at


async def test_crash_before_the_save_keeps_it_out_and_kills_the_store() -> None:
    inner = CountingStore()
    store = FaultyStore(inner).crash_at("save", nth=2)

    await store.save(cp(1))

    async def careless_node_code() -> None:
        try:
            await store.save(cp(2))
        except Exception:  # cannot swallow a crash
            pytest.fail("SimulatedCrash was caught by `except Exception`")

    with pytest.raises(SimulatedCrash, match=r"simulated crash before save #2 \(cp-2"):
        await careless_node_code()
    assert await held(inner) == ["cp-1"]
    assert store.dead
    assert store.crash is not None
    assert (store.crash.op, store.crash.index, store.crash.outcome) == ("save", 1, "crashed")
    assert store.saves == ["cp-1"]

    reached = list(inner.reached)
    with pytest.raises(SimulatedCrash, match="store is dead"):
        await store.get("cp-1")
    with pytest.raises(SimulatedCrash):
        await store.save(cp(3))
    assert inner.reached == reached  # nothing after the crash reached the store
    assert await held(inner) == ["cp-1"]
    assert outcomes(store) == ["ok", "crashed", "dead", "dead"]


async def test_crash_after_the_save_stores_it_but_the_caller_never_learns() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner).crash_at("save", nth=2, phase="after")
    await store.save(cp(1))
    with pytest.raises(SimulatedCrash, match="after save #2"):
        await store.save(cp(2))
    assert await held(inner) == ["cp-1", "cp-2"]
    assert store.saves == ["cp-1", "cp-2"]
    assert outcomes(store) == ["ok", "crashed"]
    with pytest.raises(SimulatedCrash):
        await store.list()


async def test_crash_at_any_operation_and_predicate() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner)
    await store.save(cp(1))
    await store.save(cp(2))
    store.crash_at("delete", when=lambda checkpoint_id: checkpoint_id == "cp-2", phase="after")
    assert await store.delete("cp-1") is True
    with pytest.raises(SimulatedCrash):
        await store.delete("cp-2")
    assert await held(inner) == []  # the delete happened; the caller never heard back


async def test_revive_brings_the_store_back_and_the_crash_does_not_refire() -> None:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner).crash_at("save")
    with pytest.raises(SimulatedCrash):
        await store.save(cp(1))
    store.revive()
    assert not store.dead
    await store.save(cp(2))
    await store.save(cp(3))
    assert await held(inner) == ["cp-2", "cp-3"]
    assert outcomes(store) == ["crashed", "ok", "ok"]


async def test_a_fresh_wrapper_over_the_inner_store_recovers() -> None:
    inner = InMemoryCheckpointStore()
    dead = FaultyStore(inner).crash_at("save", nth=2)
    await dead.save(cp(1))
    with pytest.raises(SimulatedCrash):
        await dead.save(cp(2))
    fresh = FaultyStore(dead.inner)
    assert (await fresh.latest("run-a")).id == "cp-1"  # type: ignore[union-attr]
    await fresh.save(cp(2))
    assert await held(inner) == ["cp-1", "cp-2"]


async def test_a_call_waiting_when_the_store_dies_reaches_nothing() -> None:
    inner = InMemoryCheckpointStore()
    clock = GateClock()
    store = FaultyStore(inner, clock=clock).delay("save", 1, nth=1).crash_at("save", nth=2)
    errors: list[BaseException] = []

    async def save_first() -> None:
        try:
            await store.save(cp(1))
        except SimulatedCrash as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(save_first)
        await anyio.wait_all_tasks_blocked()
        assert clock.waiting == 1
        with pytest.raises(SimulatedCrash):
            await store.save(cp(2))  # the process dies while save #1 waits
        clock.gate.set()

    assert len(errors) == 1
    assert "store is dead" in str(errors[0])
    assert await held(inner) == []
    assert outcomes(store) == ["dead", "crashed"]


# ----------------------------------------------------------------------------- extras


async def test_extra_coroutine_methods_go_through_the_same_machinery() -> None:
    inner = ExtraStore()
    clock = VirtualClock(start=T0, patch_wall_clock=False)
    store = FaultyStore(inner, clock=clock)
    claim: Any = store.claim
    assert claim.__name__ == "claim"

    assert await claim("thread-1", "run-a") == 1
    store.delay("claim", 4).fail("claim", nth=2, error=PermissionError("busy"))
    assert await claim("thread-2", "run-b") == 2
    with pytest.raises(PermissionError):
        await claim("thread-3", "run-c")
    assert inner.claims == {"thread-1": "run-a", "thread-2": "run-b"}
    assert clock.elapsed == 8
    assert [(c.op, c.args, c.outcome) for c in store.calls] == [
        ("claim", "thread-1, run-a", "ok"),
        ("claim", "thread-2, run-b", "ok"),
        ("claim", "thread-3, run-c", "failed"),
    ]

    store.crash_at("claim")
    with pytest.raises(SimulatedCrash):
        await claim("thread-4", "run-d")
    with pytest.raises(SimulatedCrash):
        await store.get("cp-1")  # a crash kills every operation
    assert "thread-4" not in inner.claims


async def test_other_attributes_are_forwarded_untouched() -> None:
    inner = ExtraStore()
    store: Any = FaultyStore(inner)
    assert store.flavour == "extra"
    assert store.describe() == "0 claim(s)"  # sync methods are not logged
    assert store.claims is inner.claims
    assert store.calls == []
    assert hasattr(store, "claim")
    assert not hasattr(store, "no_such_method")
    assert not hasattr(FaultyStore(InMemoryCheckpointStore()), "teleport")


# ----------------------------------------------------------------------------- plans and arguments


async def test_a_fault_plan_wraps_a_store_or_adds_to_a_faulty_one() -> None:
    plan = FaultPlan.of(Fault.reject_save(nth=2), Fault.delay("get", 1.5), Fault.crash_at("list"))
    assert len(plan) == 3
    assert list(plan) == list(plan.faults)
    assert plan.describe() == (
        "reject_save(nth=2); delay('get', 1.5); crash_at('list', nth=1, phase='before')"
    )
    assert FaultPlan().describe() == "no faults"
    assert plan == FaultPlan.of(Fault.reject_save(nth=2), Fault.delay("get", 1.5),
                                Fault.crash_at("list"))
    assert hash(plan) == hash(FaultPlan(plan.faults))

    inner = InMemoryCheckpointStore()
    store = plan.apply(inner)
    assert isinstance(store, FaultyStore)
    assert store.inner is inner
    assert [r.fault for r in store.rules] == list(plan.faults)
    assert await save_all(store, cp(1), cp(2)) == ["ok", "error"]
    assert await held(inner) == ["cp-1"]

    again = FaultPlan.of(Fault.fail("get")).apply(store)
    assert again is store
    assert len(store.rules) == 4


def test_only_a_checkpoint_store_can_be_wrapped() -> None:
    with pytest.raises(InvalidArgument, match=r"lacks \['save', 'load'"):
        FaultyStore({})  # type: ignore[arg-type]


def test_last_rule_of_a_store_without_rules() -> None:
    with pytest.raises(LookupError, match="no rules"):
        _ = FaultyStore(InMemoryCheckpointStore()).last_rule


def test_store_call_is_a_plain_value() -> None:
    call = StoreCall(0, "get", "cp-1", "failed", error="StoreFault('x')", delay=2)
    assert str(call) == "#0 get(cp-1) -> failed after 2s: StoreFault('x')"
    assert call == StoreCall(0, "get", "cp-1", "failed", error="StoreFault('x')", delay=2)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(lambda s: s.reject_save(nth=0), "nth=0", id="nth-zero"),
        pytest.param(lambda s: s.reject_save(nth=1, every=2), "not both", id="nth-and-every"),
        pytest.param(lambda s: s.fail("get", every=-1), "every=-1", id="every-negative"),
        pytest.param(lambda s: s.fail("get", times=0), "times=0", id="times-zero"),
        pytest.param(lambda s: s.fail("get", nth=1.5), "nth=1.5", id="nth-float"),
        pytest.param(lambda s: s.delay("get", -1), "seconds=-1", id="negative-delay"),
        pytest.param(lambda s: s.delay("get", float("inf")), "seconds=inf", id="infinite-delay"),
        pytest.param(lambda s: s.crash_at(phase="during"), "phase='during'", id="bad-phase"),
        pytest.param(lambda s: s.fail("get", error="boom"), "error='boom'", id="error-str"),
        pytest.param(lambda s: s.fail("get", when=3), "when=3", id="when-not-callable"),
        pytest.param(
            lambda s: s.fail("teleport"), "no coroutine method 'teleport'", id="unknown-op"
        ),
        pytest.param(lambda s: s.fail(""), "op=''", id="empty-op"),
        pytest.param(lambda s: s.add_fault(Fault("reject", "get")), "only save", id="reject-get"),
        pytest.param(lambda s: s.add_fault("reject_save"), "expected a Fault", id="not-a-fault"),
    ],
)
def test_invalid_rules_are_refused(build: Any, message: str) -> None:
    store = FaultyStore(InMemoryCheckpointStore())
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        build(store)
    assert store.rules == []


# ----------------------------------------------------------------------------- the log, read lazily


async def test_calls_since_reads_the_log_from_a_position() -> None:
    store = FaultyStore(InMemoryCheckpointStore())
    await store.save(cp(1))
    start = store.call_count
    await store.get("cp-1")
    await store.latest("run-a")
    assert start == 1
    assert store.call_count == 3
    assert [c.op for c in store.calls_since(start)] == ["get", "latest"]
    assert store.calls_since(start) == store.calls[start:]
    assert store.calls_since(99) == []


async def test_a_failing_inner_store_is_logged_as_failed_without_rules() -> None:
    class Broken(InMemoryCheckpointStore):
        async def get(self, checkpoint_id: str) -> Checkpoint | None:
            raise OSError("disk gone")

    store = FaultyStore(Broken())
    with pytest.raises(OSError, match="disk gone"):
        await store.get("cp-9")
    (call,) = store.calls
    assert (call.op, call.args, call.outcome, call.injected) == ("get", "cp-9", "failed", False)
    assert call.error == "OSError('disk gone')"


def test_runs_log_their_saves_whether_or_not_rules_are_set() -> None:
    """The runtime saves over a rule-free FaultyStore without going through ``save`` (the
    in-memory fast path): the log and ``saves`` read as if it had, and a rule added later
    still sees every save from then on."""
    from pydantic import BaseModel

    from pytest_graphflow import END, START, Graph, GraphRuntime

    class S(BaseModel):
        n: int = 0

    g = Graph("two", S)
    g.node("a", lambda s: {"n": 1}).node("b", lambda s: {"n": 2})
    graph = g.edge(START, "a").edge("a", "b").edge("b", END).compile(
        checkpoint_policy="every_step")
    clock = VirtualClock(T0)
    store = FaultyStore(InMemoryCheckpointStore(), clock=clock)
    runtime = GraphRuntime(store, clock=clock, seed=0)
    first = runtime.invoke(graph, {})
    saves = [c for c in store.calls if c.op == "save"]
    assert len(saves) == 3
    assert all(c.outcome == "ok" and c.time == T0 for c in saves)
    assert [c.args for c in saves] == [f"{i} of run {first.run_id}" for i in store.saves]
    store.reject_save(nth=2)
    with pytest.raises(StoreFault):
        runtime.invoke(graph, {})
    assert [c.outcome for c in store.calls if c.op == "save"][3:] == ["ok", "rejected"]
