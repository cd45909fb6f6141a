"""The testing runtime: a :class:`GraphRuntime` that records its runs, and a factory of them.

:class:`RecordingRuntime` is what the ``graph_runtime`` fixture hands out. It behaves exactly
like :class:`GraphRuntime` and also remembers, for every run (leg) it performs, the graph and
the events the run produced, whichever API drove it (``trace``, ``invoke``, ``stream``,
``start``, ``resume``...). The plugin uses that record to draw the path a failing test's last
run took and to print its last events.

:class:`GraphRuntimeFactory` builds a fresh runtime (clock, store, seed) per call, which is
what a Hypothesis ``@given`` test needs: function-scoped fixtures are *not* reset between
examples, a runtime made inside the example is.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

from .._engine._results import RunLeg
from .._engine._runtime import GraphRuntime
from .._stores._memory import InMemoryCheckpointStore
from .._stores.faults._store import FaultyStore
from .._time._clock import VirtualClock

if TYPE_CHECKING:
    from .._stores._features import StoreFeatures
    from .._stores._protocol import CheckpointStore
    from .._stores.postgres._store import PostgresCheckpointStore
    from ._marker import TestSettings

__all__ = [
    "GraphRuntimeFactory",
    "RecordingRuntime",
    "RunRecording",
    "make_graph_runtime",
    "open_test_postgres_store",
]

_SCHEMAS = itertools.count()

Policy = Literal["every_step", "on_halt", "never"]
_UNSET: Final[Any] = object()
_KEEP: Final = 50  # recordings a runtime keeps (a loop of runs must not grow without bound)


RunRecording = RunLeg
"""The name the plugin's recordings had; the same class as :class:`RunLeg`."""


Observer = Callable[[RunRecording], None]


class RecordingRuntime(GraphRuntime):
    """A :class:`GraphRuntime` that records every run it performs (see :class:`RunRecording`).

    Args:
        store: the checkpoint store, as for :class:`GraphRuntime`.
        checkpoint_policy: when set, every graph this runtime runs uses this policy instead
            of the one it was compiled with (the ``graphflow`` marker's ``checkpoint_policy``).
        observer: called with each new :class:`RunRecording` when a run (leg) starts; the
            recording fills in as the run goes.
        **kwargs: the other :class:`GraphRuntime` arguments (``clock``, ``seed``, ...).

    Attributes:
        factory: the :class:`GraphRuntimeFactory` that made this runtime, if any (the
            ``graph_runtime`` fixture sets it, for ``graph_runtime.factory()`` in ``@given``).
    """

    factory: GraphRuntimeFactory | None = None

    def __init__(
        self,
        store: CheckpointStore | None = None,
        *,
        checkpoint_policy: Policy | None = None,
        observer: Observer | None = None,
        **kwargs: Any,
    ) -> None:
        # (the recorder first: ``GraphRuntime.__init__`` hands it to the legs it prepares)
        on_leg = self._recorder(observer)
        super().__init__(store, checkpoint_policy=checkpoint_policy, on_leg=on_leg, **kwargs)

    @classmethod
    def _of_parts(cls, store: CheckpointStore, features: StoreFeatures, clock: VirtualClock,
                  seed: int, checkpoint_policy: Policy | None, observer: Observer
                  ) -> RecordingRuntime:
        """The runtime ``RecordingRuntime(store, clock=clock, seed=seed,
        checkpoint_policy=checkpoint_policy, observer=observer)`` builds, when the caller
        made ``store`` and ``clock`` itself and knows ``features`` are the store's
        (internal: the ``graph_runtime`` fixture's, whose checks answer the same for every
        test)."""
        runtime = cls.__new__(cls)
        runtime._set_up(store, features, clock, seed, checkpoint_policy,
                        runtime._recorder(observer))
        return runtime

    def _recorder(self, observer: Observer | None) -> Callable[[RunLeg], None]:
        """This runtime's recordings and observers, and the ``on_leg`` that feeds them."""
        observers: list[Observer] = [] if observer is None else [observer]
        recordings: deque[RunRecording] = deque(maxlen=_KEEP)

        def record(leg: RunLeg) -> None:
            recordings.append(leg)
            for seen in observers:
                seen(leg)

        # ``on_leg`` holds the runtime's recordings, not the runtime: no reference cycle, so
        # a test's runtime, store and runs go when the test lets go of them (a bound method
        # here made every runtime cyclic garbage, ~200 objects a test left to the collector).
        self._observers = observers
        self._recordings = recordings
        self._closers: list[Callable[[], None]] = []
        self._record = record
        return record

    # ----------------------------------------------------------------- recordings

    @property
    def recordings(self) -> list[RunRecording]:
        """The runs (legs) this runtime performed, oldest first (the last 50)."""
        return list(self._recordings)

    @property
    def last_recording(self) -> RunRecording | None:
        """The run (leg) started last, or ``None``."""
        return self._recordings[-1] if self._recordings else None

    def add_observer(self, observer: Observer) -> None:
        """Call ``observer`` with each :class:`RunRecording` as its run starts."""
        self._observers.append(observer)

    @property
    def store_faults(self) -> FaultyStore | None:
        """The :class:`FaultyStore` this runtime's store is, or ``None``."""
        return self.store if isinstance(self.store, FaultyStore) else None

    def langgraph(self, graph: Any, **kwargs: Any) -> Any:
        """A :class:`~pytest_graphflow.langgraph.LangGraphHarness` for a LangGraph graph
        (compiled, or a ``StateGraph`` builder) with this runtime's seed and virtual clock,
        whose checkpoint saver obeys this runtime's :attr:`store_faults` rules (needs the
        ``langgraph`` extra). Keyword arguments go to the harness.
        """
        from .._langgraph._harness import LangGraphHarness

        kwargs.setdefault("seed", self.seed if isinstance(self.seed, int) else 0)
        if isinstance(self.clock, VirtualClock):
            kwargs.setdefault("clock", self.clock)
        if self.store_faults is not None:
            kwargs.setdefault("faults", self.store_faults)
        kwargs.setdefault("on_leg", self._record)
        return LangGraphHarness(graph, **kwargs)

    # ----------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Close the stores this runtime opened itself (a factory's SQLite store)."""
        closers, self._closers = self._closers, []
        for close in reversed(closers):
            close()

    def __enter__(self) -> RecordingRuntime:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class GraphRuntimeFactory:
    """Makes fresh deterministic runtimes: a new clock, store and runtime per call.

    Call it inside a Hypothesis ``@given`` test so that every example starts from scratch::

        @given(n=st.integers(0, 5))
        def test_counts(graph_runtime_factory, n):
            runtime = graph_runtime_factory()
            assert runtime.trace(graph, {"n": n}).status == "completed"

    Every call uses the factory's seed unless told otherwise, so an example's run depends
    only on the example's data, which keeps Hypothesis' replay and shrinking exact. To explore
    schedules too, draw the seed: ``graph_runtime_factory(seed=data.draw(st.integers(0,
    2**32 - 1)))``.

    The plugin's ``graph_runtime_factory`` follows the running test: its seed, its
    ``graphflow`` marker, the session's store; the SQLite stores it opens for a test close
    when the test ends. Called from a fixture wider than a function (a session fixture), it
    uses the session seed and its stores stay open until the session ends.

    Args:
        seed: the default seed.
        start: the virtual clock's default start (``None``: :data:`DEFAULT_START`).
        store: ``"memory"``, ``"sqlite"`` (in ``sqlite_dir``, else an in-memory SQLite
            database), ``"postgres"`` (on ``postgres_dsn``), a zero-argument callable
            returning a store, or a store (shared by
            every runtime made: pass one per call instead to keep examples apart).
        checkpoint_policy: overrides the graphs' own checkpoint policy.
        faulty: wrap the store in a :class:`FaultyStore` (``runtime.store_faults``).
        sqlite_dir: a zero-argument callable returning a fresh directory for each SQLite
            store, or ``None``.
        observer: passed to every :class:`RecordingRuntime` made.
        **runtime_options: other :class:`GraphRuntime` arguments (``max_supersteps``, ...).
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        start: datetime | None = None,
        store: Any = "memory",
        checkpoint_policy: Policy | None = None,
        faulty: bool = True,
        sqlite_dir: Callable[[], Path] | None = None,
        postgres_dsn: str | None = None,
        observer: Observer | None = None,
        **runtime_options: Any,
    ) -> None:
        self._defaults: dict[str, Any] = {"seed": seed, "start": start, "store": store,
                                          "checkpoint_policy": checkpoint_policy}
        self.faulty = faulty
        self.sqlite_dir = sqlite_dir
        self.postgres_dsn = postgres_dsn
        self.observer = observer
        self.runtime_options = runtime_options
        self._open: list[RecordingRuntime] = []

    def defaults(self) -> dict[str, Any]:
        """The settings a call starts from (the plugin's factory reads the running test's)."""
        return dict(self._defaults)

    @property
    def seed(self) -> int:
        """The seed runtimes get unless told otherwise (in the plugin: the test's seed)."""
        return int(self.defaults()["seed"])

    @property
    def start(self) -> datetime | None:
        """The virtual clocks' start (``None``: the clock's default)."""
        start: datetime | None = self.defaults()["start"]
        return start

    @property
    def store(self) -> Any:
        """What each runtime's store is made from (``"memory"``, ``"sqlite"``, ...)."""
        return self.defaults()["store"]

    @property
    def checkpoint_policy(self) -> Policy | None:
        """The checkpoint policy runtimes impose, or ``None``."""
        policy: Policy | None = self.defaults()["checkpoint_policy"]
        return policy

    def __call__(
        self,
        *,
        seed: int = _UNSET,
        start: datetime | None = _UNSET,
        store: Any = _UNSET,
        checkpoint_policy: Policy | None = _UNSET,
        **runtime_options: Any,
    ) -> RecordingRuntime:
        """A fresh :class:`RecordingRuntime`: new virtual clock, new store, the given seed.

        Keyword arguments override the factory's defaults for this runtime only.
        """
        settings = self.defaults()
        for key, value in (("seed", seed), ("start", start), ("store", store),
                           ("checkpoint_policy", checkpoint_policy)):
            if value is not _UNSET:
                settings[key] = value
        clock = VirtualClock(settings["start"])
        closers: list[Callable[[], None]] = []
        inner = self._make_store(settings["store"], closers)
        runtime = self._build(inner, clock, settings, runtime_options)
        runtime.factory = self
        if closers:
            runtime._closers.extend(closers)
            self._open.append(runtime)
        return runtime

    def close(self) -> None:
        """Close the stores the factory opened so far (SQLite) in the runtimes it made."""
        opened, self._open = self._open, []
        for runtime in opened:
            runtime.close()

    def _build(
        self, inner: CheckpointStore, clock: VirtualClock, settings: dict[str, Any],
        options: dict[str, Any],
    ) -> RecordingRuntime:
        store: CheckpointStore = inner
        if self.faulty:
            store = FaultyStore(inner, clock=clock)
        return RecordingRuntime(
            store, clock=clock, seed=settings["seed"],
            checkpoint_policy=settings["checkpoint_policy"], observer=self.observer,
            **{**self.runtime_options, **options},
        )

    def _make_store(self, spec: Any, closers: list[Callable[[], None]]) -> CheckpointStore:
        if spec == "memory":
            return InMemoryCheckpointStore()
        if spec == "sqlite":
            from .._stores.sqlite._store import SQLiteCheckpointStore

            path: Path | str = (":memory:" if self.sqlite_dir is None
                                else self.sqlite_dir() / "graphflow.db")
            sqlite = SQLiteCheckpointStore(path, synchronous="off")  # a throwaway file
            closers.append(sqlite.close)
            return sqlite
        if spec == "postgres":
            postgres = open_test_postgres_store(self.postgres_dsn)

            def drop() -> None:
                postgres.drop()
                postgres.close()

            closers.append(drop)
            return postgres
        if isinstance(spec, str):
            from ..errors import InvalidArgument

            raise InvalidArgument(f"store={spec!r}: use 'memory', 'sqlite', 'postgres', a "
                                  "store, or a zero-argument callable returning a store")
        if callable(spec) and not callable(getattr(spec, "save", None)):
            made: CheckpointStore = spec()
            return made
        return spec  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return (f"GraphRuntimeFactory(seed={self.seed}, start={self.start!r}, "
                f"store={self.store!r}, checkpoint_policy={self.checkpoint_policy!r})")


def memory_runtime(settings: TestSettings, observer: Observer) -> RecordingRuntime:
    """The ``graph_runtime`` fixture's runtime for a test whose parts are the defaults (a
    :class:`FaultyStore` over a fresh in-memory store, on a fresh virtual clock), made
    as the part fixtures make them, in one place (internal)."""
    clock = VirtualClock(settings.start)
    store = FaultyStore(InMemoryCheckpointStore(), clock=clock)
    features = _MEMORY_FEATURES.get(settings.checkpoint_policy)
    if features is not None:  # the checks' answer for these parts, found by the first test
        return RecordingRuntime._of_parts(store, features, clock, settings.seed,
                                          settings.checkpoint_policy, observer)
    runtime = RecordingRuntime(store, clock=clock, seed=settings.seed,
                               checkpoint_policy=settings.checkpoint_policy, observer=observer)
    _MEMORY_FEATURES[settings.checkpoint_policy] = runtime.store_features
    return runtime


_MEMORY_FEATURES: dict[Policy | None, StoreFeatures] = {}
"""What a ``FaultyStore`` over a fresh :class:`InMemoryCheckpointStore` supports, as
``GraphRuntime`` found it having checked the store (and the checkpoint policy: by policy),
once per process: the same classes, unchanged instances, the same answer every test."""


def open_test_postgres_store(dsn: str | None) -> PostgresCheckpointStore:
    """A PostgreSQL store on a schema of its own (``graphflow_test_<pid>_<n>``), so tests
    never see each other's runs; the caller drops it with ``store.drop()``.

    Raises:
        InvalidArgument: no DSN was configured.
    """
    from .._stores.postgres._store import PostgresCheckpointStore

    if dsn is None:
        from ..errors import InvalidArgument

        raise InvalidArgument(
            "store='postgres' needs a server: give --graphflow-postgres-dsn=DSN (or the "
            "graphflow_postgres_dsn ini key, or GRAPHFLOW_POSTGRES_DSN)"
        )
    return PostgresCheckpointStore(dsn, schema=f"graphflow_test_{os.getpid()}_"
                                               f"{next(_SCHEMAS)}")


def make_graph_runtime(
    *,
    seed: int = 0,
    start: datetime | None = None,
    store: Any = "memory",
    checkpoint_policy: Policy | None = None,
    faulty: bool = True,
    **runtime_options: Any,
) -> RecordingRuntime:
    """One deterministic runtime, as the ``graph_runtime`` fixture builds it, without pytest.

    ``make_graph_runtime(seed=3)`` is ``GraphRuntimeFactory(seed=3)()``: a fresh
    :class:`VirtualClock` at ``start``, a fresh store (see :class:`GraphRuntimeFactory`)
    wrapped in a :class:`FaultyStore`, and the seed. Close it (or use it as a context manager)
    when ``store="sqlite"``.
    """
    return GraphRuntimeFactory(
        seed=seed, start=start, store=store, checkpoint_policy=checkpoint_policy,
        faulty=faulty, **runtime_options,
    )()
