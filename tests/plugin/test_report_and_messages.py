"""Issue 14: the failure report and error messages as users meet them, in real sessions.

"The failure report shows only the last leg (the resumed one, when the paused leg failed),
runs ~80 lines per failure with no way to shorten it, and an injected StoreFault shows ~20
library frames." "Errors that do not point to the fix: a sync call inside an async test
(... say 'use atrace/ainvoke'); graph_runtime in a @given test (... say 'use
graph_runtime_factory')." "--hypothesis-profile=graphflow-thorough without conftest
boilerplate crashes with an INTERNALERROR; the plugin should register its profiles."
"""

from __future__ import annotations

import re

import pytest
from graphflow_plugin_helpers import Run, dedent

APPROVAL = dedent("""
    from pydantic import BaseModel
    from pytest_graphflow import END, START, Graph, Resume, interrupt

    class S(BaseModel):
        answer: str = ""
        refunded: bool = False

    def ask(state):
        return {"answer": str(interrupt("refund?", id="approval"))}

    def refund(state):
        return {"refunded": state.answer == "yes"}

    def build():
        g = Graph("approval", S)
        g.node("ask", ask).node("refund", refund)
        g.edge(START, "ask").edge("ask", "refund").edge("refund", END)
        return g.compile()

    def test_refund_after_approval(graph_runtime):
        paused = graph_runtime.trace(build())
        assert paused.status == "interrupted"
        done = graph_runtime.resume_trace(paused.result.run_id, Resume("no"))
        assert done.state.refunded
""")

SECTION = re.compile(r"^-+ graphflow -+$", re.MULTILINE)


def section(result: pytest.RunResult) -> list[str]:
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if SECTION.match(line))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith(("___", "===", "---"))), len(lines))
    return lines[start + 1:end]


def test_the_report_shows_every_leg_of_the_failing_run(graph_project: pytest.Pytester,
                                                       run: Run) -> None:
    graph_project.makepyfile(test_refund=APPROVAL)
    result = run("--graphflow-seed=5", "test_refund.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "last run: run-*, 2 leg(s)",
        "leg 1: run-* of graph 'approval': interrupted, * events",
        "  path: START -> ask",
        "leg 2: run-* of graph 'approval' (resumed): completed, * events",
        "  path: ask -> refund -> END",
        "last events of leg 2 (6 of *):",
        "*run_end completed*",
        "(--graphflow-report=full shows each leg's diagram and more events)",
    ])


def test_the_default_report_is_short_and_full_is_long(graph_project: pytest.Pytester,
                                                      run: Run) -> None:
    graph_project.makepyfile(test_refund=APPROVAL)
    short = section(run("--graphflow-seed=5", "test_refund.py"))
    full = section(run("--graphflow-seed=5", "--graphflow-report=full", "test_refund.py"))

    assert len(short) <= 16
    assert not any("mermaid" in line for line in short)
    assert len(full) > 2 * len(short)
    assert sum(line == "mermaid:" for line in full) == 2  # one diagram per leg
    assert any(line.startswith("events of leg 1") for line in full)


def test_a_bad_report_mode_is_a_usage_error(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_refund=APPROVAL)
    result = run("--graphflow-report=huge", "test_refund.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--graphflow-report: 'huge' is not a report mode; use 'short', 'full' or 'html:DIR'*"])


STORE_FAULT = dedent("""
    from gf_graphs import fan

    def test_rejected(graph_runtime, store_faults):
        store_faults.reject_save(nth=3)
        graph_runtime.trace(fan())
""")


def test_library_frames_are_hidden_from_a_store_fault(graph_project: pytest.Pytester,
                                                      run: Run) -> None:
    graph_project.makepyfile(test_fault=STORE_FAULT)
    result = run("--graphflow-seed=3", "test_fault.py")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "E   pytest_graphflow.errors.StoreFault" in text or "StoreFault" in text
    frames = [line for line in result.stdout.lines if re.match(r"^\S+\.py:\d+: ", line)]
    assert [f for f in frames if "pytest_graphflow" in f or "anyio" in f] == []
    assert any(f.startswith("test_fault.py:") for f in frames)


def test_full_trace_shows_the_library_frames(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_fault=STORE_FAULT)
    result = run("--graphflow-seed=3", "--full-trace", "test_fault.py")
    frames = [line for line in result.stdout.lines if re.match(r"^\S+\.py:\d+: ", line)]
    assert any("pytest_graphflow" in f for f in frames)


LOOP_FAILURE = dedent("""
    import anyio

    async def boom():
        await anyio.sleep(0)
        raise ValueError("boom")

    def test_plain(tmp_path):
        anyio.run(boom)

    def test_graphflow(graph_seed):
        anyio.run(boom)
""")


def test_event_loop_frames_stay_in_tests_that_use_no_graphflow_fixture(
    graph_project: pytest.Pytester, run: Run
) -> None:
    """A test that uses no graphflow fixture or marker keeps its whole traceback; its twin,
    the same test taking ``graph_seed``, loses the event loop's frames."""
    graph_project.makepyfile(test_loop=LOOP_FAILURE)
    result = run("test_loop.py")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    plain = text[text.index("_ test_plain _"):text.index("_ test_graphflow _")]
    ours = text[text.index("_ test_graphflow _"):]
    def loop_frames(section: str) -> list[str]:
        return [line for line in section.splitlines() if re.match(r"^\S+\.py:\d+: ", line)
                and ("anyio" in line or "asyncio" in line)]

    assert loop_frames(plain) != []
    assert loop_frames(ours) == []
    assert "test_loop.py:" in ours


PRIVATE_PATHS = dedent("""
    from gf_graphs import fan

    def test_fixtures_in_a_report(graph_runtime, store_faults, checkpoint_store, virtual_clock):
        trace = graph_runtime.trace(fan())
        assert trace.status == "failed"

    def test_runtime_itself(graph_runtime):
        assert graph_runtime is None
""")


def test_a_failure_report_names_public_classes(graph_project: pytest.Pytester,
                                               run: Run) -> None:
    graph_project.makepyfile(test_reprs=PRIVATE_PATHS)
    result = run("--graphflow-seed=3", "test_reprs.py")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert re.findall(r"pytest_graphflow\._\w+", text) == []
    result.stdout.fnmatch_lines([
        "graph_runtime = RecordingRuntime(seed=*, clock=VirtualClock(start=2025-01-01T00:00:00"
        "+00:00, elapsed=0.0s), store=<FaultyStore over InMemoryCheckpointStore: * call(s)>)",
        "checkpoint_store = InMemoryCheckpointStore(* checkpoint(s))",
        "E       assert RecordingRuntime(seed=*) is None",
    ])


@pytest.mark.parametrize("call", [
    "graph_runtime.trace(fan())",
    "graph_runtime.invoke(fan())",
], ids=["trace", "invoke"])
def test_a_sync_call_in_an_async_test_says_to_await_the_async_twin(
    graph_project: pytest.Pytester, run: Run, call: str
) -> None:
    graph_project.makepyfile(test_async=dedent(f"""
        import pytest
        from gf_graphs import fan

        @pytest.mark.anyio
        async def test_sync_inside(graph_runtime):
            {call}
    """))
    result = run("test_async.py")
    result.assert_outcomes(failed=2)  # asyncio and trio
    result.stdout.fnmatch_lines([
        "*SyncCallInEventLoop: *() starts an event loop of its own, but it was called inside "
        "a running event loop (an async test?): use `await runtime.a*(...)`*",
    ])
    assert "Already running" not in result.stdout.str()


GIVEN_TESTS = {
    "module": """
        from hypothesis import given, strategies as st
        from gf_graphs import fan

        @given(n=st.integers(0, 3))
        def test_n(graph_runtime, n):
            graph_runtime.trace(fan(), {"n": n})

        def test_plain(graph_runtime):
            graph_runtime.trace(fan(), {"n": 1})
    """,
    "class": """
        from hypothesis import given, strategies as st
        from gf_graphs import fan

        class TestIt:
            @given(n=st.integers(0, 3))
            def test_n(self, graph_runtime, n):
                graph_runtime.trace(fan(), {"n": n})

            def test_plain(self, graph_runtime):
                graph_runtime.trace(fan(), {"n": 1})
    """,
}


@pytest.mark.parametrize("where", sorted(GIVEN_TESTS))
def test_graph_runtime_in_a_given_test_points_to_the_factory(graph_project: pytest.Pytester,
                                                             run: Run, where: str) -> None:
    """A ``@given`` test function, or method of a test class, asking for ``graph_runtime``
    is refused with the way out; a plain test beside it is not."""
    body = dedent(GIVEN_TESTS[where])
    graph_project.makepyfile(test_given=body)
    result = run("test_given.py")
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines([
        "*graph_runtime is one runtime per test, but a Hypothesis @given test runs many "
        "examples*graph_runtime_factory*",
    ])
    assert "function_scoped_fixture" not in result.stdout.str()


@pytest.mark.parametrize("profile", ["graphflow-ci", "graphflow-dev", "graphflow-thorough"])
def test_the_plugin_registers_its_hypothesis_profiles(pytester: pytest.Pytester,
                                                      run_subprocess: Run,
                                                      profile: str) -> None:
    pytester.makepyfile(test_profile=dedent("""
        from hypothesis import settings

        def test_profile():
            print("PROFILE", settings.get_current_profile_name(), settings().max_examples)
    """))
    result = run_subprocess(f"--hypothesis-profile={profile}", "-s", "test_profile.py")
    result.assert_outcomes(passed=1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"*PROFILE {profile} *"])
