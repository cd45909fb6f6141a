"""The runtime against its own invariants, on graphs drawn by ``strategies.graphs()``.

Every property runs fresh deterministic runtimes per example (no fixtures inside ``@given``).
Sizes follow the loaded profile (``graphflow-ci``/``graphflow-dev``, see ``tests/conftest.py``);
the slower whole-run properties cap their own example count.
"""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_graphflow import GraphRuntime, InMemoryCheckpointStore, VirtualClock
from pytest_graphflow._properties.runs._drive import answer_for, drive
from pytest_graphflow.invariants import (
    assert_invariants,
    check_crash_recovery,
    check_determinism,
    check_interrupt_resume_equivalence,
    check_invariants,
    check_recording,
    format_violations,
    record_run,
)
from pytest_graphflow.strategies import (
    Failure,
    GraphSpec,
    SpecNode,
    fault_plans,
    graph_inputs,
    graphs,
    resume_answers,
    schedules,
)


def _fail(violations: list[Any], spec: GraphSpec) -> None:
    assert not violations, f"{spec!r}\n{format_violations(violations)}"


def scaled(share: float) -> settings:
    """A share of the loaded profile's ``max_examples`` (``--hypothesis-profile`` scales it)."""
    return settings(max_examples=max(5, int(settings().max_examples * share)))


def _runtime(store: Any = None, seed: int = 0) -> GraphRuntime:
    return GraphRuntime(store=store or InMemoryCheckpointStore(),
                        clock=VirtualClock(patch_wall_clock=False), seed=seed)


@given(spec=graphs(), data=st.data(), seed=st.integers(0, 2**16))
def test_every_generated_run_keeps_c1_to_c10(spec: GraphSpec, data: st.DataObject,
                                              seed: int) -> None:
    """C1–C10 on the first leg of every run, saves and events on one timeline (C5)."""
    graph = spec.compile()
    inp = data.draw(graph_inputs(spec), label="input")

    async def main() -> Any:
        return await record_run(_runtime(seed=seed), graph, inp)

    recording = anyio.run(main)
    assert recording.error is None, recording.error
    _fail(check_recording(recording), spec)


@given(spec=graphs(max_nodes=5), data=st.data())
def test_pausing_and_resuming_equals_answering_at_once(spec: GraphSpec,
                                                       data: st.DataObject) -> None:
    """Interrupt/resume equivalence (same and fresh runtimes); C1–C10 across all legs."""
    inp = data.draw(graph_inputs(spec), label="input")
    answers = data.draw(resume_answers(spec), label="answers")
    _fail(check_interrupt_resume_equivalence(spec, inp, answers), spec)


@scaled(0.4)
@given(spec=graphs(max_nodes=4), data=st.data())
def test_crash_at_every_store_operation_recovers(spec: GraphSpec, data: st.DataObject) -> None:
    """Crash before and after every store call; a fresh runtime recovers to the same end."""
    inp = data.draw(graph_inputs(spec), label="input")
    answers = data.draw(resume_answers(spec), label="answers")
    _fail(check_crash_recovery(spec, inp, answers), spec)


@scaled(0.5)
@given(spec=graphs(max_nodes=5), data=st.data(), seed=st.integers(0, 2**16))
def test_one_seed_gives_one_stream_on_both_backends(spec: GraphSpec, data: st.DataObject,
                                                    seed: int) -> None:
    inp = data.draw(graph_inputs(spec), label="input")
    answers = data.draw(resume_answers(spec), label="answers")
    _fail(check_determinism(spec, inp, seed, answers=answers, backends=("asyncio", "trio")),
          spec)


@scaled(0.5)
@given(spec=graphs(max_nodes=5), data=st.data(), schedule=schedules(4, batches=3))
def test_start_order_of_a_batch_does_not_change_the_stream(
    spec: GraphSpec, data: st.DataObject, schedule: Any
) -> None:
    """Generated nodes are independent, so any start order gives the same JSON stream.

    The schedule is drawn by Hypothesis: a failure would shrink toward declared order.
    """
    graph = spec.compile()
    inp = data.draw(graph_inputs(spec), label="input")
    answers = data.draw(resume_answers(spec), label="answers")

    async def main() -> tuple[list[str], list[str]]:
        plain = await drive(_runtime(), graph, inp, answers)
        ordered = await drive(_runtime(), schedule.apply(graph), inp, answers)
        return ([e.model_dump_json() for e in plain.events],
                [e.model_dump_json() for e in ordered.events])

    plain, ordered = anyio.run(main)
    assert ordered == plain


@scaled(0.6)
@given(spec=graphs(max_nodes=4, interrupts=False), data=st.data(),
       plan=fault_plans(ops=("save",), kinds=("reject",), max_faults=1))
def test_rejected_saves_end_the_stream_with_the_stores_error(
    spec: GraphSpec, data: st.DataObject, plan: Any
) -> None:
    """C6 on generated graphs: a rejected save raises that exception, no event after it."""
    graph = spec.compile()
    inp = data.draw(graph_inputs(spec), label="input")

    async def main() -> Any:
        store = plan.apply(InMemoryCheckpointStore())
        return await record_run(_runtime(store), graph, inp)

    recording = anyio.run(main)
    _fail(check_recording(recording), spec)
    rejected = [c for c in recording.store_log or [] if c.outcome == "rejected"]
    assert bool(rejected) == (recording.error is not None)


@scaled(0.5)
@given(spec=graphs(max_nodes=5), data=st.data())
def test_resume_from_every_saved_checkpoint_keeps_the_invariants(
    spec: GraphSpec, data: st.DataObject
) -> None:
    """Time travel (C8 by checkpoint id): resuming any non-final checkpoint of a run gives a
    leg that keeps C1–C10 and names that checkpoint in ``resumed_from``."""
    graph = spec.compile()
    inp = data.draw(graph_inputs(spec), label="input")
    answers = data.draw(resume_answers(spec), label="answers")

    async def main() -> None:
        store = InMemoryCheckpointStore()
        done = await drive(_runtime(store), graph, inp, answers)
        assert done.run_id is not None
        for cp in await store.list(done.run_id):
            if cp.status in ("completed", "failed", "cancelled"):
                continue
            rt = _runtime(store, seed=1)
            resume = None
            if cp.status == "interrupted":
                from pytest_graphflow import Resume
                from pytest_graphflow._properties.runs._drive import answer_for

                resume = Resume(answers={i.key: answer_for(answers, i) for i in cp.interrupts})
            stream = rt.resume_stream(cp.id, resume, graph=graph)
            events = [e async for e in stream]
            assert events[0].resumed_from == cp.id
            assert_invariants(events, graph=graph)

    anyio.run(main)


def test_generated_runs_cover_every_feature() -> None:
    """A sanity check on the strategy: a sample exercises halts, retries, loops, expansions."""
    seen: set[str] = set()

    @settings(max_examples=200, database=None, derandomize=True)
    @given(spec=graphs())
    def sample(spec: GraphSpec) -> None:
        for n in spec.nodes:
            if n.interrupts:
                seen.add("interrupt")
            if n.fail is not None:
                seen.add("fail")
            if n.on_error:
                seen.add("on_error")
            if n.retry > 1:
                seen.add("retry")
            if n.sleep:
                seen.add("async")
            seen.add(n.route)
            seen.add(n.effect)
        if spec.joins:
            seen.add("join")
        if len(spec.entry) > 1:
            seen.add("fan-out")
        seen.add(spec.checkpoint_policy)

    sample()
    assert seen >= {"interrupt", "fail", "retry", "async", "static", "branch", "loop", "expand",
                    "join", "fan-out", "pure", "read", "write", "external", "human",
                    "every_step", "on_halt", "never"}


@scaled(0.6)
@given(spec=graphs(max_nodes=5, edge_errors=True), data=st.data())
def test_an_edge_function_that_raises_ends_the_stream_with_its_exception(
    spec: GraphSpec, data: st.DataObject
) -> None:
    """C7: the edge function's own exception ends the stream (no event of its batch), and the
    node whose edges threw is in no checkpoint as completed: resuming re-runs it, raising again.
    """
    from pytest_graphflow.strategies import PlannedFailure

    graph = spec.compile()
    inp = data.draw(graph_inputs(spec), label="input")
    answers = data.draw(resume_answers(spec), label="answers")

    async def main() -> None:
        store = InMemoryCheckpointStore()
        rec = await record_run(_runtime(store), graph, inp,
                               on_interrupt=lambda i: answer_for(answers, i))
        _fail(check_recording(rec), spec)
        if rec.error is None:
            return
        assert type(rec.error) is PlannedFailure, repr(rec.error)
        latest = await store.latest(rec.events[0].run_id)
        if latest is None:
            return
        again = _runtime(store, seed=1).resume_stream(
            latest.run_id, graph=graph, on_interrupt=lambda i: answer_for(answers, i))
        try:
            async for _ in again:
                pass
        except PlannedFailure:
            return
        raise AssertionError("resuming the run did not re-run the node whose edge raised")

    anyio.run(main)


@scaled(0.6)
@given(spec=graphs(max_nodes=5, failures=False), data=st.data(),
       timeout=st.sampled_from([0.5, 1.0, 2.0, 3.0]))
def test_a_timed_out_run_resumes_to_the_end_of_an_uninterrupted_one(
    spec: GraphSpec, data: st.DataObject, timeout: float
) -> None:
    """C9 after a timeout: every task that finished keeps its result (replayed on resume,
    whatever its effect class) and the resumed run ends where a run without timeout ends.

    Failing nodes are left out here: ``test_timeout_puts_a_failed_node_last`` pins the bug
    they hit (C4).
    """
    graph = spec.compile()
    inp = data.draw(graph_inputs(spec), label="input")
    answers = data.draw(resume_answers(spec), label="answers")

    def hook(i: Any) -> Any:
        return answer_for(answers, i)

    async def main() -> None:
        want = await drive(_runtime(), graph, inp, answers, hook=True)
        rt = _runtime()
        first = rt.stream(graph, inp, timeout=timeout, on_interrupt=hook)
        events = [e async for e in first]
        result = first.result()
        if result.status == "failed":
            assert type(result.error).__name__ == "RunTimedOut", repr(result.error)
            second = rt.resume_stream(result.run_id, on_interrupt=hook)
            events += [e async for e in second]
            result = second.result()
        _fail(check_invariants(events, graph=graph), spec)
        assert want.result is not None
        assert (result.status, result.data) == (want.result.status, want.result.data)

    anyio.run(main)


def test_timeout_puts_a_failed_node_last() -> None:
    """C4: "when one interrupts or fails, the completed nodes come first and the halting node
    last" — also when the batch is stopped by the run's timeout."""
    spec = GraphSpec(
        nodes=(SpecNode("n0", fail=Failure(None)), SpecNode("n1", writes=True),
               SpecNode("n2", sleep=5.0)),
        entry=("n0", "n1", "n2"),
    )
    graph = spec.compile()
    trace = _runtime().trace(graph, {}, timeout=1.0)
    assert trace.result.status == "failed"
    results = [e.node for e in trace.events.of_type("node_end", "error") if e.node]
    assert results == ["n1", "n0"]
    assert check_invariants(trace.events, graph=graph) == []
