"""The strategies themselves: valid values, feature switches, shrinking, argument checks."""

from __future__ import annotations

import cProfile
import gc
import itertools
import pstats
from random import Random
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture.data import ConjectureData
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    FaultPlan,
    FaultyStore,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Interrupt,
    VirtualClock,
)
from pytest_graphflow._properties._hypothesis_entry import _hypothesis_setup_hook
from pytest_graphflow._properties.strategies import _strategies
from pytest_graphflow.errors import InvalidArgument
from pytest_graphflow.strategies import (
    GraphSpec,
    Schedule,
    fault_plans,
    graph_inputs,
    graphs,
    resume_answers,
    schedules,
)
from pytest_graphflow.testing import register_profiles

FIND = settings(max_examples=500, database=None, derandomize=True, deadline=None,
                suppress_health_check=list(HealthCheck))


def _run(graph: Any, inp: Any = None, seed: int = 0) -> Any:
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(patch_wall_clock=False),
                      seed=seed, on_interrupt=lambda i: 1)
    return rt.trace(graph, inp or {})


@given(spec=graphs(), data=st.data())
def test_every_graph_compiles_and_every_run_ends(spec: GraphSpec, data: st.DataObject) -> None:
    graph = spec.compile()
    assert graph.revision == spec.compile().revision
    inp = data.draw(graph_inputs(spec))
    assert set(inp) <= set(spec.keys)
    trace = _run(graph, inp)
    assert trace.result.status in ("completed", "failed")
    if trace.result.status == "failed":  # only planned failures fail a generated run
        assert type(trace.result.error).__name__ == "NodeFailed"


@given(spec=graphs(parallel=False, branches=False, cycles=False, expansions=False,
                   interrupts=False, failures=False, reducers=False, effects=False,
                   sleeps=False, emits=False))
def test_switched_off_features_stay_off(spec: GraphSpec) -> None:
    assert len(spec.entry) == 1
    assert not spec.joins
    assert not spec.reducers
    for n in spec.nodes:
        assert n.route == "static"
        assert len(n.children) <= 1
        assert (n.effect, n.interrupts, n.fail, n.sleep, n.emits) == ("pure", (), None, 0.0, False)
    trace = _run(spec.compile())
    steps = [e.step for e in trace.events if e.type == "node_start"]
    assert len(steps) == len(set(steps))  # one task per step: no parallel batch


@given(spec=graphs(max_nodes=3, min_nodes=2))
def test_sizes_are_bounded(spec: GraphSpec) -> None:
    assert 2 <= spec.size <= 3


@pytest.mark.parametrize(
    ("feature", "size"),
    [
        pytest.param(lambda s: any(n.route == "loop" for n in s.nodes), 1, id="loop"),
        pytest.param(lambda s: any(n.interrupts for n in s.nodes), 1, id="interrupt"),
        pytest.param(lambda s: len(s.entry) > 1, 2, id="fan-out"),
        pytest.param(lambda s: any(n.route == "expand" for n in s.nodes), 2, id="expansion"),
        pytest.param(lambda s: any(n.on_error for n in s.nodes), 2, id="failure-route"),
        pytest.param(lambda s: bool(s.joins), 3, id="join"),
    ],
)
def test_graphs_shrink_to_the_smallest_graph_with_a_feature(feature: Any, size: int) -> None:
    spec = find(graphs(), feature, settings=FIND)
    assert spec.size == size, repr(spec)


def _drawn(seed: int, strategy: Any) -> tuple[Any, int]:
    """A value of ``strategy`` drawn from a fresh example seeded ``seed``, and the number of
    choices it took (what Hypothesis records, replays and shrinks)."""
    data = ConjectureData(random=Random(seed))
    return data.draw(strategy), len(data.choices)


def test_a_node_is_drawn_in_five_choices() -> None:
    """Hypothesis's bookkeeping costs about 50 Python calls a choice, so drawing is paid by
    the choice: a node is five integer choices (fields packed as digits), a join's sources two
    more, an expansion's item count one, the policy and the last "no more" one each. A graph
    of six nodes is therefore at most 2 + 6 * (5 + 2) = 44 choices; it was 57 to 89 (70 on
    average) with ten choices a node, 36 on average now."""
    counts = []
    for seed in range(100):
        spec, choices = _drawn(seed, graphs(min_nodes=6, max_nodes=6))
        assert spec.size == 6
        counts.append(choices)
    assert max(counts) <= 44, max(counts)
    assert sum(counts) / len(counts) <= 40, sum(counts) / len(counts)


def test_drawing_a_graph_makes_few_python_calls() -> None:
    """Python calls to draw 50 examples of ``graphs()`` with their inputs and answers (no
    engine around them: the strategies' own work and each choice's bookkeeping): 2,540 a graph
    with ten choices a node and a list for a join's sources, 1,640 with five (Hypothesis
    6.170); the ceiling leaves room for another Hypothesis patch release."""
    strategy = graphs()

    def draw_all() -> None:
        for seed in range(50):
            data = ConjectureData(random=Random(seed))
            spec = data.draw(strategy)
            data.draw(graph_inputs(spec))
            data.draw(resume_answers(spec))

    draw_all()  # caches: the state models and the input and answer strategies per key set
    gc.collect()
    gc.disable()
    try:
        profile = cProfile.Profile()
        profile.enable()
        draw_all()
        profile.disable()
    finally:
        gc.enable()
    per_graph = pstats.Stats(profile).total_calls / 50  # type: ignore[attr-defined]
    assert per_graph <= 2_000, per_graph


def test_a_node_asks_for_input_two_times_in_five() -> None:
    """Checking a graph costs about a resume per interrupt point (issue 29). The targeted
    twin is one node in four (was two: with no asking sibling it asks ``q0``, so two nodes
    in three asked for input). Drawn without the engine from 400 fixed seeds: 3.15
    interrupt points a graph before, 2.35 now; the sizes are as before (3.72 nodes, a
    third of the graphs of six nodes)."""
    sizes, asking, points = [], 0, 0
    for seed in range(400):
        spec, _ = _drawn(seed, graphs())
        sizes.append(spec.size)
        asking += sum(1 for n in spec.nodes if n.interrupts)
        points += len(spec.interrupt_points)
    assert 0.3 <= asking / sum(sizes) <= 0.5, asking / sum(sizes)  # 0.44 (0.65 before)
    assert points / len(sizes) <= 2.6, points / len(sizes)
    assert sizes.count(6) >= 100, sizes.count(6)  # 130
    assert sizes.count(1) >= 60, sizes.count(1)  # 82


def test_the_mutator_leaves_a_graphs_nodes_alone() -> None:
    """Hypothesis's mutator copies spans over others of their label; it made three examples
    in four copies of a few graphs, grown toward ``max_nodes``, at 1,800 Python calls an
    example. The node spans sit in a span it skips, and stay there for the shrinker."""
    data = ConjectureData(random=Random(3))
    spec = data.draw(graphs(min_nodes=4))
    data.freeze()
    assert spec.size >= 4
    assert data.spans.mutator_groups == []
    nested = [s for s in data.spans if s.label == _strategies._NODES.label]
    assert len(nested) == spec.size + 1  # one a node and one for the last "no more"
    assert all(a.start < b.start and b.end == a.end for a, b in itertools.pairwise(nested))


def test_an_example_under_the_engine_makes_few_python_calls() -> None:
    """The split benchmark's test without its check, 100 examples under ``graphflow-ci``:
    4,245 Python calls an example with the mutator copying node spans (4.43 nodes an
    example), 2,944 without (3.72, as drawn: Hypothesis 6.170); the ceiling leaves room for
    a Hypothesis patch release."""
    register_profiles()
    sizes: list[int] = []

    @settings(settings.get_profile("graphflow-ci"), max_examples=100)
    @given(spec=graphs(max_nodes=6), data=st.data())
    def draw(spec: GraphSpec, data: st.DataObject) -> None:
        data.draw(graph_inputs(spec), label="input")
        data.draw(resume_answers(spec), label="answers")
        sizes.append(spec.size)

    draw()  # caches
    sizes.clear()
    gc.collect()
    profile = cProfile.Profile()
    profile.enable()
    draw()
    profile.disable()
    per_example = pstats.Stats(profile).total_calls / len(sizes)  # type: ignore[attr-defined]
    assert per_example <= 3_700, per_example
    assert sum(sizes) / len(sizes) <= 4.0, sum(sizes) / len(sizes)


def test_a_graph_prints_as_a_readable_graph() -> None:
    spec = find(graphs(), lambda s: bool(s.joins) and any(n.interrupts for n in s.nodes),
                settings=FIND)
    text = repr(spec)
    assert text.startswith("GraphSpec 'generated'")
    assert "START -> " in text
    assert "join [" in text
    assert "interrupts q0" in text
    assert spec.interrupt_points
    assert all(":" in p for p in spec.interrupt_points)


def test_graphspec_is_registered_for_from_type() -> None:
    _hypothesis_setup_hook()
    seen: list[GraphSpec] = []

    @settings(max_examples=3, database=None)
    @given(st.from_type(GraphSpec))
    def check(spec: GraphSpec) -> None:
        seen.append(spec)

    check()
    assert seen
    assert all(isinstance(s, GraphSpec) for s in seen)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        pytest.param(lambda: graphs(max_nodes=0), "max_nodes", id="max_nodes-zero"),
        pytest.param(lambda: graphs(min_nodes=3, max_nodes=2), "min_nodes", id="min-above-max"),
        pytest.param(lambda: graphs(cycles="yes"),  # type: ignore[arg-type]
                     "cycles", id="flag-not-bool"),
        pytest.param(lambda: graphs(checkpoint_policies=["sometimes"]), "checkpoint_policies",
                     id="unknown-policy"),
        pytest.param(lambda: graph_inputs({"x": 1}),  # type: ignore[arg-type]
                     "GraphSpec", id="inputs-of-a-dict"),
        pytest.param(lambda: resume_answers([3]), "Interrupt", id="answers-of-an-int"),
        pytest.param(lambda: fault_plans(kinds=("explode",)), "kinds", id="unknown-fault"),
        pytest.param(lambda: fault_plans(max_faults=-1), "max_faults", id="negative-faults"),
        pytest.param(lambda: schedules(0), "batch_size", id="empty-batch"),
        pytest.param(lambda: schedules(3, batches=0), "batches", id="no-batches"),
    ],
)
def test_invalid_arguments_raise_invalid_argument(make: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        make()


@given(plan=fault_plans(kinds=("reject", "fail", "delay", "crash"), max_faults=3))
def test_fault_plans_apply_to_a_store(plan: FaultPlan) -> None:
    store = plan.apply(InMemoryCheckpointStore())
    assert isinstance(store, FaultyStore)
    assert len(store.rules) == len(plan) <= 3
    assert plan.describe()


def test_fault_plans_shrink_to_no_faults() -> None:
    assert len(find(fault_plans(), lambda p: True, settings=FIND)) == 0
    plan = find(fault_plans(), lambda p: len(p) > 0, settings=FIND)
    assert plan.describe() == "reject_save(nth=1)"


def test_resume_answers_cover_every_interrupt() -> None:
    spec = find(graphs(), lambda s: len(s.interrupt_points) >= 2, settings=FIND)
    answers = find(resume_answers(spec), lambda a: True, settings=FIND)
    assert set(answers) == set(spec.interrupt_points)
    assert set(answers.values()) == {None}  # shrinks to None answers
    pending = [Interrupt(key="task-1:q", id="q", node="n", task_id="task-1")]
    assert find(resume_answers(pending), lambda a: True, settings=FIND) == {"task-1:q": None}


# --------------------------------------------------------------------------- schedules

STARTED: list[str] = []


class Empty(BaseModel):
    pass


def _recorder(name: str) -> Any:
    def fn(state: Empty) -> None:
        STARTED.append(name)

    return fn


def _fan_out(width: int) -> Any:
    g = Graph("fan", Empty)
    names = [f"t{i}" for i in range(width)]
    for name in names:
        g.node(name, _recorder(name))
    g.edge(START, names)
    g.edge(names, END)
    return g.compile()


@settings(max_examples=30, deadline=None)
@given(schedule=schedules(4), seed=st.integers(0, 1000))
def test_a_schedule_decides_the_start_order_whatever_the_seed(schedule: Schedule,
                                                              seed: int) -> None:
    STARTED.clear()
    graph = schedule.apply(_fan_out(4))
    assert graph.revision == _fan_out(4).revision
    _run(graph, seed=seed)
    assert [f"t{i}" for i in schedule.orders[0]] == STARTED


def test_a_schedule_fits_batches_of_other_sizes() -> None:
    s = Schedule(((2, 0, 1),))
    assert s.order_for(0, 3) == [2, 0, 1]
    assert s.order_for(0, 2) == [0, 1]
    assert s.order_for(0, 4) == [2, 0, 1, 3]
    assert s.order_for(1, 3) == [0, 1, 2]


def test_schedules_shrink_toward_declared_order() -> None:
    assert find(schedules(4), lambda s: True, settings=FIND).orders == ((0, 1, 2, 3),)


def test_a_scheduled_graph_runs_on_trio_too() -> None:
    STARTED.clear()
    graph = Schedule(((2, 1, 0),)).apply(_fan_out(3))
    rt = GraphRuntime(clock=VirtualClock(patch_wall_clock=False), seed=5, backend="trio")

    async def main() -> Any:
        return await rt.atrace(graph, {})

    assert anyio.run(main, backend="trio").result.status == "completed"
    assert STARTED == ["t2", "t1", "t0"]


def test_a_scheduled_graph_can_be_run_again() -> None:
    graph = Schedule(((1, 0), (0, 1))).apply(_fan_out(2))
    for seed in (0, 0, 1):
        STARTED.clear()
        _run(graph, seed=seed)
        assert STARTED == ["t1", "t0"]  # each run starts from the first order
