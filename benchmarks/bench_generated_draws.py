"""What drawing a generated graph costs, in counts (noise-free): choices and Python calls.

    .venv/bin/python benchmarks/bench_generated_draws.py [--graphs 100] [--seeds 5]

Drawing is paid by the choice: each choice an example makes costs Hypothesis some 50 Python
calls of bookkeeping (recording it, replaying it, the example tree, the caches), in every
test call. Two views, both deterministic for a given build and Hypothesis version:

* **Under Hypothesis**: the drawing half of ``bench_generated_split.py``'s test (a plain
  ``@given(spec=graphs(max_nodes=6), data=st.data())`` under the ``graphflow-ci`` profile,
  ``max_examples`` raised to ``--graphs``, inputs and answers drawn from ``data`` with their
  labels) without the check: Hypothesis's test calls and overruns, the mean graph size
  and interrupt points (what a check's cost grows with),
  the choices per test call and per graph of six nodes, and cProfile's Python calls per
  example (engine included), after a first run that pays the imports. The profile is
  derandomized, and its seed comes from the test function's code, so one run is one sample
  of examples: the figures are summed over ``--seeds`` runs (``@seed(k)``, k = 0, 1, ...).
* **The strategies alone**: 200 graphs (and their inputs and answers) drawn from fresh
  ``ConjectureData`` objects, no engine: choices per graph of six nodes (``min_nodes=6``),
  and Python calls per graph drawn.

Timings are left to ``bench_generated_split.py`` (docs/performance.md, "Generated graphs").
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
from collections import Counter
from random import Random
from typing import Any

from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import engine
from hypothesis.internal.conjecture.data import ConjectureData

from pytest_graphflow.strategies import graph_inputs, graphs, resume_answers
from pytest_graphflow.testing import register_profiles


def under_hypothesis(examples: int, seeds: int) -> dict[str, float]:
    """Counts of the drawing half of the split benchmark's test (see the module's doc)."""
    register_profiles()
    tally: Counter[str] = Counter()
    original = engine.ConjectureRunner.test_function

    def test_function(self: Any, data: Any) -> None:
        original(self, data)
        tally["calls"] += 1
        tally["overruns"] += data.status.name == "OVERRUN"
        tally["choices"] += len(data.choices)

    def make(k: int) -> Any:
        @seed(k)
        @settings(settings.get_profile("graphflow-ci"), max_examples=examples,
                  derandomize=False)
        @given(spec=graphs(max_nodes=6), data=st.data())
        def draw(spec: Any, data: Any) -> None:
            data.draw(graph_inputs(spec), label="input")
            data.draw(resume_answers(spec), label="answers")
            tally["examples"] += 1
            tally["nodes"] += spec.size
            tally["points"] += len(spec.interrupt_points)
            if spec.size == 6:
                tally["six"] += 1
                tally["six_choices"] += len(data.conjecture_data.choices)

        return draw

    engine.ConjectureRunner.test_function = test_function  # type: ignore[method-assign]
    try:
        make(seeds)()
        tally.clear()
        gc.collect()
        profile = cProfile.Profile()
        for k in range(seeds):
            profile.enable()
            make(k)()
            profile.disable()
    finally:
        engine.ConjectureRunner.test_function = original  # type: ignore[method-assign]
    n = tally["examples"]
    return {
        "examples": n,
        "test calls": tally["calls"],
        "overruns": tally["overruns"],
        "nodes a graph": tally["nodes"] / n,
        "interrupt points a graph": tally["points"] / n,
        "choices a test call": tally["choices"] / tally["calls"],
        "choices a 6-node graph": tally["six_choices"] / max(1, tally["six"]),
        "Python calls an example": pstats.Stats(profile).total_calls / n,  # type: ignore[attr-defined]
    }


def strategies_alone(graphs_drawn: int = 200) -> dict[str, float]:
    """Choices of a 6-node graph and Python calls a graph, drawn without the engine."""
    six = graphs(min_nodes=6, max_nodes=6)
    choices = []
    for k in range(graphs_drawn):
        data = ConjectureData(random=Random(k))
        data.draw(six)
        choices.append(len(data.choices))
    strategy = graphs(max_nodes=6)

    def draw_all() -> None:
        for k in range(graphs_drawn):
            data = ConjectureData(random=Random(k))
            spec = data.draw(strategy)
            data.draw(graph_inputs(spec))
            data.draw(resume_answers(spec))

    draw_all()
    gc.collect()
    profile = cProfile.Profile()
    profile.enable()
    draw_all()
    profile.disable()
    return {
        "choices a 6-node graph (mean)": sum(choices) / len(choices),
        "choices a 6-node graph (max)": max(choices),
        "Python calls a graph": pstats.Stats(profile).total_calls / graphs_drawn,  # type: ignore[attr-defined]
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--graphs", type=int, default=100, help="examples a run")
    parser.add_argument("--seeds", type=int, default=5, help="runs under Hypothesis")
    args = parser.parse_args()
    print(f"under Hypothesis (graphflow-ci, {args.seeds} seeds x {args.graphs} examples):")
    for key, value in under_hypothesis(args.graphs, args.seeds).items():
        print(f"  {key:28s} {value:10,.1f}")
    print("the strategies alone (200 seeds):")
    for key, value in strategies_alone().items():
        print(f"  {key:28s} {value:10,.1f}")


if __name__ == "__main__":
    main()
