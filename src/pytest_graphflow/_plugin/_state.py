"""What the plugin keeps per session and per test, and the objects its fixtures build.

Per session (``config.stash``): the :class:`SessionSettings` and the test being run (so the
session-scoped runtime factory knows whose seed to use and who owns what it makes; whether
it is called from a wider fixture's setup is looked up only then, see
:func:`setting_up_wider_fixture`). Per test
(``item.stash``): an :class:`ItemState` with the test's settings and the runs its runtimes
performed, which the failure report draws from.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from ._marker import TestSettings, settings_for
from ._seed import SessionSettings

if TYPE_CHECKING:
    from .._stores._protocol import CheckpointStore
    from .._stores.faults._store import FaultyStore
    from .._time._clock import VirtualClock
    from ._runtime import GraphRuntimeFactory, RecordingRuntime, RunRecording

__all__ = [
    "CURRENT_ITEM",
    "PARTS",
    "RUNNING",
    "SESSION",
    "ItemState",
    "build_factory",
    "clock_for",
    "faults_for",
    "finish_item",
    "fixture_value",
    "in_memory_parts",
    "item_state",
    "parts_overridden",
    "running_item",
    "runtime_for",
    "session_factory",
    "store_for",
]

SESSION: Final = pytest.StashKey[SessionSettings]()
CURRENT_ITEM: Final = pytest.StashKey["pytest.Item | None"]()
ITEM_STATE: Final = pytest.StashKey["ItemState"]()

_KEEP_RUNS: Final = 8  # the report shows every leg a test ran, up to this many


@dataclass
class ItemState:
    """The graphflow side of one test.

    Attributes:
        settings: seed, clock start, store and checkpoint policy of the test.
        session: the session's settings (for the reproduce command).
        runs: the last legs the test's runtimes ran (fixture and factory alike).
        owned: runtimes the session factory made for the test, closed when it ends.
        clock, store, faults: the test's virtual clock, checkpoint store and FaultyStore,
            made on first use by ``graph_runtime`` or the part fixtures.
        runtime: the test's ``graph_runtime`` once made (by the fixture or at the end of
            the test's setup), or ``None``.
        harnesses: the LangGraph harnesses of the recorded legs, kept alive for
            ``--graphflow-processes`` (a leg holds its harness weakly).
        closers: what closes the test's store when it ends (SQLite, PostgreSQL).
        dropped: legs run before the kept ones (not kept).
        record: whether ``--graphflow-record`` asks for the test's runs as history files.
        processes: N of ``--graphflow-processes`` (0: off).
        recorded: every run (leg) of the test, kept while ``record`` or ``processes`` is on.
    """

    settings: TestSettings
    session: SessionSettings
    runs: deque[RunRecording] = field(default_factory=lambda: deque(maxlen=_KEEP_RUNS))
    owned: list[RecordingRuntime] = field(default_factory=list)
    dropped: int = 0
    record: bool = False
    processes: int = 0
    recorded: list[RunRecording] = field(default_factory=list)
    clock: VirtualClock | None = None
    store: CheckpointStore | None = None
    faults: FaultyStore | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    runtime: RecordingRuntime | None = None
    harnesses: list[Any] = field(default_factory=list)

    def observe(self, recording: RunRecording) -> None:
        """Observer given to every runtime made for the test."""
        if len(self.runs) == self.runs.maxlen:
            self.dropped += 1
        self.runs.append(recording)
        if self.record or self.processes:
            self.recorded.append(recording)
            harness = getattr(recording.graph, "harness", None)
            if harness is not None and self.processes:  # replayed after the test's call
                self.harnesses.append(harness)


def item_state(item: pytest.Item) -> ItemState:
    """The graphflow state of ``item``, created on first use (which marks the test as ours)."""
    state = item.stash.get(ITEM_STATE, None)
    if state is None:
        config = item.config
        session = config.stash[SESSION]
        state = ItemState(settings=settings_for(item, session), session=session)
        state.record, state.processes = _keeping(config)
        item.stash[ITEM_STATE] = state
        item.user_properties.append(("graphflow_seed", state.settings.seed))
    return state


_KEEPING: Final = pytest.StashKey["tuple[bool, int]"]()


def _keeping(config: pytest.Config) -> tuple[bool, int]:
    """Whether the session records its tests' runs (``--graphflow-record``) and N of
    ``--graphflow-processes``: read once per session (options do not change in one)."""
    found = config.stash.get(_KEEPING, None)
    if found is None:
        from ._processes import processes_of
        from ._record import record_dir

        found = config.stash[_KEEPING] = (record_dir(config) is not None,
                                          processes_of(config))
    return found


def existing_state(item: pytest.Item) -> ItemState | None:
    """The state of ``item`` if a graphflow fixture or the factory touched it."""
    return item.stash.get(ITEM_STATE, None)


def finish_item(item: pytest.Item) -> None:
    """After a test (its reports made): close its store and the stores the session factory
    opened for it, and let go of what the test ran — its state leaves the item, which pytest
    keeps to the session's end (a session of thousands of tests would otherwise keep every
    test's runtime, store and recorded runs alive, and the collector would walk them all)."""
    state = existing_state(item)
    if state is not None:
        del item.stash[ITEM_STATE]
        state.runtime = None  # (its recorder holds the state: no cycle left behind)
        state.harnesses = []
        owned, state.owned = state.owned, []
        closers, state.closers = state.closers, []
        try:
            for runtime in owned:
                runtime.close()
        finally:
            for close in reversed(closers):
                close()


# ------------------------------------------------------------------------ fixture bodies
#
# ``graph_runtime`` takes no argument (a fixture taking ``request`` costs pytest about 90
# Python calls per test: it builds the ``request`` fixture's definition twice) and builds its
# parts (clock, store, FaultyStore) here, once per test, in the running test's ItemState:
# asking pytest for five fixtures cost more than a small test's run. The part fixtures hand
# out the same objects. A conftest that overrides one of the parts (its own
# ``checkpoint_store``, say) is honoured: the parts are then asked of pytest, as fixtures
# depending on each other (see ``parts_overridden``).

PARTS: Final = ("checkpoint_store", "virtual_clock", "store_faults", "graph_seed")
_PART_SET: Final = frozenset(PARTS)
_OVERRIDDEN: Final = pytest.StashKey["dict[Any, bool]"]()
_FACTORY: Final = pytest.StashKey["GraphRuntimeFactory"]()

RUNNING: list[pytest.Item | None] = [None]
"""The test whose protocol runs (set around each test by the plugin's
``pytest_runtest_protocol``, the outer one restored after a nested session's test)."""


def running_item() -> pytest.Item:
    """The test being run (``graph_runtime`` takes no ``request``)."""
    item = RUNNING[0]
    if item is None:
        raise RuntimeError(
            "graph_runtime was set up outside a running test (no pytest_runtest_protocol is "
            "running); take graph_runtime_factory and call it instead")
    return item


def fixture_value(item: pytest.Item, name: str) -> Any:
    """The value of the fixture ``name`` for ``item``, asked of pytest during its setup."""
    request: Any = getattr(item, "_request", None)
    if request is None:  # pragma: no cover - every pytest Function has one
        raise RuntimeError(f"{item.nodeid}: pytest gives no fixture {name!r} to this item")
    return request.getfixturevalue(name)


def parts_overridden(item: pytest.Item) -> bool:
    """Whether a conftest, module or class overrides one of ``graph_runtime``'s parts for
    this test (or the test parametrizes one directly): then the parts are asked of pytest.
    Read once per module or class."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and not _PART_SET.isdisjoint(callspec.params):
        return True
    seen = item.config.stash.setdefault(_OVERRIDDEN, {})
    parent = item.parent
    found = seen.get(parent)
    if found is None:
        manager: Any = getattr(item.session, "_fixturemanager", None)
        try:
            found = any(len(manager.getfixturedefs(name, item) or ()) > 1 for name in PARTS)
        except Exception:  # pragma: no cover - another pytest: take the safe road
            found = True
        seen[parent] = found
    return found


def clock_for(request: pytest.FixtureRequest) -> VirtualClock:
    """The test's virtual clock (one per test)."""
    return _clock(item_state(request.node))


def _clock(state: ItemState) -> VirtualClock:
    if state.clock is None:
        from .._time._clock import VirtualClock

        state.clock = VirtualClock(state.settings.start)
    return state.clock


def store_for(request: pytest.FixtureRequest) -> CheckpointStore:
    """The test's checkpoint store (one per test): in memory, SQLite in ``tmp_path`` or
    PostgreSQL on a schema of its own; closed (the schema dropped) when the test ends."""
    return _store(item_state(request.node), request.node)


def _store(state: ItemState, item: pytest.Item) -> CheckpointStore:
    if state.store is not None:
        return state.store
    kind = state.settings.store
    store: CheckpointStore
    if kind == "postgres":
        from ._runtime import open_test_postgres_store

        postgres = open_test_postgres_store(item.config.stash[SESSION].postgres_dsn)

        def drop() -> None:
            try:
                postgres.drop()
            finally:
                postgres.close()

        state.closers.append(drop)
        store = postgres
    elif kind == "sqlite":
        from .._stores.sqlite._store import SQLiteCheckpointStore

        tmp_path: Path = fixture_value(item, "tmp_path")
        # A throwaway file: no fsync (a test never survives a power loss anyway).
        sqlite = SQLiteCheckpointStore(tmp_path / "graphflow.db", synchronous="off")
        state.closers.append(sqlite.close)
        store = sqlite
    else:
        from .._stores._memory import InMemoryCheckpointStore

        store = InMemoryCheckpointStore()
    state.store = store
    return store


def faults_for(request: pytest.FixtureRequest) -> FaultyStore:
    """The test's :class:`FaultyStore` over its store, on its clock (one per test)."""
    item = request.node
    return _faults(item_state(item), item, parts_overridden(item))


def _faults(state: ItemState, item: pytest.Item, overridden: bool) -> FaultyStore:
    if state.faults is None:
        from .._stores.faults._store import FaultyStore

        if overridden:
            store: CheckpointStore = fixture_value(item, "checkpoint_store")
            clock: VirtualClock = fixture_value(item, "virtual_clock")
        else:
            store, clock = _store(state, item), _clock(state)
        state.faults = FaultyStore(store, clock=clock)
    return state.faults


def runtime_for(item: pytest.Item) -> RecordingRuntime:
    """The ``graph_runtime`` fixture's runtime: the test's store faults, clock and seed."""
    state = item_state(item)
    if state.clock is None and state.store is None and state.faults is None \
            and state.settings.store == "memory" and not parts_overridden(item):
        return _memory_runtime(state, item)
    from ._runtime import RecordingRuntime

    if parts_overridden(item):
        store: FaultyStore = fixture_value(item, "store_faults")
        clock: VirtualClock = fixture_value(item, "virtual_clock")
        seed: int = fixture_value(item, "graph_seed")
    else:
        store, clock, seed = _faults(state, item, False), _clock(state), state.settings.seed
    runtime = RecordingRuntime(
        store, clock=clock, seed=seed, checkpoint_policy=state.settings.checkpoint_policy,
        observer=state.observe,
    )
    runtime.factory = session_factory(item.config)
    return runtime


def in_memory_parts(item: pytest.Item) -> bool:
    """Whether ``item``'s ``graph_runtime`` runs over the plugin's own parts in memory, as
    far as its static markers tell (the session's store or the ``graphflow`` marker's, no
    overridden part): read without fixing the test's settings, which a fixture may still
    change with a marker before the runtime is made."""
    if parts_overridden(item):
        return False
    from ._marker import _marked, marker_kwargs

    try:  # the store as settings_for reads it
        kwargs = marker_kwargs(item) if _marked(item) else {}
    except Exception:  # a bad marker: the fixture reports it in the setup
        return False
    return bool(kwargs.get("store", item.config.stash[SESSION].store) == "memory")


def _memory_runtime(state: ItemState, item: pytest.Item) -> RecordingRuntime:
    """The common test's runtime: its parts (in memory, the plugin's own) made here, in the
    order the part fixtures make them (one import, not one per part)."""
    from ._runtime import memory_runtime

    runtime = memory_runtime(state.settings, state.observe)
    state.clock, state.faults = runtime.clock, runtime.store  # type: ignore[assignment]
    state.store = state.faults.inner  # type: ignore[union-attr]
    runtime.factory = session_factory(item.config)
    return runtime


def session_factory(config: pytest.Config) -> GraphRuntimeFactory:
    """The session's runtime factory (``graph_runtime_factory``), made on first use; the
    runtimes it made outside any test are closed when the session ends."""
    factory = config.stash.get(_FACTORY, None)
    if factory is None:
        tmp_path_factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
        factory = config.stash[_FACTORY] = build_factory(config, tmp_path_factory)
        config.add_cleanup(factory.close)
    return factory


def build_factory(
    config: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> GraphRuntimeFactory:
    """The session's runtime factory: each call follows the test running at the time."""
    from ._runtime import GraphRuntimeFactory

    class PluginFactory(GraphRuntimeFactory):
        """Defaults come from the running test: its seed, marker, store; runs are reported."""

        def defaults(self) -> dict[str, Any]:
            state = self._state()
            if state is None:  # called outside a test (a session fixture, say)
                session = config.stash[SESSION]
                return {"seed": session.seed, "start": None, "store": session.store,
                        "checkpoint_policy": None}
            s = state.settings
            return {"seed": s.seed, "start": s.start, "store": s.store,
                    "checkpoint_policy": s.checkpoint_policy}

        def __call__(self, **kwargs: Any) -> RecordingRuntime:
            runtime = super().__call__(**kwargs)
            state = self._state()
            if state is not None:  # the test owns it: its stores close when the test ends
                runtime.add_observer(state.observe)
                if runtime in self._open:
                    self._open.remove(runtime)
                    state.owned.append(runtime)
            return runtime

        def _state(self) -> ItemState | None:
            """The running test's state, unless the caller belongs to the session.

            A test's body and its function-scoped fixtures belong to the test; a wider
            fixture set up on the way (a session fixture, say) does not: it gets the session
            seed, and its stores stay open until the session ends.
            """
            item = config.stash.get(CURRENT_ITEM, None)
            if item is None or setting_up_wider_fixture():
                return None
            return item_state(item)

    return PluginFactory(sqlite_dir=lambda: tmp_path_factory.mktemp("graphflow-store"),
                         postgres_dsn=config.stash[SESSION].postgres_dsn)


def _fixture_call_code() -> Any:
    """The code of pytest's ``call_fixture_func`` (every fixture function runs under it), or
    ``None`` in a pytest without it."""
    from _pytest import fixtures

    call = getattr(fixtures, "call_fixture_func", None)
    return getattr(call, "__code__", None)


_CALL_FIXTURE: Final = _fixture_call_code()


def setting_up_wider_fixture() -> bool:
    """Whether the caller runs inside the setup of a fixture wider than a function's (the
    innermost fixture being set up is session-, package-, module- or class-scoped): its
    runtimes then belong to the session, not to the running test.

    Looked up on the stack when the factory is called (no hook around every fixture's setup
    of every test: that cost about a dozen Python calls per fixture, ours or not).
    """
    if _CALL_FIXTURE is None:  # pragma: no cover - another pytest: the test owns it
        return False
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _CALL_FIXTURE:
            request = frame.f_locals.get("request")
            return getattr(request, "scope", "function") != "function"
        frame = frame.f_back  # type: ignore[assignment]
    return False
