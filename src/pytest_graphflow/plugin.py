"""The pytest plugin of pytest-graphflow (entry point ``pytest11``; disable with
``-p no:graphflow``).

Fixtures (all function-scoped except the factory, which is session-scoped):

* ``graph_seed``: the test's seed, ``(session seed + crc32(node id)) % 2**32`` unless
  ``@pytest.mark.graphflow(seed=...)`` fixes it; a test that takes a snapshot
  (``graph_snapshot`` or syrupy's ``snapshot``) has ``crc32(node id)``, the same every session;
* ``virtual_clock``: a :class:`VirtualClock` at the marker's ``start`` (or the default);
* ``checkpoint_store``: an in-memory store, or a SQLite store in ``tmp_path`` with
  ``store="sqlite"`` (marker, ``--graphflow-store`` or the ``graphflow_store`` ini key);
* ``store_faults``: a :class:`FaultyStore` over ``checkpoint_store``;
* ``graph_runtime``: a deterministic runtime over ``store_faults``, on ``virtual_clock``, with
  ``graph_seed``; ``graph_runtime.trace(graph, input)`` / ``await graph_runtime.atrace(...)``;
* ``graph_runtime_factory``: fresh runtimes on demand, one per Hypothesis example (being
  session-scoped it does not trip the ``function_scoped_fixture`` health check);
* ``graph_snapshot``: syrupy's ``snapshot`` storing event streams as readable text.

Options ``--graphflow-seed`` (an int, ``random``, or ``last`` for the previous session's)
and ``--graphflow-store``, with the ini keys ``graphflow_seed`` and ``graphflow_store``;
``--graphflow-record=DIR`` writes every run of a test as a history file and
``--graphflow-replay=DIR`` runs each history file under DIR as a replay test. A
failing test that used these fixtures gets a ``graphflow`` report section with its seed, the
command that reproduces it, every leg it ran with its path, and the last leg's last events
(``--graphflow-report=full``: each leg's Mermaid diagram and events;
``--graphflow-report=html:DIR``: also an HTML page per failing test). pytest-graphflow's own
frames are hidden from tracebacks (``--full-trace`` shows them). ``--hypothesis-profile=
graphflow-ci`` (``-dev``, ``-thorough``) works without registering the profiles first.

The heavy pieces (syrupy, Hypothesis, the assertion helpers) are imported only by the fixtures
and hooks that need them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import pytest

# Before anything imports it, so that its ``assert`` statements get pytest's rewriting. When
# the package's ``__init__`` has imported it already (it re-exports ``assert_events``), it is
# too late: registering would only warn (an error under ``-W error``). Installed through the
# entry point, pytest marks the whole distribution for rewriting before importing us anyway.
if "pytest_graphflow.assertions" not in sys.modules:
    pytest.register_assert_rewrite("pytest_graphflow.assertions")

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion

    from ._plugin._runtime import GraphRuntimeFactory, RecordingRuntime
    from ._stores._protocol import CheckpointStore
    from ._stores.faults._store import FaultyStore
    from ._time._clock import VirtualClock

__all__ = [
    "checkpoint_store",
    "graph_runtime",
    "graph_runtime_factory",
    "graph_seed",
    "graph_snapshot",
    "store_faults",
    "virtual_clock",
]


# --------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """``--graphflow-seed``, ``--graphflow-store``, ``--graphflow-postgres-dsn`` (each with its
    ini key) and ``--graphflow-report``."""
    if not pluginmanager.has_plugin("graphflow-hypothesis-profiles"):
        pluginmanager.register(_HypothesisProfiles(), "graphflow-hypothesis-profiles")
    group = parser.getgroup("graphflow", "graphflow (deterministic graph runs)")
    group.addoption(
        "--graphflow-seed", dest="graphflow_seed", default=None, metavar="SEED",
        help="session seed (an integer from 0 to 2**32-1, 'random', or 'last' for the "
             "previous session's); each test's seed is "
             "derived from it and the test's node id (a test that takes a snapshot: from its "
             "node id alone). Default: the graphflow_seed ini key, "
             "else random (printed in the header).",
    )
    group.addoption(
        "--graphflow-store", dest="graphflow_store", default=None, metavar="STORE",
        help="checkpoint store of the graphflow fixtures: 'memory' (default), 'sqlite' "
             "(a file in the test's tmp_path) or 'postgres' (a schema of its own per test on "
             "the server of --graphflow-postgres-dsn, dropped afterwards).",
    )
    group.addoption(
        "--graphflow-postgres-dsn", dest="graphflow_postgres_dsn", default=None, metavar="DSN",
        help="PostgreSQL server of the 'postgres' store (a libpq connection string or URI). "
             "Default: the graphflow_postgres_dsn ini key, else $GRAPHFLOW_POSTGRES_DSN.",
    )
    group.addoption(
        "--graphflow-report", dest="graphflow_report", default="short",
        type=_report_option, metavar="short|full|html:DIR",
        help="the graphflow section of a failing test's report: 'short' (default: every leg "
             "in a line, the last leg's last events), 'full' (each leg's Mermaid diagram "
             "and events) or 'html:DIR' (short, and a self-contained HTML page per failing "
             "test in DIR: graph, timeline, state diffs, events; two runs side by side for a "
             "divergence).",
    )
    group.addoption(
        "--graphflow-progress", dest="graphflow_progress", default=None,
        type=_progress_option, metavar="auto|lines|live|none",
        help="progress of long checks (explore, crash sweeps, store conformance, "
             "cross-process checks) during a test: 'lines' (a line per finished phase), "
             "'live' (a counter on the terminal), 'none', or 'auto' (default: lines under "
             "-v, live on a terminal, none under -q, on a pipe or with CI set). Default: the "
             "graphflow_progress ini key, else auto.",
    )
    group.addoption(
        "--graphflow-record", dest="graphflow_record", default=None, metavar="DIR",
        help="write every run of every test that uses the graphflow fixtures to "
             "DIR/<test>/<run id>.history.json (replay them with --graphflow-replay).",
    )
    group.addoption(
        "--graphflow-replay", dest="graphflow_replay", default=None, metavar="DIR",
        help="run every *.history.json file under DIR as a test that replays the recorded "
             "run against the current code.",
    )
    group.addoption(
        "--graphflow-processes", dest="graphflow_processes", default=None, metavar="N",
        help="after each test, replay every run it performed in N fresh interpreters with "
             "PYTHONHASHSEED 1..N and fail on any difference (hash-order dependence).",
    )
    parser.addini("graphflow_processes", "graphflow: replay each test's runs in this many "
                  "fresh interpreters (see --graphflow-processes)", default="")
    parser.addini("graphflow_progress", "graphflow: progress of long checks: auto, lines, "
                  "live or none (see --graphflow-progress)", default="")
    parser.addini("graphflow_record", "graphflow: folder to record run histories into",
                  default="")
    parser.addini("graphflow_replay_graphs", "graphflow: lines 'graph_id = module:attr' "
                  "naming the graph of replayed histories", type="linelist", default=[])
    parser.addini("graphflow_seed", "graphflow session seed: an integer or 'random'",
                  default="")
    parser.addini("graphflow_store",
                  "graphflow checkpoint store: 'memory', 'sqlite' or 'postgres'",
                  default="memory")
    parser.addini("graphflow_postgres_dsn",
                  "graphflow: PostgreSQL server (DSN) of the 'postgres' store", default="")


def _progress_option(value: str) -> str:
    from ._plugin._progress import progress_option

    return progress_option(value)


def _report_option(value: str) -> str:
    from ._plugin._html_report import report_option

    return report_option(value)


class _HypothesisProfiles:
    """Registers the ``graphflow-*`` profiles before Hypothesis' own plugin loads
    ``--hypothesis-profile=...`` (only when one of them is asked for), so no conftest
    boilerplate is needed. A hook object of its own: the plugin's ``pytest_configure`` must
    run after the cache provider's, this one before Hypothesis'."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        profile = config.getoption("hypothesis_profile", None)
        if isinstance(profile, str) and profile.startswith("graphflow-"):
            from ._properties.strategies._profiles import register_profiles

            register_profiles()


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker, resolve the session seed once, hook into xdist if present."""
    from ._plugin._marker import MARKER_HELP
    from ._plugin._seed import XdistHooks, remember_seed, resolve_session
    from ._plugin._state import SESSION

    config.addinivalue_line("markers", MARKER_HELP)
    session = resolve_session(config)
    config.stash[SESSION] = session
    remember_seed(config, session.seed)
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(XdistHooks(session.seed, config), "graphflow-xdist")
    from ._plugin._html_report import html_dir
    from ._plugin._processes import processes_of
    from ._plugin._record import record_dir

    # processes_of: a bad value is a usage error before any test runs
    if processes_of(config) or record_dir(config) is not None or html_dir(config) is not None:
        config.pluginmanager.register(_RunHooks(), "graphflow-run-hooks")
    from ._plugin._progress import ProgressPrinter, progress_mode

    progress_mode(config)  # a bad ini value is a usage error before any test runs
    config.pluginmanager.register(ProgressPrinter(config), "graphflow-progress")
    if config.getoption("graphflow_replay", None):
        from ._plugin._replay_items import replay_dir

        folder = replay_dir(config)
        here = Path(config.invocation_params.dir)
        given = {(here / arg.split("::")[0]).resolve() for arg in config.args}
        if folder is not None and not any(p == folder.resolve() or p in folder.resolve().parents
                                          for p in given):
            config.args.append(str(folder))


def pytest_collect_file(file_path: Any, parent: pytest.Collector) -> pytest.Collector | None:
    """With ``--graphflow-replay=DIR``, each ``*.history.json`` under DIR is a replay test."""
    if not file_path.name.endswith(".history.json"):
        return None
    if not parent.config.getoption("graphflow_replay", None):
        return None
    from ._plugin._replay_items import HistoryFile, replay_dir

    folder = replay_dir(parent.config)
    if folder is None or folder not in file_path.parents:
        return None
    return HistoryFile.from_parent(parent, path=file_path)


def pytest_report_header(config: pytest.Config) -> str | None:
    """``graphflow: session seed N (reproduce with --graphflow-seed=N)``."""
    from ._plugin._state import SESSION

    session = config.stash.get(SESSION, None)
    if session is None:  # pragma: no cover - configure always ran
        return None
    seed = session.seed
    return f"graphflow: session seed {seed} (reproduce with --graphflow-seed={seed})"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every ``graphflow`` marker before any test runs (a typo is a usage error)."""
    from ._plugin._marker import settings_for
    from ._plugin._state import SESSION

    session = config.stash[SESSION]
    for item in items:
        if item.get_closest_marker("graphflow") is not None:
            settings_for(item, session)


# --------------------------------------------------------------------------- running


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Know which test is running (for the session-scoped factory); clean up after it."""
    from ._plugin._state import CURRENT_ITEM, RUNNING, finish_item

    item.config.stash[CURRENT_ITEM] = item
    outer, RUNNING[0] = RUNNING[0], item
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and "graph_runtime" in info.argnames:
        _prefill_runtime(item, info)
    try:
        return (yield)
    finally:
        RUNNING[0] = outer
        item.config.stash[CURRENT_ITEM] = None
        finish_item(item)


_GRAPH_FIXTURES = frozenset({"graph_runtime", "graph_runtime_factory"})
_OUR_FIXTURES = frozenset(__all__)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """On an xdist worker, hand the ``--graphflow-processes`` counts to the controller."""
    if hasattr(session.config, "workeroutput"):
        from ._plugin._processes import hand_counts_over

        hand_counts_over(session.config)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """How many runs ``--graphflow-processes`` checked, and how many it could not (under
    xdist: on the controller, from every worker's counts); how many pages
    ``--graphflow-report=html:DIR`` wrote, and where."""
    from ._plugin._html_report import html_dir, pages_of
    from ._plugin._processes import COUNTS, skip_lines

    folder = html_dir(config)
    if folder is not None:
        pages = pages_of(terminalreporter.stats.get("failed", []))
        terminalreporter.write_line(
            f"graphflow: {len(pages)} HTML page(s) of failing tests in {folder}")
    counts = config.stash.get(COUNTS, None)
    if counts is not None:
        terminalreporter.write_line(
            f"graphflow: {counts['checked']} run(s) replayed in fresh interpreters, "
            f"{counts['skipped']} skipped" + (", because:" if counts["skipped"] else ""))
        for line in skip_lines(config):
            terminalreporter.write_line(line)


class _RunHooks:
    """The hooks around each test's call and teardown that only ``--graphflow-record``,
    ``--graphflow-processes`` and ``--graphflow-report=html:DIR`` need: registered only when
    one of them is on (a hook costs every test of the session, ours or not)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """With ``--graphflow-record=DIR``, write the test's runs as history files before its
        fixtures close their stores."""
        from ._plugin._state import existing_state

        state = existing_state(item)
        if state is None or not state.recorded:
            return
        from ._plugin._record import record_dir, write_histories

        folder = record_dir(item.config)
        legs, state.recorded = state.recorded, []
        if folder is not None and state.record:
            write_histories(item, legs, folder, state.settings.checkpoint_policy)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        """With ``--graphflow-processes=N``, replay a passing test's runs in N fresh interpreters.
        (The wall-clock patch needs no holding per test: it costs about a microsecond per run.)
        With ``--graphflow-report=html:DIR``, keep the runs the test's checkers found different."""
        from ._plugin._html_report import html_dir

        if html_dir(item.config) is not None:
            from ._plugin._html_report import PAIRS
            from ._properties.runs._pairs import watching

            pairs = item.stash.setdefault(PAIRS, [])
            with watching(pairs.append):
                result = yield
        elif _GRAPH_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())):
            return (yield)
        else:
            result = yield
        # --graphflow-processes=N: the passing test's runs are replayed in N fresh interpreters.
        from ._plugin._state import existing_state

        state = existing_state(item)
        if state is not None and state.processes and state.recorded:
            from ._plugin._processes import check_runs

            check_runs(item, list(state.recorded), state.processes)
        return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Add the ``graphflow`` section to a failing report of a test that used our fixtures;
    hide pytest-graphflow's own frames (and the event loop's under them) from its traceback
    unless ``--full-trace``, only in tests that use a graphflow fixture or marker (another
    test's event loop frames may be what explains its failure)."""
    if (call.excinfo is not None and not item.config.getoption("fulltrace", False)
            and _uses_graphflow(item)):
        from ._plugin._frames import hide_library_frames

        hide_library_frames(item)
    report = yield
    if report.failed:
        from ._plugin._html_report import PAGE_LINE, PAIRS, html_dir
        from ._plugin._state import existing_state

        state = existing_state(item)
        folder = html_dir(item.config)
        pairs = item.stash.get(PAIRS, [])
        text: list[str] = []
        if state is not None:
            from ._plugin._colour import colour_section
            from ._plugin._report import failure_section

            mode = item.config.getoption("graphflow_report", "short") or "short"
            text.append(colour_section(
                failure_section(item, state, "full" if mode == "full" else "short"),
                item.config))
        if folder is not None and (pairs or (state is not None and state.runs)):
            from ._plugin._html_report import write_page

            try:
                page = write_page(item, state, pairs, folder)
                text.append(f"{PAGE_LINE}{page}")
            except Exception as exc:  # a report must never hide the test's own failure
                text.append(f"html page: not written ({type(exc).__name__}: {exc})")
        if text:
            report.sections.append(("graphflow", "\n".join(text)))
    return report


def _uses_graphflow(item: pytest.Item) -> bool:
    """Whether ``item`` takes a graphflow fixture (directly or through another fixture), carries
    the ``graphflow`` marker, or made a graphflow runtime (``graph_runtime_factory`` in a
    fixture counts)."""
    from ._plugin._state import existing_state

    return (not _OUR_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
            or item.get_closest_marker("graphflow") is not None
            or existing_state(item) is not None)


def pytest_assertrepr_compare(
    config: pytest.Config, op: str, left: object, right: object
) -> list[str] | None:
    """Explain ``==`` between event sequences (first divergent event, in a window), coloured
    when pytest colours (``--color``, ``NO_COLOR``)."""
    from ._assert._repr import graphflow_assertrepr_compare

    lines = graphflow_assertrepr_compare(op, left, right)
    if lines is None:
        return None
    from ._plugin._colour import colour_diff

    return [lines[0], *colour_diff(lines[1:], config)]


# --------------------------------------------------------------------------- fixtures


_ShownT = TypeVar("_ShownT")


def _shown(value: _ShownT) -> _ShownT:
    """``value``, with the classes of the modules imported so far shown under their public
    module (``pytest_graphflow.testing.RecordingRuntime`` in a failing test's repr)."""
    global _modules_shown
    if len(sys.modules) != _modules_shown:  # a module imported since: show its names
        from . import testing
        from ._exports import show_loaded

        del testing  # importing it shows its names
        show_loaded()
        _modules_shown = len(sys.modules)
    return value


_modules_shown = 0  # how many modules were loaded when _shown last showed their names


@pytest.fixture
def graph_seed(request: pytest.FixtureRequest) -> int:
    """The test's seed: derived from the session seed and the node id, or the marker's."""
    from ._plugin._state import item_state

    return item_state(request.node).settings.seed


@pytest.fixture
def virtual_clock(request: pytest.FixtureRequest) -> VirtualClock:
    """A :class:`VirtualClock` at the marker's ``start`` (default: ``DEFAULT_START``)."""
    from ._plugin._state import clock_for

    return _shown(clock_for(request))


@pytest.fixture
def checkpoint_store(request: pytest.FixtureRequest) -> CheckpointStore:
    """The test's checkpoint store: in memory, or SQLite in ``tmp_path`` (``store="sqlite"``),
    closed when the test ends."""
    from ._plugin._state import store_for

    return _shown(store_for(request))


@pytest.fixture
def store_faults(request: pytest.FixtureRequest) -> FaultyStore:
    """A :class:`FaultyStore` over ``checkpoint_store``: ``reject_save``, ``fail``, ``delay``,
    ``crash_at`` and the ``.calls`` log. ``graph_runtime`` runs over this store."""
    from ._plugin._state import faults_for

    return _shown(faults_for(request))


@pytest.fixture
def graph_runtime() -> RecordingRuntime:
    """The deterministic runtime of the test (``store_faults``, ``virtual_clock``,
    ``graph_seed``). In a Hypothesis ``@given`` test use ``graph_runtime_factory`` instead."""
    from ._plugin._state import running_item

    item = running_item()  # not ``request``: taking it costs pytest ~90 calls a test
    if _hypothesis_test(item):
        pytest.fail(
            "graph_runtime is one runtime per test, but a Hypothesis @given test runs many "
            "examples: they would share its clock, store and runs. Take "
            "graph_runtime_factory instead and call it once per example "
            "(runtime = graph_runtime_factory())", pytrace=False)
    return _test_runtime(item)


def _test_runtime(item: pytest.Item) -> RecordingRuntime:
    """The test's runtime, made once: by the fixture (asked by pytest, another fixture or
    ``request.getfixturevalue``) or, for a test handed it without the fixture's machinery
    (:func:`_prefill_runtime`), at the end of its setup."""
    from ._plugin._state import item_state, runtime_for

    state = item_state(item)
    if state.runtime is None:
        state.runtime = _shown(runtime_for(item))
    return state.runtime


def _hypothesis_test(item: pytest.Item) -> bool:
    """Whether ``item`` is a Hypothesis ``@given`` test."""
    # The test's function as pytest holds it (``item.function`` is a property over a property:
    # three calls a test); a method of a class forwards the flag from its function.
    function = getattr(item, "_obj", None) or getattr(item, "function", None)
    return bool(getattr(function, "is_hypothesis_test", False))


class _Pending:
    """What a test's ``graph_runtime`` argument holds from the start of its protocol to the
    end of its setup, when :func:`_prefill_runtime` took it from pytest's fixtures."""

    def __repr__(self) -> str:
        return "<graph_runtime: made at the end of the test's setup>"


_PENDING: Final = _Pending()


def _prefill_runtime(item: pytest.Item, info: Any) -> None:
    """Take a test's ``graph_runtime`` argument from pytest's fixture machinery when nothing
    asks for it: ``graph_runtime`` is the plugin's own (not overridden), its parts are the
    plugin's and in memory, and neither ``--setup-show`` nor ``--setup-plan`` lists fixtures.
    pytest then sets up no ``graph_runtime`` fixture for the test (its lookup, setup hooks
    and finalizer cost ~170 Python calls a test, a fifth of a small test's whole cost): the
    argument holds :data:`_PENDING` until the end of the test's setup, when
    :func:`pytest_runtest_setup` makes the runtime — after every other fixture, so a marker
    a fixture applies (``request.applymarker(pytest.mark.graphflow(seed=5))``) is read as
    before. A fixture or ``request.getfixturevalue`` asking for ``graph_runtime`` in the
    setup gets the runtime the test then gets."""
    defs = info.name2fixturedefs.get("graph_runtime")
    if not defs or len(defs) != 1 or getattr(defs[0].func, "__module__", None) != __name__:
        return
    option = item.config.option
    if getattr(option, "setupshow", False) or getattr(option, "setupplan", False):
        return
    funcargs = getattr(item, "funcargs", None)
    if type(funcargs) is not dict or "graph_runtime" in funcargs or _hypothesis_test(item):
        return
    from ._plugin._state import in_memory_parts

    if in_memory_parts(item):
        funcargs["graph_runtime"] = _PENDING


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """At the end of a test's setup, the runtime :func:`_prefill_runtime` left pending (a
    runtime that cannot be made fails the setup, as the fixture's would)."""
    result = yield
    funcargs = getattr(item, "funcargs", None)
    if funcargs is not None and funcargs.get("graph_runtime") is _PENDING:
        funcargs["graph_runtime"] = _test_runtime(item)
    return result


@pytest.fixture(scope="session")
def graph_runtime_factory(pytestconfig: pytest.Config) -> GraphRuntimeFactory:
    """Call it for a fresh runtime (new clock, store and the running test's seed), e.g. once
    per Hypothesis example: ``runtime = graph_runtime_factory()``. ``.seed`` is the running
    test's seed (``graph_seed`` itself is function-scoped, which ``@given`` refuses)."""
    from ._plugin._state import session_factory

    return _shown(session_factory(pytestconfig))


@pytest.fixture
def graph_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """syrupy's ``snapshot`` with :class:`GraphEventsExtension`: event streams as text."""
    from ._assert._snapshot import graph_snapshot_fixture

    return graph_snapshot_fixture(snapshot)
