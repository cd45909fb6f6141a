"""Sets in a state's JSON form have one order, whatever the process (``_graph._setorder``):
the lists that stand for sets are sorted, naturally when their items compare, else by their
JSON text; everything else is left as it is."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from pytest_graphflow._graph._setorder import canonical, has_set

CASES: list[tuple[str, Any, Any, Any]] = [
    ("set-of-str", set[str], ["b", "c", "a"], ["a", "b", "c"]),
    ("frozenset-of-int", frozenset[int], [3, 1, 2], [1, 2, 3]),
    ("bare-set", set, [2, 1], [1, 2]),
    ("optional-set", set[str] | None, ["y", "x"], ["x", "y"]),
    ("optional-set-none", set[str] | None, None, None),
    ("annotated-set", Annotated[set[int], "meta"], [9, 8], [8, 9]),
    ("list-of-sets", list[set[int]], [[2, 1], [4, 3]], [[1, 2], [3, 4]]),
    ("dict-of-frozensets", dict[str, frozenset[str]], {"k": ["b", "a"]}, {"k": ["a", "b"]}),
    ("tuple-with-a-set", tuple[set[int], int], [[2, 1], 5], [[1, 2], 5]),
    ("items-that-do-not-compare", set[int | str], [2, "a", 1], ["a", 1, 2]),
    ("a-list-is-kept-in-its-order", list[str], ["b", "a"], ["b", "a"]),
    ("two-set-unions-left-alone", set[int] | set[str], [2, 1], [2, 1]),
]


@pytest.mark.parametrize(("tp", "value", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_lists_that_stand_for_sets_are_sorted(tp: Any, value: Any, want: Any) -> None:
    assert canonical(tp, value) == want


def test_which_annotations_can_hold_a_set() -> None:
    assert [has_set(tp) for tp in (set[str], dict[str, frozenset[int]], list[int] | None,
                                   int, list[str], Annotated[set[int], 1])] == [
        True, True, False, False, False, True]
