"""``graph_runtime.langgraph(graph)``: a LangGraph harness with the test's seed, virtual
clock and ``store_faults`` rules, as users meet it in a pytest session."""

from __future__ import annotations

import os

import pytest
from graphflow_plugin_helpers import Run

if not os.environ.get("CI"):  # CI installs the langgraph extra (via "test"): never skip there
    pytest.importorskip("langgraph")

LANGGRAPH_APP = '''
import operator
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph

class S(TypedDict, total=False):
    log: Annotated[list[str], operator.add]

def build():
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g
'''

TESTS = '''
import pytest
from lg_app import build
from pytest_graphflow import StoreFault

def test_reject_through_store_faults(graph_runtime, store_faults):
    store_faults.reject_save(nth=2)
    h = graph_runtime.langgraph(build(), durability="sync")
    assert h.seed == graph_runtime.seed and h.clock is graph_runtime.clock
    with pytest.raises(StoreFault):
        h.trace({"log": []})
    assert store_faults.last_rule.hits == 1
    assert h.resume().result.data == {"log": ["a", "b"]}

def test_passing_twin_without_rules(graph_runtime):
    trace = graph_runtime.langgraph(build()).trace({"log": []})
    assert trace.result.data == {"log": ["a", "b"]}
'''


def test_store_faults_rules_apply_to_the_langgraph_saver(
    pytester: pytest.Pytester, run: Run
) -> None:
    pytester.makepyfile(lg_app=LANGGRAPH_APP, test_lg=TESTS)
    pytester.syspathinsert()
    result = run("-q")
    result.assert_outcomes(passed=2)


FAILING = '''
from lg_app import build

def test_fails_after_a_langgraph_run(graph_runtime):
    graph_runtime.langgraph(build()).trace({"log": []})
    assert False, "the user's own assertion"
'''


def test_a_failing_test_reports_the_langgraph_run(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makepyfile(lg_app=LANGGRAPH_APP, test_lg_fail=FAILING)
    pytester.syspathinsert()
    result = run("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*seed: *",
        "*reproduce: pytest *test_lg_fail.py::test_fails_after_a_langgraph_run --graphflow-seed=*",
        "*leg 1: run-* of graph 'LangGraph': completed, * events",
        "*path: START -> a -> b*",
        "*node_end b*",
        "*run_end completed*",
    ])


MIXED = '''
from gf_mixed import ORDERED
from lg_app import build

def test_langgraph_run_beside_a_module_level_graph(graph_runtime):
    assert graph_runtime.langgraph(build()).trace({"log": []}).result.data == {"log": ["a", "b"]}
    assert graph_runtime.trace(ORDERED).status == "completed"
'''

MODULE_GRAPH = '''
from pydantic import BaseModel
from pytest_graphflow import END, START, Graph

class S(BaseModel):
    n: int = 0

g = Graph("ordered", S)
g.node("one", lambda s: {"n": 1}).edge(START, "one").edge("one", END)
ORDERED = g.compile()
'''


def test_graphflow_processes_skips_a_langgraph_run_and_replays_the_rest(
    pytester: pytest.Pytester, run: Run
) -> None:
    """A LangGraph run cannot be replayed in a fresh interpreter: it is counted as skipped,
    and the test's graphflow run beside it is replayed."""
    pytester.makepyfile(lg_app=LANGGRAPH_APP, gf_mixed=MODULE_GRAPH, test_lg_mixed=MIXED)
    pytester.syspathinsert()
    result = run("-q", "--graphflow-processes=2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["graphflow: 1 run(s) replayed in fresh interpreters, 1 "
                                 "skipped*"])


LG_TAGS = '''
import asyncio
import operator
import uuid
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

TAGS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]

class S(TypedDict, total=False):
    tags: list[str]
    log: Annotated[list[str], operator.add]

def build(order):
    g = StateGraph(S)

    async def search(state):
        await asyncio.sleep(2)
        return {{"log": [f"search:{{uuid.uuid4().hex[:8]}}"]}}

    g.add_node("collect", lambda s: {{"tags": order(set(TAGS))}})
    g.add_node("search", search)
    g.add_node("review", lambda s: {{"log": [f"review:{{interrupt(s['tags'][:2])}}"]}})
    g.add_edge(START, "collect")
    g.add_edge(START, "search")
    g.add_edge(["collect", "search"], "review")
    g.add_edge("review", END)
    return g.compile()

APP = build({order})
'''

LG_TAGS_TEST = '''
from {module} import APP, build

def test_module_level_app(graph_runtime):
    h = graph_runtime.langgraph(APP)
    assert h.trace({{"log": []}}).result.status == "interrupted"
    graph_runtime.clock.advance(60)  # the test's own time between the legs is replayed too
    assert h.resume("ok").result.status == "completed"

def test_app_built_in_the_test_is_skipped(graph_runtime):
    assert graph_runtime.langgraph(build(sorted)).trace({{"log": []}}).result.status == (
        "interrupted")
'''


@pytest.mark.parametrize(("order", "outcome"), [("sorted", {"passed": 2}),
                                                ("list", {"passed": 1, "failed": 1})],
                         ids=["stable-order", "hash-order"])
def test_graphflow_processes_replays_a_langgraph_harness_of_a_module_level_app(
        pytester: pytest.Pytester, run: Run, order: str, outcome: dict[str, int]) -> None:
    # Workers live for the whole session: each case gets its own module name.
    module = f"lg_tags_{order}"
    pytester.makepyfile(**{module: LG_TAGS.format(order=order),
                           "test_lg_tags": LG_TAGS_TEST.format(module=module)})
    pytester.syspathinsert()
    result = run("-q", "--graphflow-processes=2")
    result.assert_outcomes(**outcome)
    if order == "list":  # a node's set of strings in hash order: another path elsewhere
        result.stdout.fnmatch_lines([
            "*--graphflow-processes: the LangGraph harness on thread 'thread-*' of this test "
            "took another path in a fresh interpreter with PYTHONHASHSEED=*",
            "*diverged at event *"])
    else:  # the fan-out's edges and the join's saved set are in a stable order (24.15)
        result.stdout.fnmatch_lines(["graphflow: 1 run(s) replayed in fresh interpreters, 1 "
                                     "skipped*"])


LG_SAVER_TEST = '''
from langgraph.checkpoint.memory import InMemorySaver
from pytest_graphflow.langgraph import FaultySaver
from {module} import APP

def test_an_empty_saver_of_the_tests_own(graph_runtime):
    h = graph_runtime.langgraph(APP, saver=FaultySaver(InMemorySaver()))
    assert h.trace({{"log": []}}).result.status == "interrupted"
    assert h.resume("ok").result.status == "completed"

def test_a_saver_two_harnesses_share(graph_runtime):
    saver = InMemorySaver()
    first = graph_runtime.langgraph(APP, saver=saver)
    assert first.trace({{"log": []}}).result.status == "interrupted"
    # a fresh harness over the saved thread (the recovery of a new process): not replayable
    second = graph_runtime.langgraph(APP, saver=saver, thread_id=first.thread_id)
    assert second.resume("ok").result.status == "completed"
    first.resume()  # its thread moved under it: the two replay together, in this order

def test_a_plain_write_into_the_saver_is_skipped(graph_runtime):
    saver = InMemorySaver()
    h = graph_runtime.langgraph(APP, saver=saver)
    assert h.trace({{"log": []}}).result.status == "interrupted"
    plain = APP.copy(update={{"checkpointer": saver}})
    plain.update_state({{"configurable": {{"thread_id": "plain"}}}}, {{"log": ["x"]}})
'''


@pytest.mark.parametrize(("order", "outcome"), [("sorted", {"passed": 3}),
                                                ("list", {"passed": 1, "failed": 2})],
                         ids=["stable-order", "hash-order"])
def test_graphflow_processes_replays_a_harness_over_an_empty_saver_of_the_tests_own(
        pytester: pytest.Pytester, run: Run, order: str, outcome: dict[str, int]) -> None:
    module = f"lg_saver_{order}"
    pytester.makepyfile(**{module: LG_TAGS.format(order=order),
                           "test_lg_saver": LG_SAVER_TEST.format(module=module)})
    pytester.syspathinsert()
    result = run("-q", "--graphflow-processes=2")
    result.assert_outcomes(**outcome)
    if order == "list":  # replayed, so the hash-ordered node shows
        for name in ("test_an_empty_saver_of_the_tests_own", "test_a_saver_two_harnesses_share"):
            result.stdout.fnmatch_lines([
                f"*{name}*",
                "*--graphflow-processes: the LangGraph harness on thread 'thread-*' of this "
                "test took another path in a fresh interpreter with PYTHONHASHSEED=*"])
    else:  # the two harnesses over one saver replay together, calls in the test's order;
        # a plain LangGraph write into the saver cannot be made again: skipped, and why
        result.stdout.fnmatch_lines([
            "graphflow: 3 run(s) replayed in fresh interpreters, 1 skipped, because:",
            "graphflow:   1 skipped: a LangGraph harness: something other than its harnesses "
            "wrote checkpoints into its saver: a replay makes only the harnesses' calls"])


LG_FAULTS_TEST = '''
import pytest
from pytest_graphflow import StoreFault
from pytest_graphflow.errors import SimulatedCrash
from {module} import APP

def test_faults_that_acted(graph_runtime):
    h = graph_runtime.langgraph(APP, durability="sync")
    h.saver.delay("get_tuple", 30.0, nth=1)  # a slow first read: 30 virtual seconds
    h.saver.reject_save(nth=3)
    with pytest.raises(StoreFault):
        h.trace({{"log": []}})
    assert h.resume().result.status == "interrupted"
    assert h.resume("ok").result.status == "completed"

class DiskFull(OSError):
    """An error class of the test's own."""

def test_a_custom_error_class_is_raised_again(graph_runtime):
    h = graph_runtime.langgraph(APP, durability="sync")
    h.saver.fail("put", nth=3, error=DiskFull("disk full"))
    with pytest.raises(DiskFull):
        h.trace({{"log": []}})
    assert h.resume().result.status == "interrupted"

def test_a_crash_then_a_fresh_harness_over_its_saver(graph_runtime):
    h = graph_runtime.langgraph(APP, durability="sync")
    h.saver.crash_at("put", nth=3)
    with pytest.raises(SimulatedCrash):
        h.trace({{"log": []}})
    fresh = graph_runtime.langgraph(APP, saver=h.saver.inner, thread_id=h.thread_id,
                                    durability="sync")
    assert fresh.resume().result.status == "interrupted"
    assert fresh.resume("ok").result.status == "completed"

def test_an_error_that_does_not_pickle_is_skipped(graph_runtime):
    h = graph_runtime.langgraph(APP, durability="sync")
    h.saver.fail("put", nth=3, error=OSError(lambda: "disk full"))
    with pytest.raises(OSError):
        h.trace({{"log": []}})
'''


@pytest.mark.parametrize(("order", "outcome"), [("sorted", {"passed": 4}),
                                                ("list", {"passed": 1, "failed": 3})],
                         ids=["stable-order", "hash-order"])
def test_graphflow_processes_replays_the_faults_that_acted_on_a_harness_saver(
        pytester: pytest.Pytester, run: Run, order: str, outcome: dict[str, int]) -> None:
    module = f"lg_faults_{order}"
    pytester.makepyfile(**{module: LG_TAGS.format(order=order),
                           "test_lg_faults": LG_FAULTS_TEST.format(module=module)})
    pytester.syspathinsert()
    result = run("-q", "--graphflow-processes=2")
    result.assert_outcomes(**outcome)
    if order == "list":  # replayed with its faults (its own error class too): the
        # hash-ordered node shows
        for name in ("test_faults_that_acted", "test_a_custom_error_class_is_raised_again",
                     "test_a_crash_then_a_fresh_harness_over_its_saver"):
            result.stdout.fnmatch_lines([
                f"*{name}*",
                "*--graphflow-processes: the LangGraph harness on thread 'thread-*' of this "
                "test took another path in a fresh interpreter with PYTHONHASHSEED=*"])
    else:  # an error that does not pickle cannot be raised again there: skipped, and why
        result.stdout.fnmatch_lines([
            "graphflow: 4 run(s) replayed in fresh interpreters, 1 skipped, because:",
            "graphflow:   1 skipped: a LangGraph harness: its fault rules raised OSError(<*"
            "lambda*), which does not pickle (a fresh interpreter cannot raise it again)"])


LG_BUILT = '''
import asyncio
import functools
import operator
import uuid
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

TAGS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]

class S(TypedDict, total=False):
    tags: list[str]
    log: Annotated[list[str], operator.add]

def collect(state, order):
    return {{"tags": order(set(TAGS))}}

async def search(state):
    await asyncio.sleep(2)
    return {{"log": [f"search:{{uuid.uuid4().hex[:8]}}"]}}

def review(state):
    return {{"log": [f"review:{{interrupt(state['tags'][:2])}}"]}}

def build(order):
    """The graph's parts live in this module; the test builds the graph."""
    g = StateGraph(S)
    g.add_node("collect", functools.partial(collect, order=order))
    g.add_node("search", search)
    g.add_node("review", review)
    g.add_edge(START, "collect")
    g.add_edge(START, "search")
    g.add_edge(["collect", "search"], "review")
    g.add_edge("review", END)
    return g
'''

LG_BUILT_TEST = '''
from {module} import build

def test_a_builder_made_in_the_test(graph_runtime):
    h = graph_runtime.langgraph(build({order}))
    assert h.trace({{"log": []}}).result.status == "interrupted"
    assert h.resume("ok").result.status == "completed"

def test_a_graph_compiled_in_the_test(graph_runtime):
    h = graph_runtime.langgraph(build({order}).compile(interrupt_after=["search"]))
    assert h.trace({{"log": []}}).result.status == "interrupted"
    assert h.resume().result.status == "interrupted"

def test_a_lambda_node_keeps_it_from_a_replay(graph_runtime):
    g = build(sorted)
    g.add_node("extra", lambda state: {{"log": ["extra"]}})
    g.add_edge("review", "extra")
    assert graph_runtime.langgraph(g).trace({{"log": []}}).result.status == "interrupted"
'''


@pytest.mark.parametrize(("order", "outcome"), [("sorted", {"passed": 3}),
                                                ("list", {"passed": 1, "failed": 2})],
                         ids=["stable-order", "hash-order"])
def test_graphflow_processes_replays_a_harness_whose_graph_the_test_built(
        pytester: pytest.Pytester, run: Run, order: str, outcome: dict[str, int]) -> None:
    module = f"lg_built_{order}"
    pytester.makepyfile(**{module: LG_BUILT.format(),
                           "test_lg_built": LG_BUILT_TEST.format(module=module, order=order)})
    pytester.syspathinsert()
    result = run("-q", "--graphflow-processes=2")
    result.assert_outcomes(**outcome)
    if order == "list":  # replayed from its pickled builder: the hash-ordered node shows
        for name in ("test_a_builder_made_in_the_test", "test_a_graph_compiled_in_the_test"):
            result.stdout.fnmatch_lines([
                f"*{name}*",
                "*--graphflow-processes: the LangGraph harness on thread 'thread-*' of this "
                "test took another path in a fresh interpreter with PYTHONHASHSEED=*",
                "*diverged at event *"])
    else:
        result.stdout.fnmatch_lines([
            "graphflow: 2 run(s) replayed in fresh interpreters, 1 skipped, because:",
            "graphflow:   1 skipped: a LangGraph harness: its graph is built inside the test, "
            "and it holds a function defined inside a function, 'test_a_lambda_node_keeps_"
            "it_from_a_replay.<locals>.<lambda>' (no module holds it for a fresh interpreter;"
            " build it at module level)"])
