"""What the plugin keeps per session and per test, and the objects its fixtures build.

Per session (``config.stash``): the :class:`SessionSettings`, the test being run and the
scopes of the fixtures being set up (so the session-scoped runtime factory knows whose seed
to use and who owns what it makes). Per test
(``item.stash``): an :class:`ItemState` with the test's settings and the runs its runtimes
performed, which the failure report draws from.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from ._marker import TestSettings, settings_for
from ._seed import SessionSettings

if TYPE_CHECKING:
    from .._stores._faulty import FaultyStore
    from .._stores._protocol import CheckpointStore
    from .._time._clock import VirtualClock
    from ._runtime import GraphRuntimeFactory, RecordingRuntime, RunRecording

__all__ = [
    "CURRENT_ITEM",
    "FIXTURE_SCOPES",
    "SESSION",
    "ItemState",
    "build_checkpoint_store",
    "build_clock",
    "build_factory",
    "build_runtime",
    "build_store_faults",
    "finish_item",
    "item_state",
]

SESSION: Final = pytest.StashKey[SessionSettings]()
CURRENT_ITEM: Final = pytest.StashKey["pytest.Item | None"]()
FIXTURE_SCOPES: Final = pytest.StashKey[list[str]]()  # scopes of fixtures being set up
ITEM_STATE: Final = pytest.StashKey["ItemState"]()

_KEEP_RUNS: Final = 5  # the report shows the last run; a few more for context


@dataclass
class ItemState:
    """The graphflow side of one test.

    Attributes:
        settings: seed, clock start, store and checkpoint policy of the test.
        session: the session's settings (for the reproduce command).
        runs: the last runs the test's runtimes performed (fixture and factory alike).
        owned: runtimes the session factory made for the test, closed when it ends.
        record: whether ``--graphflow-record`` asks for the test's runs as history files.
        processes: N of ``--graphflow-processes`` (0: off).
        recorded: every run (leg) of the test, kept while ``record`` or ``processes`` is on.
    """

    settings: TestSettings
    session: SessionSettings
    runs: deque[RunRecording] = field(default_factory=lambda: deque(maxlen=_KEEP_RUNS))
    owned: list[RecordingRuntime] = field(default_factory=list)
    record: bool = False
    processes: int = 0
    recorded: list[RunRecording] = field(default_factory=list)

    def observe(self, recording: RunRecording) -> None:
        """Observer given to every runtime made for the test."""
        self.runs.append(recording)
        if self.record or self.processes:
            self.recorded.append(recording)


def item_state(item: pytest.Item) -> ItemState:
    """The graphflow state of ``item``, created on first use (which marks the test as ours)."""
    state = item.stash.get(ITEM_STATE, None)
    if state is None:
        session = item.config.stash[SESSION]
        state = ItemState(settings=settings_for(item, session), session=session)
        from ._record import record_dir

        state.record = record_dir(item.config) is not None
        from ._processes import processes_of

        state.processes = processes_of(item.config)
        item.stash[ITEM_STATE] = state
        item.user_properties.append(("graphflow_seed", state.settings.seed))
    return state


def existing_state(item: pytest.Item) -> ItemState | None:
    """The state of ``item`` if a graphflow fixture or the factory touched it."""
    return item.stash.get(ITEM_STATE, None)


def finish_item(item: pytest.Item) -> None:
    """After a test: close the stores the session factory opened for it (SQLite)."""
    state = existing_state(item)
    if state is not None:
        owned, state.owned = state.owned, []
        for runtime in owned:
            runtime.close()


# ------------------------------------------------------------------------ fixture bodies


def build_clock(state: ItemState) -> VirtualClock:
    """The test's virtual clock."""
    from .._time._clock import VirtualClock

    return VirtualClock(state.settings.start)


def build_checkpoint_store(
    state: ItemState, request: pytest.FixtureRequest
) -> Iterator[CheckpointStore]:
    """The test's checkpoint store (a generator: SQLite stores are closed afterwards, a
    PostgreSQL store's schema is dropped)."""
    if state.settings.store == "postgres":
        from ._runtime import open_test_postgres_store

        postgres = open_test_postgres_store(request.config.stash[SESSION].postgres_dsn)
        try:
            yield postgres
        finally:
            postgres.drop()
            postgres.close()
        return
    if state.settings.store == "sqlite":
        from .._stores._sqlite import SQLiteCheckpointStore

        tmp_path: Path = request.getfixturevalue("tmp_path")
        sqlite = SQLiteCheckpointStore(tmp_path / "graphflow.db")
        try:
            yield sqlite
        finally:
            sqlite.close()
        return
    from .._stores._memory import InMemoryCheckpointStore

    yield InMemoryCheckpointStore()


def build_store_faults(store: CheckpointStore, clock: VirtualClock) -> FaultyStore:
    """A :class:`FaultyStore` over the test's store, on the test's clock."""
    from .._stores._faulty import FaultyStore

    return FaultyStore(store, clock=clock)


def build_runtime(
    state: ItemState, store: FaultyStore, clock: VirtualClock, seed: int,
    factory: GraphRuntimeFactory,
) -> RecordingRuntime:
    """The ``graph_runtime`` fixture's runtime."""
    from ._runtime import RecordingRuntime

    runtime = RecordingRuntime(
        store, clock=clock, seed=seed, checkpoint_policy=state.settings.checkpoint_policy,
        observer=state.observe,
    )
    runtime.factory = factory
    return runtime


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
            scopes = config.stash.get(FIXTURE_SCOPES, None)
            if item is None or (scopes and scopes[-1] != "function"):
                return None
            return item_state(item)

    return PluginFactory(sqlite_dir=lambda: tmp_path_factory.mktemp("graphflow-store"),
                         postgres_dsn=config.stash[SESSION].postgres_dsn)
