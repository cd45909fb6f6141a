"""Deterministic ids and randomness for LangGraph runs under the harness.

LangGraph derives every id it records from a few sources: checkpoint ids are ``uuid6`` values
(the wall clock plus random bits, and a process-wide "last timestamp"), task ids and
interrupt ids are hashes of the checkpoint id, ``add_messages`` gives id-less messages a
``uuid4``, ``RetryPolicy(jitter=True)`` adds ``random.uniform(0, 1)`` to a back-off and
``InMemorySaver`` adds ``random.random()`` to channel versions.

The seam is the smallest one that makes all of them seed-derived without touching LangGraph's
logic: the *names* ``uuid6`` (in the two modules that create checkpoints), ``uuid`` (in
``langgraph.graph.message``) and ``random`` (in ``langgraph.pregel._retry``) are rebound to
thin proxies. A proxy reads a context variable: inside a harness run it answers from the
run's :class:`IdSource`; anywhere else it calls the original, so plain LangGraph use in the
same process is unchanged. Task and interrupt ids then follow from the checkpoint ids.

A subgraph runs its own loop inside its parent's task, concurrently with its siblings, so
each checkpoint namespace draws from streams of its own (:data:`ID_NAMESPACE`, set per node
task): the ids of parallel subgraphs (``Send`` into a subgraph) never depend on the order the
seed ran them in.

Within a namespace every draw is keyed by its *place*: the checkpoint being extended
(:data:`PLACE`, set while LangGraph's ``apply_writes``/``create_checkpoint`` run, which is
where new checkpoint ids, ``add_messages`` ids and channel versions are drawn), or for retry
jitter the task's own namespace. So a run recovered after a crash, which extends the same
checkpoints, draws the same ids at each of them as the run that never crashed, whichever
checkpoint its leg started from.
"""

from __future__ import annotations

import _random
import hashlib
import random
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from random import Random
from types import ModuleType
from typing import Any

from .._time._clock import VirtualClock

__all__ = ["ID_NAMESPACE", "ID_SOURCE", "PLACE", "IdSource", "install_id_hooks"]

ID_SOURCE: ContextVar[IdSource | None] = ContextVar("graphflow_langgraph_ids", default=None)
"""Set for the duration of a harness run: where LangGraph's ids and random numbers come from."""

ID_NAMESPACE: ContextVar[str] = ContextVar("graphflow_langgraph_id_namespace", default="")
"""The checkpoint namespace of the node task running (``""`` outside node tasks): a
subgraph's loop runs inside its parent's task, so its ids are drawn under that task's
namespace, which is the subgraph's own."""

PLACE: ContextVar[str | None] = ContextVar("graphflow_langgraph_place", default=None)
"""The id of the checkpoint LangGraph is extending (``""``: a new, empty one), while it
applies a step's writes or creates the next checkpoint; ``None`` elsewhere."""

_UUID_EPOCH = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_installed = False
_UUID6 = "uuid6"


class IdSource:
    """Seeded ids for one harness leg.

    Checkpoint ids keep LangGraph's contract (uuid6, strictly increasing within a thread, so
    "latest" is the greatest id): their timestamp is the virtual clock's, raised above every
    checkpoint id the leg has seen (:meth:`observe`), so a fresh harness resuming a thread
    written earlier never creates an id below the thread's newest.

    Ids and random numbers come from four independent streams (checkpoint ids; message ids;
    retry jitter; channel versions), each seeded from the thread and the *place* of the draw
    (:data:`PLACE`: the checkpoint being extended; a retried task's namespace for jitter),
    not the schedule seed nor the harness object — so two schedules of one thread draw the
    same ids whatever order their tasks ran in, one more message never shifts a checkpoint
    id, a run recovered after a crash draws at each checkpoint what the uncrashed run drew
    there, and a fresh harness over a saved thread never reuses an id it holds (it extends
    a checkpoint nothing extended yet; a checkpoint id's time is above every id it saw).
    A draw whose place is unknown comes from a stream of ``salt``.

    Args:
        clock: the virtual clock timestamps come from.
        salt: the thread id and the id of the checkpoint the leg extends.
        place_salt: what place-keyed streams are seeded from with the place (default: none;
            every stream is ``salt``'s): the thread for a leg.
    """

    def __init__(self, clock: VirtualClock, salt: str, place_salt: str | None = None) -> None:
        self.clock = clock
        self._salt = salt
        self._place_salt = place_salt
        self._streams: dict[tuple[str, str, str | None], Random] = {}
        self.generated: list[str] = []
        self._last: dict[str, int] = {}
        self._start: datetime | None = None
        self._start_ns = 0

    def stream(self, name: str, namespace: str | None = None,
               place: str | None = None) -> Random:
        """The stream ``name`` (``"ids"``, ``"messages"``, ``"jitter"``, ``"versions"``) of
        a checkpoint namespace (default: the one running, :data:`ID_NAMESPACE`) at a place
        (default: :data:`PLACE`)."""
        ns = ID_NAMESPACE.get() if namespace is None else namespace
        at = PLACE.get() if place is None else place
        if self._place_salt is None:
            at = None
        found = self._streams.get((name, ns, at))
        if found is None:
            key = (f"{self._salt}:{name}" if at is None
                   else f"{self._place_salt}:{name}@{at}") + (f":{ns}" if ns else "")
            digest = hashlib.sha256(f"graphflow-langgraph:{key}".encode()).digest()
            found = self._streams[name, ns, at] = _seeded(int.from_bytes(digest[:8], "big"))
        return found

    @property
    def random(self) -> Random:
        """Checkpoint ids' random bits, in the running namespace."""
        return self.stream("ids")

    @property
    def messages(self) -> Random:
        """``add_messages`` ids, in the running namespace."""
        return self.stream("messages")

    @property
    def versions(self) -> Random:
        """``InMemorySaver`` channel versions' random part, in the running namespace."""
        return self.stream("versions")

    @property
    def jitter(self) -> Random:
        """Retry jitter, drawn in a node task: the stream of the graph the task is in, at
        the task (its namespace names it)."""
        ns = ID_NAMESPACE.get()
        return self.stream("jitter", ns.rpartition("|")[0], ns)

    def observe(self, checkpoint_id: str | None, namespace: str = "") -> None:
        """Note a checkpoint id that exists already in ``namespace``; new ids there are made
        greater than it."""
        if not checkpoint_id:
            return
        try:
            parsed = uuid.UUID(checkpoint_id)
        except ValueError:
            return
        if parsed.version == 6:
            ts = ((parsed.int >> 80) << 12) | ((parsed.int >> 64) & 0x0FFF)
            self._last[namespace] = max(self._last.get(namespace, 0), ts)

    def uuid6(self, clock_seq: int | None = None) -> uuid.UUID:
        """A uuid6 from the virtual clock and the seeded stream (``clock_seq`` as LangGraph
        passes it: the step, or -2 for an empty checkpoint)."""
        start = self.clock.start
        if start is not self._start:  # the clock's start in ns since the epoch, once
            self._start = start
            self._start_ns = (int((start - _EPOCH).total_seconds()) * 10**9
                              + start.microsecond * 1000)
        ts = (self._start_ns + self.clock.elapsed_ns) // 100 + _UUID_EPOCH
        ns = ID_NAMESPACE.get()
        ts = max(ts, self._last.get(ns, 0) + 1)
        self._last[ns] = ts
        bits = self.stream("ids", ns)  # at PLACE: the checkpoint the new one extends
        if clock_seq is None:
            clock_seq = bits.getrandbits(14)
        node = bits.getrandbits(48)
        value = ((ts >> 12) & 0xFFFFFFFFFFFF) << 80
        value |= (ts & 0x0FFF) << 64
        value |= (clock_seq & 0x3FFF) << 48
        value |= node
        value &= ~(0xC000 << 48)
        value |= 0x8000 << 48
        value &= ~(0xF000 << 64)
        value |= 6 << 76
        return uuid.UUID(int=value)

    def uuid4(self) -> uuid.UUID:
        """A version-4 uuid from the seeded stream (remembered in :attr:`generated`)."""
        value = uuid.UUID(int=self.messages.getrandbits(128), version=4)
        self.generated.append(str(value))
        return value


def _seeded_in_c(seed: int) -> Random:
    """``Random(seed)``, seeded by the C generator directly: the same state, without the
    Python layers of ``Random.__init__``/``seed`` (and the entropy hooks' ``seed``), which
    cost more than the seeding itself."""
    rng = Random.__new__(Random)
    _random.Random.seed(rng, seed)
    rng.gauss_next = None  # type: ignore[attr-defined]  # what Random.seed also sets
    return rng


def _pick_seeding() -> Any:
    """``_seeded_in_c`` where it makes exactly ``Random(seed)``'s state (checked once), or
    ``Random`` itself."""
    try:
        probe = 0x9E3779B97F4A7C15
        if _seeded_in_c(probe).getstate() == Random(probe).getstate():
            return _seeded_in_c
    except Exception:  # pragma: no cover - another Random implementation
        pass
    return Random  # pragma: no cover


_seeded = _pick_seeding()


class _UuidProxy(ModuleType):
    """Stands in for the ``uuid`` module in ``langgraph.graph.message``."""

    def __init__(self) -> None:
        super().__init__("uuid")

    def __getattr__(self, name: str) -> Any:
        if name == "uuid4":
            return _uuid4
        return getattr(uuid, name)


def _uuid4() -> uuid.UUID:
    source = ID_SOURCE.get()
    return uuid.uuid4() if source is None else source.uuid4()


class _RandomProxy(ModuleType):
    """Stands in for the ``random`` module in ``langgraph.pregel._retry`` (retry jitter)."""

    def __init__(self) -> None:
        super().__init__("random")

    def __getattr__(self, name: str) -> Any:
        source = ID_SOURCE.get()
        return getattr(random if source is None else source.jitter, name)


def install_id_hooks() -> None:
    """Rebind LangGraph's id and randomness sources to the proxies (idempotent)."""
    global _installed
    if _installed:
        return
    import langgraph.checkpoint.base as checkpoint_base
    import langgraph.graph.message as message
    import langgraph.pregel._checkpoint as pregel_checkpoint
    import langgraph.pregel._retry as retry

    for module in (checkpoint_base, pregel_checkpoint):
        original = getattr(module, _UUID6)

        def seeded_uuid6(
            node: int | None = None, clock_seq: int | None = None, *, _original: Any = original
        ) -> Any:
            source = ID_SOURCE.get()
            if source is None:
                return _original(node=node, clock_seq=clock_seq)
            return source.uuid6(clock_seq)

        seeded_uuid6.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(module, _UUID6, seeded_uuid6)
    message.uuid = _UuidProxy()  # type: ignore[attr-defined]
    retry.random = _RandomProxy()  # type: ignore[attr-defined]
    _mark_places()
    _installed = True


_PLACED = ("apply_writes", "create_checkpoint")  # (checkpoint, ...): where draws happen


def _mark_places() -> None:
    """Set :data:`PLACE` while LangGraph's loop (and ``update_state``) applies writes to a
    checkpoint or creates the next one, and to ``""`` while it makes an empty one."""
    import langgraph.pregel._loop as pregel_loop
    import langgraph.pregel.main as pregel_main

    for module in (pregel_loop, pregel_main):
        for name in _PLACED:
            original = getattr(module, name)
            if getattr(original, "__wrapped__", None) is not None:
                continue

            def placed(checkpoint: Any, *args: Any, _original: Any = original,
                       **kwargs: Any) -> Any:
                if ID_SOURCE.get() is None:
                    return _original(checkpoint, *args, **kwargs)
                token = PLACE.set(str(checkpoint["id"]))
                try:
                    return _original(checkpoint, *args, **kwargs)
                finally:
                    PLACE.reset(token)

            placed.__wrapped__ = original  # type: ignore[attr-defined]
            setattr(module, name, placed)
        original_empty = getattr(module, "empty_checkpoint")  # noqa: B009 - not exported

        def empty(*args: Any, _original: Any = original_empty, **kwargs: Any) -> Any:
            if ID_SOURCE.get() is None:
                return _original(*args, **kwargs)
            token = PLACE.set("")
            try:
                return _original(*args, **kwargs)
            finally:
                PLACE.reset(token)

        empty.__wrapped__ = original_empty  # type: ignore[attr-defined]
        setattr(module, "empty_checkpoint", empty)  # noqa: B010
