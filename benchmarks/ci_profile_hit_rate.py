"""How often the ``graphflow-ci`` budget finds the two rare planted bugs (issue 14), and what
the budget costs.

The ci profile is derandomized: in CI one fixed set of examples runs. To know how likely
*a* fixed set is to find a bug, this runs the same budget (30 examples, the default 50
stateful steps) under N different seeds (``derandomize=False`` + ``@seed(k)``) and counts the
seeds whose examples find it. Only the generate phase runs (finding, not shrinking, is
measured). Costs are CPU seconds (``time.process_time``) of the passing runs (the correct
store, the correct runtime), which is what a green CI build pays.

    .venv/bin/python benchmarks/ci_profile_hit_rate.py [N] [store|interrupts|cost ...]

For the figures before the targeted draws, run it against the source of the commit before
them: ``git archive 1ef8052 src | tar -x -C /tmp/old`` and ``PYTHONPATH=/tmp/old/src``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "properties"))

from graphflow_planted_rare import OverwriteKeepsItsPlace, answers_indexed_by_id

from pytest_graphflow import InMemoryCheckpointStore
from pytest_graphflow._properties.strategies._profiles import register_profiles
from pytest_graphflow.conformance import store_conformance_machine
from pytest_graphflow.invariants import check_interrupt_resume_equivalence
from pytest_graphflow.strategies import graph_inputs, graphs, resume_answers

register_profiles()
CI = settings.get_profile("graphflow-ci")


def budget(k: int | None, *, find: bool) -> settings:
    """The ci budget; with ``k``, randomised under seed ``k`` instead of derandomized."""
    phases = (Phase.generate,) if find else tuple(CI.phases)
    return settings(CI, derandomize=k is None, phases=phases)


def store_run(store: Any, k: int | None, *, find: bool = True) -> bool:
    """One ci-budget conformance run; True if it failed (found a bug)."""
    machine = store_conformance_machine(store)
    if k is not None:
        machine = seed(k)(machine)
    try:
        run_state_machine_as_test(machine, settings=budget(k, find=find))
    except AssertionError:
        return True
    return False


def equivalence_test(k: int | None, *, find: bool = True) -> Any:
    """The equivalence property of tests/properties/test_generated_runs.py, ci budget."""

    @budget(k, find=find)
    @given(spec=graphs(max_nodes=5), data=st.data())
    def prop(spec: Any, data: Any) -> None:
        inp = data.draw(graph_inputs(spec), label="input")
        answers = data.draw(resume_answers(spec), label="answers")
        broken = check_interrupt_resume_equivalence(spec, inp, answers)
        assert not broken, broken

    return prop if k is None else seed(k)(prop)


def interrupt_run(k: int | None, *, planted: bool = True) -> bool:
    prop = equivalence_test(k)
    try:
        if planted:
            with answers_indexed_by_id():
                prop()
        else:
            prop()
    except AssertionError:
        return True
    return False


def hit_rate(name: str, trial: Any, n: int) -> None:
    t0 = time.process_time()
    hits = sum(trial(k) for k in range(n))
    cpu = time.process_time() - t0
    print(f"{name}: found in {hits}/{n} seeds ({100 * hits / n:.0f}%), "
          f"{cpu / n:.2f} s CPU per seed", flush=True)


def cost(rounds: int = 3) -> None:
    """CPU seconds of the derandomized ci runs on correct code, rounds alternated."""
    store, interrupts = [], []
    for _ in range(rounds):
        t0 = time.process_time()
        assert not store_run(InMemoryCheckpointStore, None, find=False)
        store.append(time.process_time() - t0)
        t0 = time.process_time()
        equivalence_test(None, find=False)()
        interrupts.append(time.process_time() - t0)
    print(f"ci cost, correct code: conformance {min(store):.2f} s CPU (min of {rounds}), "
          f"equivalence property {min(interrupts):.2f} s CPU (min of {rounds})", flush=True)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    what = sys.argv[2:] or ["store", "interrupts", "cost"]
    if "store" in what:
        hit_rate("stale overwrite position (conformance)",
                 lambda k: store_run(OverwriteKeepsItsPlace, k), n)
        print("  derandomized ci run finds it:", store_run(OverwriteKeepsItsPlace, None))
    if "interrupts" in what:
        hit_rate("two pending interrupts with one id (equivalence)", interrupt_run, n)
        print("  derandomized ci run finds it:", interrupt_run(None))
    if "cost" in what:
        cost()


if __name__ == "__main__":
    main()
