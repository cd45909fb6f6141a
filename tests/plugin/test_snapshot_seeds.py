"""Snapshots of seeded values stay valid from one pytest run to the next: a test that takes a
snapshot fixture (``graph_snapshot``, or syrupy's ``snapshot``) gets a seed derived from its
node id alone, not from the session seed; ``graph_snapshot(exclude=...)`` reaches into nested
state. Each case has a passing twin or a failing control."""

from __future__ import annotations

import re
import sys
import zlib

import pytest
from graphflow_plugin_helpers import Run, dedent, seeds_of

# A user's app: ids drawn with ctx.uuid(), a nested model holding one of them.
APP = '''
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph


class Meta(BaseModel):
    request_id: str = ""
    source: str = ""


class Order(BaseModel):
    amount: int = 0
    order_id: str = ""
    meta: Meta = Meta()
    lines: list[dict] = []


def place(state, ctx):
    return {"order_id": str(ctx.uuid()),
            "meta": {"request_id": str(ctx.uuid()), "source": state.meta.source},
            "lines": [{"sku": "a", "trace": str(ctx.uuid())}]}


g = Graph("orders", Order)
g.node("place", place)
g.edge(START, "place").edge("place", END)
ORDERS = g.compile()
'''

SUITE = dedent('''
    import pytest
    from {app} import ORDERS

    def test_events(graph_runtime, graph_snapshot, graph_seed, request):
        print(f"\\nSEED {{request.node.nodeid}} {{graph_seed}}")
        assert graph_runtime.trace(ORDERS, {{"amount": 3}}).events == graph_snapshot

    @pytest.mark.parametrize("amount", [1, 2])
    def test_state_with_syrupy(graph_runtime, snapshot, graph_seed, request, amount):
        print(f"\\nSEED {{request.node.nodeid}} {{graph_seed}}")
        assert graph_runtime.trace(ORDERS, {{"amount": amount}}).state.model_dump() == snapshot

    def test_no_snapshot(graph_runtime, graph_seed, request):
        print(f"\\nSEED {{request.node.nodeid}} {{graph_seed}}")
        assert graph_runtime.trace(ORDERS).status == "completed"
''')


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # test files change between runs
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)  # the inner session is not an xdist worker
    pytester.syspathinsert()
    return pytester


def _suite(project: pytest.Pytester, app: str) -> None:
    # Replay workers outlive an inner session: each case has its own module name.
    project.makepyfile(**{app: APP, "test_orders": SUITE.format(app=app)})


def _session_seed(result: pytest.RunResult) -> int:
    found = re.search(r"^graphflow: session seed (\d+)", result.stdout.str(), re.MULTILINE)
    assert found is not None
    return int(found[1])


def test_snapshots_of_seeded_ids_pass_run_after_run(project: pytest.Pytester, run: Run) -> None:
    _suite(project, "snap_orders_runs")
    run("--snapshot-update", "-s").assert_outcomes(passed=4)
    snapshots = sorted(p.name for p in (project.path / "__snapshots__").rglob("*") if p.is_file())
    assert snapshots == ["test_events.events.txt", "test_orders.ambr"]
    seeds: list[dict[str, int]] = []
    sessions: set[int] = set()
    for _ in range(3):  # three sessions, each with its own random session seed
        again = run("-s")
        again.assert_outcomes(passed=4)
        seeds.append(seeds_of(again))
        sessions.add(_session_seed(again))
    assert len(sessions) == 3
    snapshot_tests = {node: seed for node, seed in seeds[0].items() if "no_snapshot" not in node}
    assert snapshot_tests == {node: zlib.crc32(node.encode()) for node in snapshot_tests}
    assert all({n: s[n] for n in snapshot_tests} == snapshot_tests for s in seeds)
    # The twin: a test without a snapshot keeps its session-derived seed.
    assert len({s["test_orders.py::test_no_snapshot"] for s in seeds}) == 3


def test_the_same_snapshots_pass_under_xdist_and_in_fresh_interpreters(
    project: pytest.Pytester, run: Run
) -> None:
    pytest.importorskip("xdist")
    _suite(project, "snap_orders_spread")
    run("--snapshot-update").assert_outcomes(passed=4)
    run("-n", "2").assert_outcomes(passed=4)
    processes = run("--graphflow-processes=2")
    processes.assert_outcomes(passed=4)
    processes.stdout.fnmatch_lines(["graphflow: 4 run(s) replayed in fresh interpreters, 0 "
                                    "skipped*"])


def test_a_marker_seed_and_the_session_seed_option_still_work(project: pytest.Pytester,
                                                              run: Run) -> None:
    project.makepyfile(test_pinned=dedent("""
        import pytest

        @pytest.mark.graphflow(seed=7)
        def test_pinned(graph_seed, graph_snapshot, request):
            print(f"\\nSEED {request.node.nodeid} {graph_seed}")

        def test_snapshot(graph_seed, graph_snapshot, request):
            print(f"\\nSEED {request.node.nodeid} {graph_seed}")

        def test_plain(graph_seed, request):
            print(f"\\nSEED {request.node.nodeid} {graph_seed}")
    """))
    result = run("-s", "--graphflow-seed=1000")
    result.assert_outcomes(passed=3)
    assert seeds_of(result) == {
        "test_pinned.py::test_pinned": 7,
        "test_pinned.py::test_snapshot": zlib.crc32(b"test_pinned.py::test_snapshot"),
        "test_pinned.py::test_plain": (1000 + zlib.crc32(b"test_pinned.py::test_plain")) % 2**32,
    }


def test_the_failure_report_says_where_a_snapshot_tests_seed_comes_from(
    project: pytest.Pytester, run: Run
) -> None:
    project.makepyfile(test_fails=dedent("""
        def test_snapshot(graph_runtime, graph_snapshot):
            assert graph_runtime.seed == -1
    """))
    result = run("--graphflow-seed=5")
    result.assert_outcomes(failed=1)
    seed = zlib.crc32(b"test_fails.py::test_snapshot")
    result.stdout.fnmatch_lines([
        f"seed: {seed} (crc32 of the node id: the test takes a snapshot, so the session seed "
        "does not change it)",
        "reproduce: pytest test_fails.py::test_snapshot",
    ])


NESTED = dedent('''
    from syrupy.filters import paths, props
    from {app} import ORDERS

    def test_nested(graph_runtime, graph_snapshot):
        trace = graph_runtime.trace(ORDERS, {{"meta": {{"source": "{source}"}}}})
        assert trace.events == graph_snapshot(exclude={exclude})
''')


@pytest.mark.parametrize(("exclude", "hidden", "request_id_kept"), [
    ('paths("3.patch.meta.source", "6.state.meta.source")', True, True),
    ('props("source")', True, True),
    ('paths("3.patch.meta", "6.state.meta")', True, False),
    ('props("request_id")', False, False),
], ids=["nested-path", "nested-prop", "nested-model", "twin-other-field"])
def test_exclude_reaches_nested_state(project: pytest.Pytester, run: Run, exclude: str,
                                      hidden: bool, request_id_kept: bool) -> None:
    project.makepyfile(snap_orders_nested=APP)
    project.makepyfile(test_nested=NESTED.format(app="snap_orders_nested", source="web",
                                                 exclude=exclude))
    run("--snapshot-update").assert_outcomes(passed=1)
    stored = project.path / "__snapshots__" / "test_nested" / "test_nested.events.txt"
    text = stored.read_text(encoding="utf-8")
    assert ('"source"' in text) is not hidden
    assert ("request_id" in text) is request_id_kept
    # Only the excluded nested value changes: the snapshot still matches, unless it was kept.
    project.makepyfile(test_nested=NESTED.format(app="snap_orders_nested", source="mobile",
                                                 exclude=exclude))
    changed = run()
    if hidden:
        changed.assert_outcomes(passed=1)
    else:
        changed.assert_outcomes(failed=1)
        changed.stdout.fnmatch_lines(["*mobile*"])
