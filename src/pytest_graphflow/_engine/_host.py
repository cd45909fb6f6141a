"""What a ``GraphRuntime`` gives the parts that prepare, delete and replay its legs.

The runtime keeps its books on its runs in one :class:`RunBook` and hands it, with itself
seen as a :class:`LegHost` (its public settings only), to ``Legs``; nothing outside
``_runtime`` reads the runtime's private attributes (``tests/layout/test_run_state_owners.py``
checks ``_legs``, ``_delete``, ``_step``, ``_subgraph`` and ``_replay``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from .._graph._builder import CheckpointPolicy, CompiledGraph
from .._graph._middleware import Guardrail, Middleware
from .._records._events import Interrupt
from .._records._ids import IdSource
from .._stores._features import StoreFeatures
from .._stores._protocol import CheckpointStore
from .._time._clock import Clock
from ._known import KnownGraphs
from ._results import RunLeg, RunRecord
from ._runner import Runner

__all__ = ["KEPT_RECORDS", "LegHost", "RunBook", "RunDefaults", "RunIds", "SeededIds"]

KEPT_RECORDS = 256
"""Over a store that keeps run records, the ended runs whose records a runtime holds (the
newest); older ones are read back from the store."""


class RunIds(Protocol):
    """Where a runtime's new run ids come from."""

    def run_hex(self) -> str:
        """A fresh 12-hex-digit token for a run (and its default thread)."""
        ...


class RunDefaults(Protocol):
    """The run options a runtime sets for every run (``_options.run_options`` reads them)."""

    @property
    def max_supersteps(self) -> int | None: ...
    @property
    def timeout(self) -> float | None: ...
    @property
    def on_interrupt(self) -> Callable[[Interrupt], object] | None: ...
    @property
    def tenant_id(self) -> str | None: ...


class LegHost(RunDefaults, Protocol):
    """The runtime as the preparer of its legs sees it: its public settings only."""

    @property
    def store(self) -> CheckpointStore: ...
    @property
    def store_features(self) -> StoreFeatures: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def claim_ttl(self) -> float: ...
    @property
    def checkpoint_policy(self) -> CheckpointPolicy | None: ...
    @property
    def middleware(self) -> Sequence[Middleware]: ...
    @property
    def guardrails(self) -> Sequence[Guardrail]: ...
    @property
    def on_leg(self) -> Callable[[RunLeg], None] | None: ...


_FIRST_HEXES = 4
"""Run ids of a seed kept ready (a runtime mostly runs a few runs): the first ones."""

_first_hexes: dict[int, tuple[IdSource, list[str]]] = {}
"""Each seed's first run ids made so far (at most :data:`_FIRST_HEXES`), and the
``IdSource`` that makes the next of them: made one at a time, as runtimes ask (a test's
runtime mostly has a seed of its own and runs one run: one id made, not four)."""


class SeededIds:
    """The run ids of ``IdSource(seed)``, the same stream, without building a seeded random
    generator per runtime: the first :data:`_FIRST_HEXES` ids of each seed are made once per
    process (each when a runtime first asks for it), and a runtime that goes beyond them
    continues an ``IdSource`` of its own."""

    __slots__ = ("_n", "_seed", "_source")

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._n = 0
        self._source: IdSource | None = None

    def run_hex(self) -> str:
        """The next 12-hex-digit token of the seed's stream."""
        source = self._source
        if source is not None:
            return source.run_hex()
        n = self._n
        if n < _FIRST_HEXES:
            first = _first_hexes.get(self._seed)
            if first is None:
                if len(_first_hexes) >= 256:  # a bounded cache, like the seeded states
                    _first_hexes.clear()
                first = _first_hexes[self._seed] = (IdSource(self._seed), [])
            made = first[1]
            self._n = n + 1
            try:
                return made[n]  # (no len() call: made already, the usual case)
            except IndexError:
                pass
            source = first[0]
            while len(made) <= n:  # (one turn, unless the cache was cleared meanwhile)
                made += (source.run_hex(),)  # (not append: no call)
            return made[n]
        source = self._source = IdSource(self._seed)
        for _ in range(_FIRST_HEXES):  # past the ids handed out already
            source.run_hex()
        return source.run_hex()


class RunBook:
    """A runtime's books on its runs (one per runtime; ``Legs`` keeps them up to date).

    Attributes:
        ids: where new run ids come from: the seed's :class:`IdSource`, or (a replay, a
            subgraph task's child runs) ids fixed or derived elsewhere.
        graphs: the graphs the runtime ran, so a run resumes by id alone.
        records: the record of each run the runtime holds, in the order it took them up.
        live: the runner of each run's latest leg (ended ones are dropped as legs start).
        policy_graphs: the graphs as the runtime's checkpoint policy makes them, by ``id``.
    """

    __slots__ = ("graphs", "ids", "live", "policy_graphs", "records")

    def __init__(self, ids: RunIds) -> None:
        self.ids = ids
        self.graphs = KnownGraphs()
        self.records: dict[str, RunRecord] = {}
        self.live: dict[str, Runner] = {}
        self.policy_graphs: dict[int, tuple[CompiledGraph, CompiledGraph]] = {}

    @classmethod
    def seeded(cls, seed: int | None) -> RunBook:
        """Books whose run ids come from ``seed`` (system randomness for ``None``)."""
        return cls(IdSource(None) if seed is None else SeededIds(seed))

    def forget_ended(self) -> None:
        """Let go of the records of the oldest ended runs beyond :data:`KEPT_RECORDS` (call
        it only over a store that keeps run records: a long-lived runtime, a ``Worker``,
        would otherwise hold one per run it ever ran)."""
        excess = len(self.records) - KEPT_RECORDS
        if excess <= 0:
            return
        doomed: list[str] = []
        for run_id in self.records:
            live = self.live.get(run_id)
            if live is None or live.done:
                doomed.append(run_id)
                if len(doomed) == excess:
                    break
        for run_id in doomed:
            del self.records[run_id]
