"""A generated node's body, as its spec says (issue 29: the body reads its spec once).

``_genspec._node_function``'s body reads what it needs of its ``SpecNode`` once and adds
plain ints inline; it must give what the body written as the spec reads (kept below as the
reference) gives: the same patch or ``Expand``/``Command``, the same calls log, the same
interrupts asked in the same order, the same planned failure, for every node of drawn
graphs, from states and answers of every kind a state key or an answer may hold.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from pytest_graphflow import END, Command, Expand
from pytest_graphflow._properties.strategies import _genspec
from pytest_graphflow._properties.strategies._genspec import (
    GraphSpec,
    PlannedFailure,
    SpecNode,
    _as_int,
    answer_number,
)
from pytest_graphflow.strategies import graphs


class _Ctx:
    """What a generated body reads of its ``NodeContext``."""

    def __init__(self, attempt: int, item: Any) -> None:
        self.task_id = "task-1"
        self.step = 3
        self.attempt = attempt
        self.item = item
        self.emitted: list[Any] = []

    def emit(self, value: Any) -> None:
        self.emitted.append(value)


def _reference(n: SpecNode, index: int, calls: list[Any] | None, state: BaseModel,
               ctx: Any, interrupt: Any) -> Any:
    """The body as it was written before issue 29's gen3 pass."""
    record = (n.name, ctx.task_id, ctx.step, ctx.attempt)
    try:
        answers = [interrupt({"node": n.name, "id": i}, id=i) for i in n.interrupts]
    except BaseException:
        if calls is not None:
            calls.append((*record, "interrupted"))
        raise
    if n.emits:
        ctx.emit({"node": n.name, "attempt": ctx.attempt})
    if n.fail is not None and n.fail.fails(ctx.attempt):
        if calls is not None:
            calls.append((*record, "failed"))
        raise PlannedFailure(f"node {n.name!r} fails on attempt {ctx.attempt} (planned)")
    value = index + 1 + sum(_as_int(getattr(state, k)) for k in n.reads)
    value += sum(answer_number(a) for a in answers)
    patch: dict[str, Any] = {}
    if n.writes:
        patch[f"v_{n.name}"] = value % 1000
    if n.log:
        patch["log"] = [n.name]
    if n.worker and "log" in type(state).model_fields:
        patch["log"] = [f"{n.name}:{ctx.item}"]
    if n.route == "loop":
        patch[f"c_{n.name}"] = getattr(state, f"c_{n.name}") + 1
    if calls is not None:
        calls.append((*record, "ok"))
    if n.route == "expand":
        assert n.expand_to is not None
        items = [f"{n.name}.{j}" for j in range(n.items)]
        return Expand(n.expand_to, items, update=patch or None)
    if n.route == "goto":
        assert n.route_key is not None
        targets = [*n.children, END]
        return Command(update=patch or None,
                       goto=targets[_as_int(getattr(state, n.route_key)) % len(targets)])
    return patch or None


_ANSWERS = st.one_of(st.integers(-5000, 5000), st.booleans(), st.none(), st.text(max_size=4),
                     st.lists(st.integers(0, 9), max_size=3))


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        out = fn(*args)
    except PlannedFailure as exc:
        return ("failed", str(exc))
    except LookupError as exc:  # the stub's "pause": no answer for this interrupt
        return ("interrupted", str(exc))
    if isinstance(out, Expand | Command):
        return (type(out).__name__, repr(out))
    return out


def _interrupts(answers: dict[str, Any], asked: list[Any]) -> Any:
    def interrupt(payload: Any, *, id: str) -> Any:
        asked.append((payload, id))
        if id not in answers:
            raise LookupError(id)
        return answers[id]

    return interrupt


@settings(max_examples=150, deadline=None)
@given(spec=graphs(max_nodes=6), data=st.data())
def test_a_node_body_gives_what_its_spec_says(spec: GraphSpec, data: Any,
                                              monkeypatch_module: Any) -> None:
    model = spec.state_model()
    values = {k: data.draw(st.integers(-3000, 3000) if k != "log"
                           else st.lists(st.text(max_size=2), max_size=2), label=k)
              for k in model.model_fields}
    state = model(**values)
    for index, n in enumerate(spec.nodes):
        ids = list(n.interrupts)
        answered = data.draw(st.sets(st.sampled_from(ids)) if ids else st.just(set()),
                             label="answered")
        answers = {i: data.draw(_ANSWERS, label=i) for i in sorted(answered)}
        attempt = data.draw(st.integers(1, 3), label="attempt")
        got_calls: list[Any] = []
        want_calls: list[Any] = []
        got_asked: list[Any] = []
        want_asked: list[Any] = []
        ctx_got, ctx_want = _Ctx(attempt, "it"), _Ctx(attempt, "it")
        monkeypatch_module.setattr(_genspec, "interrupt", _interrupts(answers, got_asked))
        fn = _genspec._node_function(n, index, got_calls)
        body = fn.__closure__ and next(  # the sync wrapper's body (async: the same body)
            c.cell_contents for c in fn.__closure__ if callable(c.cell_contents)
            and getattr(c.cell_contents, "__name__", "") == "body")
        got = _outcome(body, state, ctx_got)
        want = _outcome(_reference, n, index, want_calls, state, ctx_want,
                        _interrupts(answers, want_asked))
        assert got == want
        assert got_calls == want_calls
        assert got_asked == want_asked
        assert ctx_got.emitted == ctx_want.emitted


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as mp:
        yield mp
