"""What the plugin costs a test, in Python calls (issue 29: per test net of an empty test).

Counts, not times: an inner pytest session counts the calls (``sys.setprofile``: Python and
C calls) each test makes, and the tests below pin the parts the plugin adds — on a test that
does not use it at all, in ``graph_runtime``'s setup, and in an interrupt/resume round trip on
the fixture's runtime (its ``FaultyStore`` and recording) over the same round trip on a bare
``GraphRuntime``. The ceilings sit about a quarter above what was measured when they were
set (noted at each), so a change that brings a per-test cost back shows here.
"""

from __future__ import annotations

import json
import re

import pytest
from graphflow_plugin_helpers import Run, dedent

# The inner session's conftest: counts every call of each test's protocol (its setup, call,
# teardown and reports, with every plugin's hooks), and, separately, the calls made under
# pytest-graphflow's own frames outside the test's call (``graph_runtime`` made, the test's
# state, the plugin's hooks; the test's own runs are in the call).
COUNTING_CONFTEST = '''
import json, os, sys

import pytest

COUNTS = {"protocol": [], "ours_outside_call": [], "setup_teardown": []}
_PACKAGE = os.sep + "pytest_graphflow" + os.sep
_COUNTING = [None]


def _ours(frame):
    while frame is not None:
        if _PACKAGE in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


class Counter:
    def __init__(self):
        self.n = 0
        self.ours = 0
        self.in_call = False
        self.phases = 0

    def __call__(self, frame, event, arg):
        if event == "call" or event == "c_call":
            self.n += 1
            if not self.in_call and _ours(frame):
                self.ours += 1


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    counter = _COUNTING[0] = Counter()
    sys.setprofile(counter)
    try:
        return (yield)
    finally:
        sys.setprofile(None)
        COUNTS["protocol"].append(counter.n)
        COUNTS["ours_outside_call"].append(counter.ours)
        COUNTS["setup_teardown"].append(counter.phases)


def _phase():
    counter = _COUNTING[0]
    before = counter.n
    try:
        yield
    finally:
        counter.phases += counter.n - before


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    return (yield from _phase())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _phase())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    _COUNTING[0].in_call = True
    try:
        return (yield)
    finally:
        _COUNTING[0].in_call = False


def pytest_sessionfinish(session):
    with open(os.environ["GF_COUNTS"], "w") as f:
        json.dump(COUNTS, f)
'''

APPROVAL = '''
import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphResult, Resume, interrupt


class S(BaseModel):
    n: int = 0
    answer: str = ""


g = Graph("approval_counted", S)
g.node("draft", lambda s: {"n": s.n + 1})
g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
g.node("publish", lambda s: {"n": s.n + 10})
g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish").edge("publish", END)
graph = g.compile()


@pytest.mark.parametrize("i", range(6))
def test_approval(graph_runtime, i):
    paused = graph_runtime.invoke(graph, {"n": i})
    assert paused.status == "interrupted"
    done = graph_runtime.resume(paused.run_id, Resume("yes"))
    assert done.data == {"n": i + 11, "answer": "yes"}
'''

EMPTY = '''
import pytest


@pytest.mark.parametrize("i", range(6))
def test_nothing(i):
    pass
'''

ROUND_TRIPS = '''
import sys

import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, Resume, VirtualClock, interrupt


class S(BaseModel):
    n: int = 0
    answer: str = ""


g = Graph("approval_round_trips", S)
g.node("draft", lambda s: {"n": s.n + 1})
g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
g.node("publish", lambda s: {"n": s.n + 10})
g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish").edge("publish", END)
graph = g.compile()


def counted(runtime, i):
    n = [0]

    def count(frame, event, arg):
        if event == "call" or event == "c_call":
            n[0] += 1

    sys.setprofile(count)
    try:
        paused = runtime.invoke(graph, {"n": i})
        done = runtime.resume(paused.run_id, Resume("yes"))
    finally:
        sys.setprofile(None)
    assert done.data == {"n": i + 11, "answer": "yes"}
    return n[0]


@pytest.mark.parametrize("i", range(4))
def test_round_trip(graph_runtime, store_faults, i):
    bare = counted(GraphRuntime(None, clock=VirtualClock(), seed=i), i)
    ours = counted(graph_runtime, i)
    print(f"ROUND TRIP {bare} {ours}")
    assert [call.op for call in store_faults.calls] == [
        "latest", "claim", "save", "save", "save", "release",
        "latest", "claim", "save", "save", "release"]
'''


def _counts(pytester: pytest.Pytester, run: Run, *args: str) -> dict[str, list[int]]:
    out = pytester.path / "counts.json"
    pytester.makeconftest(COUNTING_CONFTEST)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GF_COUNTS", str(out))
        run("-q", "-p", "no:xdist", *args).assert_outcomes(passed=6)
    counts: dict[str, list[int]] = json.loads(out.read_text())
    return counts


def _per_test(values: list[int]) -> int:
    """The steady count of a test (the first tests of a session pay one-time imports)."""
    return min(values[2:])


def test_a_test_that_does_not_use_graphflow_pays_two_hooks_only(pytester: pytest.Pytester,
                                                                run: Run) -> None:
    """The plugin adds no hook around each fixture's setup, the test's call or its teardown
    unless an option needs them: measured at 30-35 calls (pluggy calling the protocol and
    makereport hooks), 80 before (a wrapper around every fixture's setup among them)."""
    pytester.makepyfile(test_counted_empty=EMPTY)
    with_plugin = _per_test(_counts(pytester, run)["protocol"])
    without = _per_test(_counts(pytester, run, "-p", "no:graphflow")["protocol"])
    assert with_plugin - without <= 45, (with_plugin, without)


def test_graph_runtime_costs_few_calls_outside_the_test(pytester: pytest.Pytester,
                                                       run: Run) -> None:
    """What pytest-graphflow's own frames run in a ``graph_runtime`` test outside its call (the
    runtime and its parts made, the test's state, the plugin's protocol and report hooks):
    measured at 118 calls once the runtime was made as the test starts, without pytest's
    fixture machinery (99 before, when that machinery ran instead: counted in the next
    test), then 107 once that and the fixture shared one maker of the runtime.
    ``graph_runtime``'s setup alone had been 130 calls (190 before the marker and
    store-features shortcuts), then 114 once the default parts were made in one place (one
    import a test, not five), then 82 once the runtime was built from those parts without
    the constructor's checks (a FaultyStore's features and the store check, ~30 calls,
    answer the same for every test: the first test's answer is kept); the round trip is
    pinned by the test after next."""
    pytester.makepyfile(test_counted_approval=APPROVAL)
    counts = _counts(pytester, run)
    assert _per_test(counts["ours_outside_call"]) <= 140, counts["ours_outside_call"]


def test_a_graph_runtime_test_costs_pytest_no_fixture_setup(pytester: pytest.Pytester,
                                                             run: Run) -> None:
    """A test taking ``graph_runtime`` (an interrupt/resume round trip) over an empty test:
    every call of its protocol, measured at 858 calls while pytest set ``graph_runtime`` up
    as a fixture, 672 once the plugin made the runtime as the test starts and handed it to
    pytest as the test's argument, 742 since it makes it at the end of the test's setup
    (after every other fixture: a marker a fixture applies is read, as the fixture read it);
    its setup and teardown phases over an empty test's 271 (pytest's fixture machinery: the
    lookup, every plugin's setup hooks, the finalizer, and the runtime's making) -> 0 -> 80
    (the runtime's making alone). The whole protocol is printed, not pinned (inside the
    whole suite an in-process session pays ~130 calls more a test); the phases are pinned:
    the ceiling fails if pytest's fixture machinery comes back."""
    pytester.makepyfile(test_counted_approval=APPROVAL, test_counted_empty=EMPTY)
    ours = _counts(pytester, run, "test_counted_approval.py")
    empty = _counts(pytester, run, "test_counted_empty.py")
    extra = _per_test(ours["setup_teardown"]) - _per_test(empty["setup_teardown"])
    print("over an empty test: protocol",
          _per_test(ours["protocol"]) - _per_test(empty["protocol"]), "setup and teardown", extra)
    assert extra <= 110, (ours["setup_teardown"], empty["setup_teardown"])


def test_the_fixture_round_trip_costs_little_over_a_bare_runtime(pytester: pytest.Pytester,
                                                                 run: Run) -> None:
    """The fixture's runtime logs every store call (``FaultyStore``) and records each leg
    (events unbuilt until read): over a bare ``GraphRuntime``'s round trip (the runtime's
    construction included) that was measured at 172 calls (a plain list per store call, an
    unbuilt event built in place per event; 280 before), then 231 once the bare in-memory
    store took a lean step's checkpoint through its ``step_sink`` (a FaultyStore's saves
    still go one by one through its log), then 386 once the bare in-memory store answered
    claims, releases and the resume's read at once (``StoreFeatures.in_process``, which a
    FaultyStore did not pass on: its claims are logged and its rules apply to them). The
    fixture's own round trip went down meanwhile (1,140 calls, then 875). Then 172 (the
    fixture's round trip 696): the FaultyStore passes ``in_process`` and ``step_sink`` on,
    each answer logged as the call it stands for and declined while a rule watches it, and
    a recording leg runs its plain steps in one piece; 183 (696 -> 707) once those answers
    logged their time through ``_when`` instead of six inline copies of it. Then 217 (bare
    524 -> 402, the fixture's 707 -> 619, run alone; 503 and 751 inside the whole suite,
    whose in-process sessions pay more calls on both sides) once a bare ``invoke`` paused a
    lone asking task through ``pause_one`` (events numbered, not built), which a recording
    leg cannot take: it records them. Then 194 (the fixture's 616 -> 593, run alone) once a
    recording leg's lone asking task paused through ``pause_one`` too (its events unbuilt,
    as ``halt`` makes them) and a recorded leg was made and told of each piece without the
    dataclass's property setters. Then 178 (191 before, measured beside it; the fixture's
    570 -> 549, the bare 379 -> 371, run alone) once a recorded ``interrupt`` event copied
    its question without pydantic's ``model_copy`` and a fresh seed made only the run ids
    its runtime took (one, not four). Then 167 (the fixture's 545 -> 536, the bare 369,
    run alone) once the FaultyStore forwarded ``claim_ttl`` without its ``__getattr__`` and
    logged its quick answers' times inline. The ceiling sits about 20% above the difference
    measured last."""
    pytester.makepyfile(test_counted_round_trips=ROUND_TRIPS)
    result = run("-q", "-s", "-p", "no:xdist")
    result.assert_outcomes(passed=4)
    pairs = [(int(m[1]), int(m[2]))
             for m in re.finditer(r"ROUND TRIP (\d+) (\d+)", result.stdout.str())]
    assert len(pairs) == 4
    extra = min(ours - bare for bare, ours in pairs[1:])
    assert extra <= 200, pairs


def test_the_plugin_hooks_no_fixture_setup_and_only_optional_call_hooks(
        pytester: pytest.Pytester, run: Run) -> None:
    """No graphflow hook runs around a fixture's setup; the call and teardown hooks exist only
    when ``--graphflow-record`` (or ``--graphflow-processes``, an HTML report) asks."""
    pytester.makepyfile(test_counted_hooks=dedent('''
        import pytest

        def graphflow_hooks(config, name):
            impls = getattr(config.pluginmanager.hook, name).get_hookimpls()
            return sorted(impl.plugin_name for impl in impls
                          if "graphflow" in impl.plugin_name)

        def test_hooks(pytestconfig):
            recording = bool(pytestconfig.getoption("graphflow_record"))
            assert graphflow_hooks(pytestconfig, "pytest_fixture_setup") == []
            for name in ("pytest_runtest_call", "pytest_runtest_teardown"):
                expected = ["graphflow-run-hooks"] if recording else []
                assert graphflow_hooks(pytestconfig, name) == expected, name
    '''))
    run("-q").assert_outcomes(passed=1)
    run("-q", f"--graphflow-record={pytester.path / 'histories'}").assert_outcomes(passed=1)
