"""A ``FaultyStore`` over the in-memory store answers the runtime at once (issue 29).

Its ``claim_now``/``release_now``/``has_run``/``kept_latest`` (``StoreFeatures.in_process``)
and its ``step_sink`` log each answer as the awaited call it stands for (``claim``,
``release``, ``latest``, ``save``), and decline (the runtime then awaits that call, which
consults the rules) while a rule watches the operation or the store is dead. Each scenario
here runs twice on the same seed: over a plain in-memory store, and over one whose instance
carries its own ``latest`` (so the wrapper passes neither on: every call goes the general
way). Everything a user can see must be the same: the call log (text, times, outcomes,
errors), ``saves``, the rules' counters, the result or the error, the recorded events and
what the inner store holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    FaultyStore,
    Graph,
    InMemoryCheckpointStore,
    Resume,
    VirtualClock,
    interrupt,
)
from pytest_graphflow._plugin._runtime import RecordingRuntime
from pytest_graphflow._stores._features import features_of
from pytest_graphflow._time._clock import DEFAULT_START
from pytest_graphflow.errors import SimulatedCrash, ThreadBusy


class S(BaseModel):
    n: int = 0
    answer: str = ""


HOOK: list[Callable[[FaultyStore], None] | None] = [None]
"""Called with the store by the ``draft`` node (a rule added mid-run)."""
STORE: list[FaultyStore | None] = [None]


def _draft(s: S) -> dict[str, Any]:
    hook, store = HOOK[0], STORE[0]
    if hook is not None and store is not None:
        HOOK[0] = None
        hook(store)
    return {"n": s.n + 1}


def _approval(policy: str | None) -> Any:
    g = Graph("answers_at_once", S)
    g.node("draft", _draft)
    g.node("check", lambda s: {"n": s.n * 2})
    g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
    g.node("publish", lambda s: {"n": s.n + 10})
    g.edge(START, "draft").edge("draft", "check")
    g.edge("check", "approve").edge("approve", "publish").edge("publish", END)
    return g.compile() if policy is None else g.compile(checkpoint_policy=policy)


GRAPHS = {"on_halt": _approval(None), "every_step": _approval("every_step")}


def _inner(fast: bool) -> InMemoryCheckpointStore:
    inner = InMemoryCheckpointStore()
    if not fast:  # an instance carrying its own latest: the wrapper answers nothing at once
        inner.latest = inner.latest  # type: ignore[method-assign]
    return inner


def _run(fast: bool, policy: str, rules: Callable[[FaultyStore], None] | None,
         mid_run: Callable[[FaultyStore], None] | None, *, thread: str | None = None,
         hold: bool = False) -> tuple[Any, ...]:
    """One interrupt/resume round trip (twice, the second run on the same thread when
    ``thread`` is given), and everything observable about it."""
    clock = VirtualClock()
    inner = _inner(fast)
    store = FaultyStore(inner, clock=clock)
    features = features_of(store)
    assert (features.in_process, features.step_sink) == (fast, fast)
    if rules is not None:
        rules(store)
    runtime = RecordingRuntime(store, clock=clock, seed=3)
    graph = GRAPHS[policy]
    seen: list[Any] = []
    HOOK[0], STORE[0] = mid_run, store
    try:
        if hold:  # another run holds the thread: the claim fails (ThreadBusy)
            anyio.run(lambda: inner.claim("t-held", "run-other", now=DEFAULT_START, ttl=60))
        for i in range(2):
            try:
                opts = {} if thread is None else {"thread_id": thread}
                paused = runtime.invoke(graph, {"n": i}, **opts)
                seen.append((paused.status, paused.data))
                if paused.status == "interrupted":
                    done = runtime.resume(paused.run_id, Resume("yes"))
                    seen.append((done.status, done.data))
            except BaseException as exc:  # a SimulatedCrash too
                seen.append(repr(exc))
            if store.dead:
                store.revive()
    finally:
        HOOK[0], STORE[0] = None, None
    held = sorted((cp.id, cp.model_dump_json()) for cp in anyio.run(inner.list))
    return (
        seen,
        [str(call) for call in store.calls],
        store.saves,
        [(r.fault.describe(), r.hits, r.seen, r.matched) for r in store.rules],
        [[e.model_dump_json() for e in leg.events] for leg in runtime.recordings],
        [(leg.visited, repr(leg.error)) for leg in runtime.recordings],
        held,
    )


def _add(build: Callable[[FaultyStore], Any]) -> Callable[[FaultyStore], None]:
    def add(store: FaultyStore) -> None:
        build(store)
    return add


RULES: dict[str, Callable[[FaultyStore], None] | None] = {
    "none": None,
    "reject_save_2": _add(lambda s: s.reject_save(nth=2)),
    "reject_every_save": _add(lambda s: s.reject_save()),
    "fail_claim_1": _add(lambda s: s.fail("claim", nth=1)),
    "fail_claim_3": _add(lambda s: s.fail("claim", nth=3)),
    "fail_release_1": _add(lambda s: s.fail("release", nth=1)),
    "fail_latest_2": _add(lambda s: s.fail("latest", nth=2)),
    "fail_latest_when": _add(lambda s: s.fail("latest", when=lambda run_id: True, times=1)),
    "delay_claim": _add(lambda s: s.delay("claim", 2.5)),
    "delay_latest": _add(lambda s: s.delay("latest", 1.0, nth=2)),
    "crash_save_2": _add(lambda s: s.crash_at("save", nth=2)),
    "crash_save_after": _add(lambda s: s.crash_at("save", nth=1, phase="after")),
    "crash_claim": _add(lambda s: s.crash_at("claim", nth=2)),
    "crash_release": _add(lambda s: s.crash_at("release", nth=1)),
    "crash_latest": _add(lambda s: s.crash_at("latest", nth=3)),
    "fail_get_only": _add(lambda s: s.fail("get")),
}


@pytest.mark.parametrize("policy", sorted(GRAPHS))
@pytest.mark.parametrize("rules", sorted(RULES))
def test_rules_set_before_the_run_see_the_same_calls(policy: str, rules: str) -> None:
    fast = _run(True, policy, RULES[rules], None)
    general = _run(False, policy, RULES[rules], None)
    assert fast == general


MID_RUN: dict[str, Callable[[FaultyStore], None]] = {
    "reject_next_save": _add(lambda s: s.reject_save(nth=1)),
    "reject_second_save": _add(lambda s: s.reject_save(nth=2)),
    "fail_next_release": _add(lambda s: s.fail("release", nth=1)),
    "fail_next_latest": _add(lambda s: s.fail("latest", nth=1)),
    "fail_next_claim": _add(lambda s: s.fail("claim", nth=1)),
    "crash_next_save": _add(lambda s: s.crash_at("save", nth=1)),
    "crash_next_release": _add(lambda s: s.crash_at("release", nth=1, phase="after")),
    "delay_saves": _add(lambda s: s.delay("save", 0.5)),
    "clear_rules": _add(lambda s: s.clear_rules()),
}


@pytest.mark.parametrize("policy", sorted(GRAPHS))
@pytest.mark.parametrize("mid_run", sorted(MID_RUN))
def test_a_rule_added_mid_run_is_honoured_from_the_next_call(policy: str,
                                                             mid_run: str) -> None:
    """A node adds the rule while the run is on (after its claim, before its saves): the
    lean step's sink and the answers at once decline from then on."""
    rules = RULES["fail_get_only"] if mid_run == "clear_rules" else None
    fast = _run(True, policy, rules, MID_RUN[mid_run])
    general = _run(False, policy, rules, MID_RUN[mid_run])
    assert fast == general
    assert fast != _run(True, policy, rules, None)  # the rule did something


@pytest.mark.parametrize("policy", sorted(GRAPHS))
def test_a_thread_held_elsewhere_is_logged_as_the_claim_that_failed(policy: str) -> None:
    fast = _run(True, policy, None, None, thread="t-held", hold=True)
    general = _run(False, policy, None, None, thread="t-held", hold=True)
    assert fast == general
    assert fast[0][0].startswith(f"{ThreadBusy.__name__}(")
    claims = [line for line in fast[1] if " claim(t-held, " in line]
    assert len(claims) == 2
    assert all(line.split(" -> ")[1].startswith("failed: ThreadBusy(") for line in claims)


@pytest.mark.parametrize("policy", sorted(GRAPHS))
def test_runs_on_one_thread_see_the_same_calls(policy: str) -> None:
    fast = _run(True, policy, None, None, thread="t-1")
    general = _run(False, policy, None, None, thread="t-1")
    assert fast == general


def test_the_answers_at_once_log_what_the_awaited_calls_log() -> None:
    """Directly: each answer leaves the entry the awaited call leaves; a declined one
    (``NotImplemented``) leaves none and does nothing."""
    clock = VirtualClock()
    fast, general = FaultyStore(_inner(True), clock=clock), FaultyStore(_inner(True),
                                                                       clock=clock)
    now = clock.now()
    token = fast.claim_now("t", "run-1", now, 30.0)
    assert fast.has_run("run-1") is False
    assert fast.release_now("t", token) is None

    async def awaited() -> None:
        assert await general.claim("t", "run-1", now=now, ttl=30.0) == token
        assert await general.latest("run-1") is None
        await general.release("t", token)

    anyio.run(awaited)
    assert [str(c) for c in fast.calls] == [str(c) for c in general.calls]
    assert [c.op for c in fast.calls] == ["claim", "latest", "release"]

    assert fast.kept_latest("run-1") is NotImplemented  # no checkpoint: the awaited read
    assert fast.release_now("t", token) is NotImplemented  # not the claim: awaited (stale)
    fast.fail("latest")
    assert fast.has_run("run-1") is NotImplemented
    assert fast.claim_now("t", "run-2", now, 30.0) == token + 1  # claims are not watched
    fast.crash_at("release")
    assert fast.release_now("t", token + 1) is NotImplemented
    assert fast.call_count == 4
    assert [rule.seen for rule in fast.rules] == [0, 0]
    fast.clear_rules()
    fast.crash_at("get")
    with pytest.raises(SimulatedCrash):
        anyio.run(fast.get, "cp-1")
    assert fast.claim_now("t2", "run-3", now, 30.0) is NotImplemented  # dead
    assert fast.call_count == 5
