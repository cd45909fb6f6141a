"""Issue 14: "A reducer returning a set is silently stored as a list in hash order; reject it
or document it." It is rejected, naming the node, the key and the fix."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, Reducer, UpdateRejected, VirtualClock


def union(current: Any, update: Any) -> Any:
    return set(current or []) | set(update)


def sorted_union(current: Any, update: Any) -> Any:
    return sorted(set(current or []) | set(update))


def frozen_union(current: Any, update: Any) -> Any:
    return frozenset(current or []) | frozenset(update)


class SetTags(BaseModel):
    tags: Annotated[list[str], Reducer(union)] = []


class FrozenTags(BaseModel):
    tags: Annotated[list[str], Reducer(frozen_union)] = []


class SortedTags(BaseModel):
    tags: Annotated[list[str], Reducer(sorted_union)] = []


@pytest.mark.parametrize("model", [SetTags, FrozenTags], ids=["set", "frozenset"])
def test_a_reducer_returning_a_set_is_rejected(model: Any) -> None:
    g = Graph("tags", model)
    g.node("tag", lambda s: {"tags": ["b", "a"]})
    g.edge(START, "tag")
    g.edge("tag", END)

    result = GraphRuntime(clock=VirtualClock(), seed=0).invoke(g.compile())

    assert result.status == "failed"
    assert isinstance(result.error, UpdateRejected)
    assert "'tags'" in str(result.error)
    assert "returned a set" in str(result.error)
    assert "sorted(" in str(result.error)


def test_a_reducer_returning_a_sorted_list_is_kept() -> None:
    g = Graph("tags", SortedTags)
    g.node("tag", lambda s: {"tags": ["b", "a", "b"]})
    g.edge(START, "tag")
    g.edge("tag", END)

    assert GraphRuntime(clock=VirtualClock(), seed=0).invoke(g.compile()).data == {
        "tags": ["a", "b"]}
