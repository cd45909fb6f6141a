"""Answering some of the pending interrupts and leaving the rest pending
(``Resume(answers={...}, partial=True)``)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_graphflow import END, START, Graph, Resume, ResumeError, interrupt

from .conftest import S, resume, run, runtime

pytestmark = pytest.mark.anyio


def three_questions(calls: list[str]) -> Any:
    def ask(name: str) -> Any:
        def fn(state: S) -> dict[str, Any]:
            calls.append(name)
            return {"answers": [f"{name}={interrupt(f'{name}?', id='q')}"]}

        return fn

    g = Graph("three-questions", S)
    for name in ("x", "y", "z"):
        g.node(name, ask(name), effect="human")
    g.node("done", lambda s: {"log": ["done"]})
    g.edge(START, ["x", "y", "z"]).edge(["x", "y", "z"], "done").edge("done", END)
    return g.compile()


async def test_answering_some_interrupts_leaves_the_others_pending() -> None:
    calls: list[str] = []
    rt = runtime()
    _, paused = await run(rt, three_questions(calls))
    assert paused.status == "interrupted"
    by_node = {i.node: key for key, i in paused.interrupts.items()}
    assert sorted(by_node) == ["x", "y", "z"]

    partial = Resume(answers={by_node["x"]: 1, by_node["z"]: 3}, partial=True)
    events, again = await resume(rt, paused.run_id, partial)
    assert again.status == "interrupted"
    assert list(again.interrupts) == [by_node["y"]]  # same key: the task id is stable
    assert [e.node for e in events if e.type == "node_end"] == ["x", "z"]

    _, done = await resume(rt, again.run_id, Resume(7))
    assert done.status == "completed"
    assert sorted(done.data["answers"]) == ["x=1", "y=7", "z=3"]
    # x and z (effect "human") completed in the second leg and are replayed, not asked again
    assert sorted(calls) == ["x", "x", "y", "y", "y", "z", "z"]


async def test_partial_answers_still_refuse_keys_that_are_not_pending() -> None:
    rt = runtime()
    _, paused = await run(rt, three_questions([]))
    before = await rt.store.list(paused.run_id)
    with pytest.raises(ResumeError, match="not pending: \\['task-nope:q'\\]"):
        await rt.aresume(paused.run_id, Resume(answers={"task-nope:q": 1}, partial=True))
    assert await rt.store.list(paused.run_id) == before


async def test_without_partial_every_pending_interrupt_needs_an_answer() -> None:
    """Seed 001 Resume: "Answers for every pending interrupt of a paused thread"."""
    rt = runtime()
    _, paused = await run(rt, three_questions([]))
    key = next(iter(paused.interrupts))
    with pytest.raises(ResumeError, match="unanswered"):
        await rt.aresume(paused.run_id, Resume(answers={key: 1}))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"partial": True}, "partial=True\\) needs answers"),
        ({"value": 1, "partial": True}, "partial=True\\) needs answers"),
    ],
    ids=["no-answers", "with-value"],
)
def test_partial_needs_answers(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ResumeError, match=message):
        Resume(**kwargs)
