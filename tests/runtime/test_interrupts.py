"""Seed 001 "Interrupts": ``interrupt(payload, *, id)``, ``Interrupt``, ``Resume``, the
``on_interrupt`` hook and ``PAUSE`` (SPEC §4)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    PAUSE,
    START,
    Graph,
    GraphExecutionError,
    Interrupt,
    NodeContext,
    NodeFailed,
    Resume,
    ResumeError,
    interrupt,
)

from .conftest import SEEDS, S, Script, fan_graph, of, resume, run, runtime

pytestmark = pytest.mark.anyio


def one_node_graph(fn: Any, graph_id: str = "one-node") -> Any:
    g = Graph(graph_id, S)
    g.node("ask", fn)
    g.edge(START, "ask").edge("ask", END)
    return g.compile()


async def test_interrupt_pauses_the_node_and_on_resume_returns_the_answer() -> None:
    """Seed 001 interrupt: "Pause the current node until the interrupt is answered." "On
    resume the node runs again from the top, and this call returns the answer." """
    trace: list[str] = []

    def ask(state: S) -> dict[str, Any]:
        trace.append("top")
        answer = interrupt({"question": "ship it?"}, id="ship")
        trace.append(f"answer={answer}")
        return {"answer": answer}

    rt = runtime()
    events, paused = await run(rt, one_node_graph(ask))
    assert paused.status == "interrupted"
    assert trace == ["top"]
    assert of(events, "node_end") == []
    _, result = await resume(rt, paused.run_id, Resume("yes"))
    assert trace == ["top", "top", "answer=yes"]
    assert result.data["answer"] == "yes"


async def test_interrupt_records_key_id_node_task_and_payload() -> None:
    """Seed 001 Interrupt: "key: Key for Resume(answers={key: ...}): "<task_id>:<id>"", with
    ``id``, ``node``, ``task_id`` and ``payload``; GraphResult.interrupts: "Pending interrupts
    by Interrupt.key"."""

    def ask(state: S) -> dict[str, Any]:
        return {"answer": interrupt(("a", 1), id="pick.one-2_X")}

    rt = runtime()
    events, paused = await run(rt, one_node_graph(ask))
    task_id = of(events, "node_start", "ask")[0].task_id
    (event,) = of(events, "interrupt")
    (pending,) = event.interrupts
    assert isinstance(pending, Interrupt)
    assert pending.key == f"{task_id}:pick.one-2_X"
    assert (pending.id, pending.node, pending.task_id) == ("pick.one-2_X", "ask", task_id)
    assert pending.payload == ["a", 1]  # JSON form
    assert event.task_id == task_id
    assert event.node == "ask"
    assert paused.interrupts == {pending.key: pending}
    # the key answers it
    _, result = await resume(rt, paused.run_id, Resume(answers={pending.key: 5}))
    assert result.data["answer"] == 5


async def test_on_interrupt_hook_may_answer_at_once() -> None:
    """Seed 001 interrupt: "An on_interrupt hook may answer at once; otherwise the run
    pauses." — as a runtime default and as a per-run option."""
    seen: list[Interrupt] = []

    def hook(pending: Interrupt) -> Any:
        seen.append(pending)
        return f"auto:{pending.payload}"

    def ask(state: S) -> dict[str, Any]:
        return {"answer": interrupt("q1", id="one")}

    events, result = await run(runtime(on_interrupt=hook), one_node_graph(ask))
    assert result.status == "completed"
    assert result.data["answer"] == "auto:q1"
    assert of(events, "interrupt") == []
    assert [p.key for p in seen] == [f"{of(events, 'node_start')[0].task_id}:one"]

    events, result = await run(runtime(), one_node_graph(ask), on_interrupt=hook)
    assert result.data["answer"] == "auto:q1"

    events, result = await run(runtime(), one_node_graph(ask))
    assert result.status == "interrupted"


async def test_hook_returning_pause_lets_the_run_pause_and_none_is_an_answer() -> None:
    """SPEC §4: "An on_interrupt hook returns the answer, or the exported sentinel PAUSE to let
    the run pause (None is a valid answer)." """

    def ask(state: S) -> dict[str, Any]:
        first = interrupt("first", id="first")
        second = interrupt("second", id="second")
        return {"answers": [first, second]}

    def hook(pending: Interrupt) -> Any:
        return None if pending.id == "first" else PAUSE

    rt = runtime(on_interrupt=hook)
    _, paused = await run(rt, one_node_graph(ask))
    assert paused.status == "interrupted"
    assert [i.id for i in paused.interrupts.values()] == ["second"]
    _, result = await resume(rt, paused.run_id, Resume(None), on_interrupt=lambda p: PAUSE)
    assert result.status == "completed"
    assert result.data["answers"] == [None, None]


async def test_hook_returning_an_awaitable_raises_type_error_in_the_node() -> None:
    """Seed 001 interrupt: "Raises TypeError If an on_interrupt hook returns an awaitable." """
    caught: list[BaseException] = []

    async def async_hook(pending: Interrupt) -> str:
        return "never"

    def careful(state: S) -> dict[str, Any]:
        try:
            interrupt("q", id="q")
        except TypeError as exc:
            caught.append(exc)
        return {"n": 1}

    _, result = await run(runtime(on_interrupt=async_hook), one_node_graph(careful))
    assert result.status == "completed"
    assert len(caught) == 1
    assert type(caught[0]) is TypeError

    def careless(state: S) -> None:
        interrupt("q", id="q")

    _, failed = await run(runtime(on_interrupt=async_hook), one_node_graph(careless, "careless"))
    assert failed.status == "failed"
    assert isinstance(failed.error, NodeFailed)
    assert isinstance(failed.error.__cause__, TypeError)


@pytest.mark.parametrize(
    "bad_id",
    ["", "has space", "a/b", "a:b", "ünï", "tab\t", "new\nline"],
    ids=["empty", "space", "slash", "colon", "non-ascii", "tab", "newline"],
)
async def test_an_invalid_interrupt_id_raises_value_error(bad_id: str) -> None:
    """Seed 001 interrupt: "id: Unique within one run of the node; letters, digits, _, . and
    -." "Raises ValueError If id is empty or has other characters." """
    caught: list[BaseException] = []

    def ask(state: S) -> None:
        try:
            interrupt("q", id=bad_id)
        except ValueError as exc:
            caught.append(exc)

    _, result = await run(runtime(), one_node_graph(ask))
    assert result.status == "completed"
    assert len(caught) == 1


async def test_a_reused_interrupt_id_raises_graph_execution_error() -> None:
    """Seed 001 interrupt: "Raises GraphExecutionError If the node already used id in this
    run." — also when the first use was answered on a resume."""
    caught: list[BaseException] = []

    def ask(state: S) -> dict[str, Any]:
        answer = interrupt("q", id="same")
        try:
            interrupt("again", id="same")
        except GraphExecutionError as exc:
            caught.append(exc)
        return {"answer": answer}

    rt = runtime()
    _, paused = await run(rt, one_node_graph(ask))
    _, result = await resume(rt, paused.run_id, Resume("a"))
    assert result.status == "completed"
    assert result.data["answer"] == "a"
    assert len(caught) == 1
    assert isinstance(caught[0], GraphExecutionError)

    def careless(state: S) -> None:
        interrupt("q", id="same")
        interrupt("q", id="same")

    _, paused = await run(rt, one_node_graph(careless, "careless"))
    _, failed = await resume(rt, paused.run_id, Resume("a"))
    assert failed.status == "failed"
    assert isinstance(failed.error.__cause__, GraphExecutionError)


async def test_the_same_id_in_different_nodes_is_fine() -> None:
    """Seed 001: the id is unique "within one run of the node" — other nodes may use it."""
    script = Script(interrupts={"a", "b"})
    _, paused = await run(runtime(), fan_graph(script))
    assert sorted(i.node for i in paused.interrupts.values()) == ["a", "b"]
    assert {i.id for i in paused.interrupts.values()} == {"q"}
    assert len(paused.interrupts) == 2


def test_interrupt_outside_a_running_node_raises_runtime_error() -> None:
    """Seed 001 interrupt: "Raises RuntimeError If called outside a running node." """
    with pytest.raises(RuntimeError):
        interrupt("q", id="q")


async def test_interrupt_outside_a_node_also_from_an_edge_function() -> None:
    """Seed 001: outside a running node means edge functions too (they are not nodes)."""
    caught: list[BaseException] = []

    def route(state: S) -> str:
        try:
            interrupt("q", id="edge")
        except RuntimeError as exc:
            caught.append(exc)
        return END

    g = Graph("edge-interrupt", S)
    g.node("a", lambda s: None)
    g.edge(START, "a")
    g.branch("a", route, [END])
    escaped: str | None = None
    try:
        _, result = await run(runtime(), g.compile())
    except BaseException as exc:
        escaped = f"{type(exc).__module__}.{type(exc).__qualname__}"
    assert escaped is None, f"interrupt() in an edge function leaked {escaped}"
    assert result.status == "completed"
    assert len(caught) == 1
    assert isinstance(caught[0], RuntimeError)


async def test_the_interrupt_signal_is_not_an_exception() -> None:
    """SPEC §4: "The signal that interrupt() uses to pause a node is not an Exception, so a
    node's except Exception: cannot swallow it." """

    def swallow(state: S) -> dict[str, Any]:
        try:
            answer = interrupt("q", id="q")
        except Exception:
            return {"answer": "swallowed"}
        return {"answer": answer}

    rt = runtime()
    _, paused = await run(rt, one_node_graph(swallow))
    assert paused.status == "interrupted"
    _, result = await resume(rt, paused.run_id, Resume("real"))
    assert result.data["answer"] == "real"


@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_several_interrupts_pending_at_once_one_per_task(seed: int) -> None:
    """Seed 001 Resume: "Answers for every pending interrupt of a paused thread."; "answers:
    Answers by Interrupt.key, one for each pending interrupt."; "value: Answer for the only
    pending interrupt." """
    script = Script(interrupts={"a", "b", "c"}, sleeps={"b": 1})
    rt = runtime(seed=seed)
    events, paused = await run(rt, fan_graph(script))
    assert len(paused.interrupts) == 3
    by_node = {i.node: key for key, i in paused.interrupts.items()}
    assert [e.node for e in of(events, "interrupt")] == ["a", "b", "c"]
    with pytest.raises(ResumeError):
        await rt.aresume(paused.run_id, Resume("only one?"))
    with pytest.raises(ResumeError):
        await rt.aresume(paused.run_id, Resume(answers={by_node["a"]: 1, by_node["b"]: 2}))
    _, result = await resume(rt, paused.run_id, Resume(answers={
        by_node["a"]: "A", by_node["b"]: "B", by_node["c"]: "C"}))
    assert result.status == "completed"
    assert script.got == {"a": "A", "b": "B", "c": "C"}
    assert result.data["answers"] == ["A", "B", "C"]  # declared order


async def test_sequential_interrupts_in_one_node_return_earlier_answers_on_rerun() -> None:
    """Seed 001 interrupt: "On resume the node runs again from the top, and this call returns
    the answer." — with three ``interrupt()`` calls, each leg re-asks none of the answered
    ones (answers of the ``on_interrupt`` hook included)."""
    returned: list[tuple[str, Any]] = []

    def ask(state: S) -> dict[str, Any]:
        got = []
        for qid in ("one", "two", "three"):
            answer = interrupt(f"q-{qid}", id=qid)
            returned.append((qid, answer))
            got.append(answer)
        return {"answers": got}

    hook_calls: list[str] = []

    def hook(pending: Interrupt) -> Any:
        hook_calls.append(pending.id)
        return "hooked" if pending.id == "two" else PAUSE

    rt = runtime(on_interrupt=hook)
    _, paused = await run(rt, one_node_graph(ask))
    assert [i.id for i in paused.interrupts.values()] == ["one"]
    _, paused = await resume(rt, paused.run_id, Resume(1))
    assert [i.id for i in paused.interrupts.values()] == ["three"]
    _, result = await resume(rt, paused.run_id, Resume(3))
    assert result.data["answers"] == [1, "hooked", 3]
    assert returned == [("one", 1), ("two", "hooked"), ("one", 1), ("two", "hooked"),
                        ("three", 3)]
    assert hook_calls == ["one", "two", "three"]  # an answered interrupt is not asked again


class Choice(BaseModel):
    label: str
    weight: float


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (("a", 1), ["a", 1]),
        (Choice(label="x", weight=0.5), {"label": "x", "weight": 0.5}),
        ({"nested": ("t", ("u",))}, {"nested": ["t", ["u"]]}),
        (None, None),
    ],
    ids=["tuple", "model", "nested-tuple", "none"],
)
async def test_answers_are_normalised_to_json(answer: Any, expected: Any) -> None:
    """Seed 001 interrupt: "Returns The answer, normalized to JSON values." — from a Resume and
    from an on_interrupt hook."""
    got: list[Any] = []

    def ask(state: S) -> None:
        got.append(interrupt("q", id="q"))

    rt = runtime()
    _, paused = await run(rt, one_node_graph(ask))
    await resume(rt, paused.run_id, Resume(answer))
    _, hooked = await run(runtime(on_interrupt=lambda p: answer), one_node_graph(ask))
    assert hooked.status == "completed"
    assert got == [expected, expected]
    assert all(type(g) is type(expected) for g in got)


def test_resume_holds_a_value_or_answers() -> None:
    """Seed 001 Resume attributes: "value: The single answer; None when answers is given."
    "answers: The answers by key; None when value is given." """
    r = Resume("x")
    assert r.value == "x"
    assert r.answers is None
    r = Resume(answers={"task-1:q": 1})
    assert r.value is None
    assert r.answers == {"task-1:q": 1}
    r = Resume(None)
    assert r.value is None
    assert r.answers is None


@pytest.mark.parametrize(
    "make",
    [lambda: Resume(answers=[("task-1:q", 1)]), lambda: Resume(answers="task-1:q"),
     lambda: Resume(answers=1)],
    ids=["list-of-pairs", "str", "int"],
)
def test_resume_answers_must_be_a_mapping(make: Any) -> None:
    """Seed 001 Resume: "Raises TypeError If answers is not a mapping." """
    with pytest.raises(TypeError):
        make()


@pytest.mark.parametrize(
    "make",
    [lambda: Resume(), lambda: Resume("x", answers={"k": 1}), lambda: Resume(answers={}),
     lambda: Resume(None, answers={"k": 1})],
    ids=["neither", "both", "empty-answers", "none-and-answers"],
)
def test_resume_needs_exactly_one_of_value_and_answers(make: Any) -> None:
    """Seed 001 Resume: "Raises ResumeError If both or neither of value and answers are given,
    or answers is empty." """
    with pytest.raises(ResumeError):
        make()


async def test_ctx_interrupt_is_the_same_as_the_function() -> None:
    """``ctx.interrupt`` pauses exactly like ``interrupt`` (same key, same answer)."""

    def ask(state: S, ctx: NodeContext) -> dict[str, Any]:
        return {"answer": ctx.interrupt("q", id="q")}

    rt = runtime()
    events, paused = await run(rt, one_node_graph(ask))
    (key,) = paused.interrupts
    assert key == f"{of(events, 'node_start')[0].task_id}:q"
    _, result = await resume(rt, paused.run_id, Resume(answers={key: [1, 2]}))
    assert result.data["answer"] == [1, 2]
