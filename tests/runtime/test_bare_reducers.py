"""Issue 23, item 1: a bare two-argument callable in a field's ``Annotated`` metadata —
``Annotated[list[str], operator.add]``, how every LangGraph state declares a reducer — is the
field's reducer, exactly as ``Reducer(operator.add)`` is. Before, it was silently ignored: the
field was last-writer-wins and a three-node chain ended with ``['c']``.

Metadata that is callable but cannot merge two values is refused when the graph is built,
naming ``Reducer(...)``; pydantic's own metadata (validators, ``Field``, constraints) is never
taken for a reducer.
"""

from __future__ import annotations

import functools
import operator
from typing import Annotated, Any

import annotated_types
import pytest
from pydantic import AfterValidator, BaseModel, Field

from pytest_graphflow import END, START, Graph, InvalidArgument, Reducer

from .conftest import SEEDS, run, runtime

pytestmark = pytest.mark.anyio


def merge_dicts(current: dict[str, int], update: dict[str, int]) -> dict[str, int]:
    return {**current, **update}


class LangGraphStyle(BaseModel):
    """A state model as a LangGraph user writes it."""

    items: Annotated[list[str], operator.add] = []
    counts: Annotated[dict[str, int], merge_dicts] = {}
    best: Annotated[int, max] = 0  # a builtin without a signature
    joined: Annotated[str, lambda current, update: current + update] = ""
    last: list[str] = []


def writer(name: str, best: int, *, last: bool = True) -> Any:
    def node(state: LangGraphStyle) -> dict[str, Any]:
        out = {"items": [name], "counts": {name: 1}, "best": best, "joined": name}
        return {**out, "last": [name]} if last else out

    return node


async def test_a_three_node_chain_accumulates_with_a_bare_operator_add() -> None:
    g = Graph("chain", LangGraphStyle)
    for name, best in (("a", 3), ("b", 9), ("c", 1)):
        g.node(name, writer(name, best))
    g.edge(START, "a").edge("a", "b").edge("b", "c").edge("c", END)
    _, result = await run(runtime(), g.compile())
    assert result.status == "completed"
    assert result.data == {"items": ["a", "b", "c"], "counts": {"a": 1, "b": 1, "c": 1},
                           "best": 9, "joined": "abc", "last": ["c"]}


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_parallel_batch_merges_through_bare_reducers_in_declared_order(seed: int) -> None:
    g = Graph("fan", LangGraphStyle)
    for name, best in (("a", 3), ("b", 9), ("c", 1)):
        g.node(name, writer(name, best, last=False))
    g.edge(START, ["a", "b", "c"]).edge(["a", "b", "c"], END)
    # Without the bare reducers, three writes of one key in one batch are ConflictingWrites.
    _, result = await run(runtime(seed), g.compile())
    assert result.status == "completed"
    assert result.data["items"] == ["a", "b", "c"]
    assert result.data["counts"] == {"a": 1, "b": 1, "c": 1}
    assert result.data["best"] == 9
    assert result.data["joined"] == "abc"


def test_a_bare_reducer_is_the_same_reducer_as_its_reducer_form() -> None:
    class Bare(BaseModel):
        items: Annotated[list[str], operator.add] = []

    class Wrapped(BaseModel):
        items: Annotated[list[str], Reducer(operator.add)] = []

    def build(model: type[BaseModel]) -> Any:
        g = Graph("same", model)
        g.node("a", lambda s: {"items": ["a"]}).edge(START, "a").edge("a", END)
        return g.compile()

    bare, wrapped = build(Bare), build(Wrapped)
    assert bare.reducers == wrapped.reducers == {"items": Reducer(operator.add)}
    assert bare.revision == wrapped.revision


def _upper(value: list[str]) -> list[str]:
    return [v.upper() for v in value]


class PydanticOwn(BaseModel):
    """pydantic's own metadata: none of it is a reducer."""

    checked: Annotated[list[str], AfterValidator(_upper), Field(max_length=5)] = []
    bounded: Annotated[int, annotated_types.Gt(-1), annotated_types.Not(lambda v: v == 7)] = 0
    both: Annotated[list[str], AfterValidator(_upper), operator.add] = []


async def test_pydantic_metadata_is_not_mistaken_for_a_reducer() -> None:
    g = Graph("own", PydanticOwn)
    g.node("a", lambda s: {"checked": ["a"], "bounded": 1, "both": ["a"]})
    g.node("b", lambda s: {"checked": ["b"], "bounded": 2, "both": ["b"]})
    g.edge(START, "a").edge("a", "b").edge("b", END)
    compiled = g.compile()
    assert set(compiled.reducers) == {"both"}
    _, result = await run(runtime(), compiled)
    assert result.status == "completed"
    # The validators still run; only "both" accumulates.
    assert result.data == {"checked": ["B"], "bounded": 2, "both": ["A", "B"]}


def one_arg(value: Any) -> Any:
    return value


def three_args(a: Any, b: Any, c: Any) -> Any:
    return a


def keyword_only(a: Any, *, b: Any) -> Any:
    return a


class Callable1:
    def __call__(self, value: Any) -> Any:
        return value


BAD = [
    ("one-argument-function", one_arg),
    ("three-argument-function", three_args),
    ("keyword-only-second-argument", keyword_only),
    ("no-argument-lambda", lambda: None),
    ("one-argument-callable-object", Callable1()),
    ("partial-taking-one", functools.partial(three_args, 1, 2)),
]


@pytest.mark.parametrize("fn", [fn for _, fn in BAD], ids=[name for name, _ in BAD])
def test_callable_metadata_that_cannot_be_a_reducer_is_refused(fn: Any) -> None:
    class Bad(BaseModel):
        items: Annotated[list[str], fn] = []

    with pytest.raises(InvalidArgument) as info:
        Graph("bad", Bad)
    message = str(info.value)
    assert "'items'" in message
    assert "Bad" in message
    assert "Reducer(" in message


def test_two_reducers_on_one_field_are_refused() -> None:
    class Twice(BaseModel):
        items: Annotated[list[str], Reducer(operator.add), operator.add] = []

    with pytest.raises(InvalidArgument, match=r"'items'.*two reducers"):
        Graph("twice", Twice)


class Constrained(BaseModel):
    """A plain model but for its constraints: they used to be skipped on a node's write."""

    tags: Annotated[list[str], Field(max_length=2), operator.add] = []
    n: int = Field(default=1, gt=0)


CONSTRAINED = [
    ("max-length-after-merge", {"tags": ["a", "b", "c"]}, "tags"),
    ("field-gt", {"n": -5}, "n"),
]


@pytest.mark.parametrize(("patch", "key"), [(p, k) for _, p, k in CONSTRAINED],
                         ids=[name for name, _, _ in CONSTRAINED])
async def test_pydantic_constraints_in_metadata_still_reject_a_write(
        patch: dict[str, Any], key: str) -> None:
    g = Graph("constrained", Constrained)
    g.node("a", lambda s: patch).edge(START, "a").edge("a", END)
    _, result = await run(runtime(), g.compile())
    assert result.status == "failed"
    assert type(result.error).__name__ == "UpdateRejected"
    assert f"key {key!r}" in str(result.error)
    assert "node 'a'" in str(result.error)
