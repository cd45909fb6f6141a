"""Subgraphs past their first cut (issue 13): several child interrupts surfacing at once,
breakpoints inside a child, a child ended by ``Command(graph=Command.PARENT)`` recorded as
completed, and time travel on the parent giving the child a fresh run."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Breakpoint,
    Command,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Reducer,
    Resume,
    ResumeError,
    SQLiteCheckpointStore,
    Subgraph,
    VirtualClock,
    interrupt,
)
from pytest_graphflow.invariants import assert_invariants

pytestmark = pytest.mark.anyio


class Child(BaseModel):
    text: str = ""
    votes: Annotated[list[str], Reducer(operator.add)] = []


class Parent(BaseModel):
    draft: str = ""
    votes: list[str] = []
    log: Annotated[list[str], Reducer(operator.add)] = []


calls: list[str] = []


def voter(name: str) -> Any:
    def vote(state: Child) -> dict[str, Any]:
        calls.append(name)
        return {"votes": [f"{name}:{interrupt({'text': state.text}, id=name)}"]}

    return vote


def two_question_child() -> Any:
    """A child whose one batch asks two humans at once."""
    c = Graph("panel", Child)
    c.node("legal", voter("legal"), effect="human").node("style", voter("style"), effect="human")
    c.edge(START, ["legal", "style"]).edge("legal", END).edge("style", END)
    return c.compile()


def parent(child: Any, name: str = "publish") -> Any:
    p = Graph(name, Parent)
    p.node("plan", lambda s: {"log": ["plan"]})
    p.node("review", Subgraph(child, input={"text": "draft"}, output={"votes": "votes"}))
    p.node("ship", lambda s: {"log": [f"ship:{','.join(s.votes)}"]})
    p.edge(START, "plan").edge("plan", "review").edge("review", "ship").edge("ship", END)
    return p.compile()


# -- (a) several child interrupts at once ---------------------------------------------------


async def test_two_child_interrupts_surface_together_and_answer_partially_over_sqlite(
    tmp_path: Path,
) -> None:
    calls.clear()
    path = tmp_path / "runs.db"
    graph = parent(two_question_child())

    def fresh() -> GraphRuntime:  # another process each time: a new runtime over the file
        return GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=5)

    first = await fresh().atrace(graph, {"draft": "d"})
    paused = first.result
    assert paused.status == "interrupted"
    review = first.events.of_type("node_start")[1].task_id
    keys = sorted(paused.interrupts)
    assert len(keys) == 2
    assert all(k.startswith(f"{review}/task-") for k in keys)
    by_id = {paused.interrupts[k].id: k for k in keys}
    assert set(by_id) == {"legal", "style"}
    assert {p.node for p in paused.interrupts.values()} == {"review"}
    # both are on the parent's one interrupt event of the subgraph task
    (asked,) = first.events.of_type("interrupt")
    assert sorted(i.key for i in asked.interrupts) == keys

    # answer one of them: the other stays pending under the same key
    second = await fresh().aresume_trace(
        paused.run_id, Resume(answers={by_id["legal"]: "ok"}, partial=True), graph=graph)
    assert second.result.status == "interrupted"
    assert list(second.result.interrupts) == [by_id["style"]]

    third = await fresh().aresume_trace(
        paused.run_id, Resume(answers={by_id["style"]: "fine"}), graph=graph)
    done = third.result
    assert done.status == "completed"
    assert sorted(done.data["votes"]) == ["legal:ok", "style:fine"]
    assert done.data["log"] == ["plan", f"ship:{','.join(done.data['votes'])}"]
    # legal is human: answered once, replayed afterwards, not asked again
    assert calls.count("legal") == 2
    assert calls.count("style") == 3
    assert_invariants([*first.events, *second.events, *third.events], graph=graph)


async def test_two_child_interrupts_answered_together() -> None:
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=2)
    graph = parent(two_question_child())
    paused = await rt.ainvoke(graph, {"draft": "d"})
    answers = {k: f"yes-{p.id}" for k, p in paused.interrupts.items()}
    done = await rt.aresume(paused.run_id, Resume(answers=answers))
    assert done.status == "completed"
    assert sorted(done.data["votes"]) == ["legal:yes-legal", "style:yes-style"]


async def test_one_value_for_two_child_interrupts_is_refused_and_changes_nothing() -> None:
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=2)
    paused = await rt.ainvoke(parent(two_question_child()), {"draft": "d"})
    before = await rt.store.latest(paused.run_id)
    with pytest.raises(ResumeError):
        await rt.aresume(paused.run_id, Resume("yes"))
    assert await rt.store.latest(paused.run_id) == before


# -- (b) breakpoints inside a child ---------------------------------------------------------


def stepping_child() -> Any:
    c = Graph("drafting", Child)
    c.node("polish", lambda s: {"text": s.text.upper()})
    c.node("sign", lambda s: {"votes": [f"signed:{s.text}"]})
    c.edge(START, "polish").edge("polish", "sign").edge("sign", END)
    return c.compile(interrupt_before=["polish"], interrupt_after=["polish"])


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_childs_breakpoints_pause_the_parent_and_resume_with_no_answer(
    store: str, tmp_path: Path
) -> None:
    graph = parent(stepping_child())

    def rt() -> GraphRuntime:
        st: Any = InMemoryCheckpointStore() if store == "memory" else SQLiteCheckpointStore(
            tmp_path / "runs.db")
        return GraphRuntime(store=st, clock=VirtualClock(), seed=3)

    runtime = rt()
    first = await runtime.atrace(graph, {"draft": "hi"})
    result = first.result
    assert result.status == "interrupted"
    assert result.interrupts == {}
    assert result.breakpoint == Breakpoint(when="before", nodes=["review/polish"])
    assert first.events[-1].breakpoint == result.breakpoint  # run_end says where
    with pytest.raises(ResumeError, match="breakpoint"):
        await runtime.aresume(result.run_id, Resume("x"))

    runtime = runtime if store == "memory" else rt()
    second = await runtime.aresume_trace(result.run_id, graph=graph)
    assert second.result.status == "interrupted"
    assert second.result.breakpoint == Breakpoint(when="after", nodes=["review/polish"])
    runtime = runtime if store == "memory" else rt()
    third = await runtime.aresume_trace(result.run_id, graph=graph)
    done = third.result
    assert done.status == "completed"
    assert done.data["votes"] == ["signed:HI"]
    assert done.data["log"] == ["plan", "ship:signed:HI"]
    assert_invariants([*first.events, *second.events, *third.events], graph=graph)


# -- (c) Command(graph=PARENT) ends the child as completed ----------------------------------


async def test_a_child_ended_by_a_parent_command_is_recorded_as_completed(
    tmp_path: Path,
) -> None:
    def escalate(state: Child) -> Command:
        return Command(graph=Command.PARENT, goto="manual", update={"log": ["escalated"]})

    inner = Graph("escalating", Child)
    inner.node("escalate", escalate).node("never", lambda s: {"text": "never"})
    inner.edge(START, "escalate").edge("escalate", "never").edge("never", END)
    p = Graph("parent-routes", Parent)
    p.node("review", inner.compile(), destinations=["manual"])
    p.node("ship", lambda s: {"log": ["ship"]}).node("manual", lambda s: {"log": ["manual"]})
    p.edge(START, "review").edge("review", "ship").edge("ship", END).edge("manual", END)
    store = SQLiteCheckpointStore(tmp_path / "runs.db")  # keeps run records and events
    trace = await GraphRuntime(store=store, clock=VirtualClock(), seed=1).atrace(p.compile())
    assert trace.result.status == "completed"
    assert trace.result.data["log"] == ["escalated", "manual"]

    child_events = [e.value["event"] for e in trace.events.of_type("custom")
                    if e.channel == "subgraph"]
    assert [e["type"] for e in child_events if e["type"] == "error"] == []
    assert child_events[-1]["type"] == "run_end"
    assert child_events[-1]["status"] == "completed"
    escalated = next(e for e in child_events if e["type"] == "node_end")
    assert (escalated["node"], escalated["goto"]) == ("escalate", [])
    child_run = child_events[0]["run_id"]
    last = await store.latest(child_run)
    assert last is not None
    assert last.status == "completed"
    record = await store.run(child_run)
    assert record is not None
    assert record["status"] == "completed"
    assert record.get("error") is None
    logged = await store.events(child_run)
    assert [e["type"] for e in logged if e["type"] == "error"] == []
    assert logged[-1]["status"] == "completed"


# -- (d) time travel gives the child a fresh run --------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def child(self) -> Any:
        def note(state: Child) -> dict[str, Any]:
            self.seen.append(state.text)
            return {"votes": [f"saw:{state.text}"]}

        c = Graph("noting", Child)
        c.node("note", note).edge(START, "note").edge("note", END)
        return c.compile()


async def before_review(rt: GraphRuntime, run_id: str) -> str:
    """The parent's checkpoint saved after ``plan``, whose next batch is the subgraph task."""
    history = await rt.store.list(run_id=run_id)
    return next(cp.id for cp in history if [t.node for t in cp.tasks] == ["review"]
                and not cp.completed and cp.status == "running")


async def test_replaying_from_before_the_subgraph_runs_a_fresh_child() -> None:
    counter = Counter()
    graph = parent(counter.child())
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=6)
    first = await rt.ainvoke(graph, {"draft": "one"})
    assert first.data["votes"] == ["saw:one"]

    # time travel: change the draft at the checkpoint before the subgraph, then replay
    cid = await before_review(rt, first.run_id)
    new_cid = await rt.aupdate_state(cid, {"draft": "two"})
    replayed = await rt.aresume(new_cid)
    assert replayed.status == "completed"
    assert replayed.data["votes"] == ["saw:two"]  # not the old child's final state
    assert counter.seen == ["one", "two"]
    threads = {cp.thread_id for cp in await rt.store.list()
               if cp.thread_id.startswith(f"{first.thread_id}/")}
    assert len(threads) == 2  # the old child thread is kept, the replay got its own


async def test_resuming_by_an_old_checkpoint_id_runs_a_fresh_child() -> None:
    counter = Counter()
    graph = parent(counter.child())
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=6)
    first = await rt.ainvoke(graph, {"draft": "one"})
    cid = await before_review(rt, first.run_id)
    again = await rt.aresume(cid)
    assert again.status == "completed"
    assert counter.seen == ["one", "one"]  # the child ran again, in a child run of its own
    child_runs = {cp.run_id for cp in await rt.store.list()
                  if cp.thread_id.startswith(f"{first.thread_id}/")}
    assert len(child_runs) == 2


async def test_a_fork_before_the_subgraph_runs_a_fresh_child() -> None:
    counter = Counter()
    graph = parent(counter.child())
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=6)
    first = await rt.ainvoke(graph, {"draft": "one"})
    fork = await rt.store.fork(await before_review(rt, first.run_id), {"draft": "three"})
    result = await rt.aresume(fork, graph=graph)
    assert result.data["votes"] == ["saw:three"]
    assert counter.seen == ["one", "three"]


async def test_a_plain_resume_still_continues_the_same_child() -> None:
    """The fresh-child rule is for time travel only: answering a paused child resumes it."""
    calls.clear()
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=2)
    paused = await rt.ainvoke(parent(two_question_child()), {"draft": "d"})
    key = next(k for k, p in paused.interrupts.items() if p.id == "legal")
    half = await rt.aresume(paused.run_id, Resume(answers={key: "ok"}, partial=True))
    child_runs = {cp.run_id for cp in await rt.store.list()
                  if cp.thread_id.startswith(f"{paused.thread_id}/")}
    assert half.status == "interrupted"
    assert len(child_runs) == 1


async def test_a_fork_of_a_paused_parent_forks_its_child_and_leaves_the_original_alone() -> None:
    calls.clear()
    graph = parent(two_question_child())
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=2)
    paused = await rt.ainvoke(graph, {"draft": "d"})
    answers = {k: f"fork-{p.id}" for k, p in paused.interrupts.items()}
    original_child = {cp.thread_id for cp in await rt.store.list()
                      if cp.thread_id.startswith(f"{paused.thread_id}/")}
    (child_thread,) = original_child
    before = [cp.id for cp in await rt.store.list(thread_id=child_thread)]

    fork = await rt.store.fork(paused.checkpoint_id)  # type: ignore[arg-type]
    forked = await rt.aresume(fork, Resume(answers=answers), graph=graph)
    assert forked.status == "completed"
    assert sorted(forked.data["votes"]) == ["legal:fork-legal", "style:fork-style"]
    # the original's child did not move, and the original still answers its own way
    assert [cp.id for cp in await rt.store.list(thread_id=child_thread)] == before
    mine = {k: f"orig-{p.id}" for k, p in paused.interrupts.items()}
    original = await rt.aresume(paused.run_id, Resume(answers=mine))
    assert sorted(original.data["votes"]) == ["legal:orig-legal", "style:orig-style"]


async def _paused_with_legal_answered(rt: GraphRuntime, graph: Any) -> tuple[Any, str, Any]:
    """A parent paused on both of its child's questions, then ``legal`` answered alone (the
    child moved on and still waits for ``style``). Returns the first pause, the child thread
    and the child's checkpoint ids after the partial answer."""
    calls.clear()
    paused = await rt.ainvoke(graph, {"draft": "d"})
    key = next(k for k, p in paused.interrupts.items() if p.id == "legal")
    half = await rt.aresume(paused.run_id, Resume(answers={key: "first"}, partial=True))
    assert half.status == "interrupted"
    assert [p.id for p in half.interrupts.values()] == ["style"]
    (child_thread,) = {cp.thread_id for cp in await rt.store.list()
                       if cp.thread_id.startswith(f"{paused.thread_id}/")}
    return paused, child_thread, [cp.id for cp in await rt.store.list(thread_id=child_thread)]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_going_back_to_a_pause_continues_the_child_from_where_it_stood_then(
    kind: str, tmp_path: Path
) -> None:
    """Time travel to a parent checkpoint taken while its child was paused: the child goes on
    from its own checkpoint of that moment (both questions open), on a thread of its own,
    not from where the later partial answer took it. Over SQLite the travel is another
    process's: a new runtime over the file."""
    store: Any = (InMemoryCheckpointStore() if kind == "memory"
                  else SQLiteCheckpointStore(tmp_path / "runs.db"))
    rt = GraphRuntime(store=store, clock=VirtualClock(), seed=2)
    graph = parent(two_question_child())
    paused, child_thread, moved = await _paused_with_legal_answered(rt, graph)
    if kind == "sqlite":
        rt = GraphRuntime(store=SQLiteCheckpointStore(tmp_path / "runs.db"),
                          clock=VirtualClock(), seed=2)
    answers = {k: f"again-{p.id}" for k, p in paused.interrupts.items()}
    again = await rt.aresume(paused.checkpoint_id, Resume(answers=answers), graph=graph)  # type: ignore[arg-type]
    assert again.status == "completed"
    assert sorted(again.data["votes"]) == ["legal:again-legal", "style:again-style"]
    assert [cp.id for cp in await rt.store.list(thread_id=child_thread)] == moved
    children = {cp.thread_id for cp in await rt.store.list()
                if cp.thread_id.startswith(f"{paused.thread_id}/")}
    assert children == {child_thread, f"{child_thread}~2"}


async def test_a_fork_of_a_pause_the_child_moved_on_from_forks_the_child_as_it_stood() -> None:
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=2)
    graph = parent(two_question_child())
    paused, child_thread, moved = await _paused_with_legal_answered(rt, graph)
    fork = await rt.store.fork(paused.checkpoint_id)  # type: ignore[arg-type]
    answers = {k: f"fork-{p.id}" for k, p in paused.interrupts.items()}
    forked = await rt.aresume(fork, Resume(answers=answers), graph=graph)
    assert sorted(forked.data["votes"]) == ["legal:fork-legal", "style:fork-style"]
    assert [cp.id for cp in await rt.store.list(thread_id=child_thread)] == moved


async def test_a_replay_that_pauses_before_the_subgraph_still_gets_a_fresh_child() -> None:
    """The fresh-child decision survives a pause between the time travel and the task."""
    counter = Counter()
    graph = parent(counter.child())
    rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=6)
    first = await rt.ainvoke(graph, {"draft": "one"})
    cid = await rt.aupdate_state(await before_review(rt, first.run_id), {"draft": "two"})
    stopped = await rt.aresume(cid, interrupt_before=["review"])
    assert stopped.breakpoint == Breakpoint(when="before", nodes=["review"])
    done = await rt.aresume(stopped.run_id)  # by run id: not time travel any more
    assert done.data["votes"] == ["saw:two"]
    assert counter.seen == ["one", "two"]
