"""Checks that cross a process boundary (issue 18), each planted bug with a fixed twin:

* a node whose output follows the order of a ``set`` of strings: stable inside one process
  (``check_determinism`` passes), different under another ``PYTHONHASHSEED`` (found by
  ``check_determinism(..., processes=2)``);
* a write-behind store that acknowledges saves it keeps in memory: recovery through the same
  store object (the in-process view) passes, a real process death loses them (found by
  ``check_crash_recovery(..., store_factory=...)``).
"""

from __future__ import annotations

from typing import Any

import pytest
from graphflow_xprocess_graphs import TAGS, checkout, declared_set, ordered, unordered

from pytest_graphflow import InvalidArgument
from pytest_graphflow._properties.runs._pool import pool
from pytest_graphflow.invariants import (
    check_crash_recovery,
    check_crash_recovery_across_processes,
    check_determinism,
    check_determinism_across_processes,
)

MODULE = "graphflow_xprocess_graphs"


def test_string_set_order_is_stable_within_one_process() -> None:
    assert check_determinism(unordered(), {}, 0, runs=3) == []


def test_string_set_order_is_found_across_processes() -> None:
    (violation,) = check_determinism(f"{MODULE}:unordered", {}, 0, processes=2)
    assert violation.rule == "determinism-processes"
    assert violation.index == 3
    lines = violation.message.splitlines()
    assert lines[0].startswith("seed 0 gave different event streams in two fresh interpreters "
                               "(PYTHONHASHSEED=1 and 2)")
    assert lines[1].startswith("  PYTHONHASHSEED=1: #3 node_end collect patch={'tags': [")
    assert lines[2].startswith("  PYTHONHASHSEED=2: #3 node_end collect patch={'tags': [")
    assert lines[3].startswith("  patch: {'tags': [")


def test_the_fixed_twin_passes_across_processes() -> None:
    assert check_determinism_across_processes(f"{MODULE}:ordered", {}, 0, processes=2) == []
    assert check_determinism_across_processes(ordered, {}, 0, processes=2) == []


def test_a_key_declared_as_a_set_streams_the_same_bytes_in_every_process() -> None:
    """Same seed, same bytes: a ``set[str]`` key is listed in sorted order, not in the string
    hashing order of the process (which ``PYTHONHASHSEED`` changes)."""
    assert check_determinism_across_processes(f"{MODULE}:declared_set", {}, 0,
                                              processes=2) == []
    from pytest_graphflow import GraphRuntime, VirtualClock

    trace = GraphRuntime(clock=VirtualClock(), seed=0).trace(declared_set(), {})
    assert trace.result.data == {"tags": sorted([*TAGS, "iota"]),
                                 "groups": {"greek": sorted(TAGS)}}
    collect = next(e for e in trace.events if e.type == "node_end" and e.node == "collect")
    assert collect.patch == {"tags": sorted(TAGS)}
    assert trace.state.tags == {*TAGS, "iota"}


def test_workers_are_reused_between_checks() -> None:
    before = [w.proc.pid for w in pool([1, 2])]
    check_determinism_across_processes(ordered, {}, 0, processes=2)
    assert [w.proc.pid for w in pool([1, 2])] == before


# Kill at the 4th save ("before": it never reaches the store). The write-behind store has
# acknowledged the first three (the last records the external charge as done) and holds them
# in memory only.
AT_FOURTH_SAVE: dict[str, Any] = {"points": [3], "phases": ("before",)}


def test_write_behind_store_passes_when_recovery_reuses_the_store_object() -> None:
    assert check_crash_recovery_across_processes(
        checkout, {"amount": 5}, store_factory=f"{MODULE}:write_behind", in_process=True,
        **AT_FOURTH_SAVE) == []


def test_write_behind_store_is_found_by_killing_the_process() -> None:
    found = check_crash_recovery(checkout, {"amount": 5}, store_factory=f"{MODULE}:write_behind",
                                 **AT_FOURTH_SAVE)
    assert [v.rule for v in found] == ["durability", "effects"]
    durability, rerun = (v.message for v in found)
    assert durability.startswith("after a process killed at save() #4 (before): checkpoint "
                                 "cp-317784e7024d-3 was acknowledged (its save() returned) "
                                 "before the process died, but the store reopened from its "
                                 "medium does not have it")
    assert "1 effect(s) ran again in the recovering process although checkpoint " \
        "cp-317784e7024d-3, acknowledged before the death, recorded them as done: 'charge'" \
        in rerun


@pytest.mark.parametrize("factory", ["write_through", "sqlite"])
def test_durable_stores_pass_the_process_killing_check(factory: str) -> None:
    assert check_crash_recovery(checkout, {"amount": 5}, store_factory=f"{MODULE}:{factory}",
                                **AT_FOURTH_SAVE) == []


BAD = [
    ("one-process", lambda: check_determinism_across_processes(ordered, processes=1),
     "processes=1: compare at least 2 interpreters"),
    ("same-hashseeds", lambda: check_determinism_across_processes(
        ordered, processes=2, hashseeds=[3, 3]), "give 2 distinct seeds"),
    ("lambda-graph", lambda: check_determinism_across_processes(lambda: ordered(), processes=2),
     "cannot be named in another process"),
    ("graph-no-module-holds", lambda: check_determinism_across_processes(ordered(),
                                                                         processes=2),
     "graph 'tags' is not held by an imported module"),
    ("answers-function", lambda: check_determinism_across_processes(
        ordered, processes=2, answers=lambda i: "yes"), "another process needs the answers"),
    ("lambda-store", lambda: check_crash_recovery_across_processes(
        checkout, store_factory=lambda d: None), "store_factory=<function"),
]


@pytest.mark.parametrize(("call", "text"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments_are_refused_before_any_process_runs(call: Any, text: str) -> None:
    with pytest.raises(InvalidArgument, match=text.replace("(", r"\(").replace(")", r"\)")):
        call()
