"""Where a generated graph's time goes: Hypothesis drawing it, and checking it.

    .venv/bin/python benchmarks/bench_generated_split.py [--graphs 100] [--rounds 3] [--counts]

The workload of ``bench_vs_langgraph.py``'s generated-graphs row, written as a user writes it
(docs/hypothesis.md, "A first property"): a plain ``@given(spec=graphs(max_nodes=6),
data=st.data())`` test under the project's ``graphflow-ci`` profile (``max_examples`` raised to
``--graphs``), inputs and answers drawn from ``data`` with their labels, each graph checked with
``check_interrupt_resume_equivalence``. In CPU time, after one warm-up round (imports, caches:
a user's session pays them once, not per graph): graphs per second, and per graph the
milliseconds spent in the check call and in everything else (Hypothesis drawing the example,
its bookkeeping). Then the same checks again outside Hypothesis, on the examples it drew (the
check alone, without Hypothesis's heap and code around it). To compare two builds, run the
script with each in turn, alternating, several times: on a shared machine one run moves by
±30%. Nothing is asserted (docs/performance.md, "Generated graphs").

``--counts``: instead of timing, what does not move with the machine's load, on the examples
one round draws: Python calls a check (cProfile's total, builtins included) and the objects a
check leaves to the garbage collector (with the collector off during each check).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_graphflow.invariants import check_interrupt_resume_equivalence
from pytest_graphflow.strategies import graph_inputs, graphs, resume_answers
from pytest_graphflow.testing import register_profiles

CLOCK = time.process_time


def one_round(examples: int) -> tuple[float, float, float, list[Any]]:
    """Graphs per second, draw ms and check ms per graph, and the examples drawn."""
    drawn: list[Any] = []
    in_check = [0.0]

    register_profiles()

    @settings(settings.get_profile("graphflow-ci"), max_examples=examples)
    @given(spec=graphs(max_nodes=6), data=st.data())
    def check(spec: Any, data: Any) -> None:
        inp = data.draw(graph_inputs(spec), label="input")
        answers = data.draw(resume_answers(spec), label="answers")
        t = CLOCK()
        assert not check_interrupt_resume_equivalence(spec, inp, answers)
        in_check[0] += CLOCK() - t
        drawn.append((spec, inp, answers))

    t0 = CLOCK()
    check()
    total = CLOCK() - t0
    n = len(drawn)
    return n / total, 1000 * (total - in_check[0]) / n, 1000 * in_check[0] / n, drawn


def check_alone(drawn: list[Any]) -> float:
    """ms per graph for the same checks, outside Hypothesis."""
    t0 = CLOCK()
    for spec, inp, answers in drawn:
        assert not check_interrupt_resume_equivalence(spec, inp, answers)
    return 1000 * (CLOCK() - t0) / len(drawn)


def counts(drawn: list[Any]) -> None:
    """Print Python calls and collected objects per check on ``drawn``."""
    for spec, inp, answers in drawn[:10]:  # warm (each spec's graph compiled once already)
        check_interrupt_resume_equivalence(spec, inp, answers)
    profile = cProfile.Profile()
    profile.enable()
    for spec, inp, answers in drawn:
        check_interrupt_resume_equivalence(spec, inp, answers)
    profile.disable()
    calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    left = 0
    gc.collect()
    for spec, inp, answers in drawn:
        gc.disable()
        try:
            check_interrupt_resume_equivalence(spec, inp, answers)
        finally:
            left += gc.collect()
            gc.enable()
    print(f"{len(drawn)} examples: {calls / len(drawn):,.0f} Python calls a check, "
          f"{left / len(drawn):.1f} objects a check left to the garbage collector")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--graphs", type=int, default=100, help="examples per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--counts", action="store_true",
                        help="count calls and collected objects per check instead of timing")
    args = parser.parse_args()
    one_round(10)  # imports, caches
    if args.counts:
        counts(one_round(args.graphs)[3])
        return
    for _ in range(args.rounds):
        rate, draw_ms, check_ms, drawn = one_round(args.graphs)
        alone = check_alone(drawn)
        print(f"{rate:6.0f} graphs/s   drawing {draw_ms:5.2f} ms   checking {check_ms:5.2f} ms"
              f"   (the same checks outside Hypothesis: {alone:5.2f} ms)")


if __name__ == "__main__":
    main()
