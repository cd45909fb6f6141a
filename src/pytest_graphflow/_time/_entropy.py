"""Owned entropy in node code: ``uuid`` and ``random`` draw from the task's seeded stream.

While a node task of a deterministic run executes (:data:`ENTROPY` is set: a seeded
:class:`GraphRuntime` on a :class:`VirtualClock`, or a LangGraph harness leg), these draw from
a stream keyed by durable things — the run (or thread) and the task, whose id already names
the checkpoint it extends and its place in it — and a counter within the task (the stream's
position), so a task run again on resume, and the same run in a fresh process, draws the same
values:

* ``uuid.uuid4()`` (its ``os.urandom(16)``), however it was imported;
* ``uuid.uuid1()`` without arguments: the virtual time, and a clock sequence and node drawn
  from the stream;
* the ``random`` module's functions (``random.random()``, ``randint``, ``choice``, ``shuffle``,
  ``uniform``, ``gauss``, ``randbytes``, ``seed``, ``getstate``/``setstate``, ...), however
  imported, except ``random``, ``getrandbits``, ``seed``, ``getstate`` and ``setstate``
  bound by ``from random import`` before the first runtime was made (:data:`UNOWNED`: they
  reach the hidden global generator itself);
* ``random.Random()`` (and ``rng.seed()``) without a seed.

Not owned: ``os.urandom``, ``secrets`` and ``random.SystemRandom`` (they exist to be
unpredictable; replacing them for code that shares the process would be unsafe), and
``uuid.uuid1(node=..., clock_seq=...)`` with arguments.

The seam is the narrowest that reaches every reference: the global generator's class is
swapped for a subclass whose primitives ask :data:`ENTROPY` (``randint``, ``choice`` and the
rest call those primitives), ``random.Random.seed`` takes a seed from the stream when given
none, ``uuid``'s module global ``os`` is a proxy whose ``urandom`` asks :data:`ENTROPY`, and
``uuid.uuid1`` runs a shim that asks it too. Outside node tasks — other code in the process, other
threads, hypothesis, pytest-xdist, psycopg, asyncio — each of them defers to the original,
after one context-variable read. The hooks are installed with the runtime's other hooks (the
first :class:`GraphRuntime` or harness); importing pytest-graphflow patches nothing.
"""

from __future__ import annotations

import os
import random
import tempfile
import types
import uuid
from contextvars import ContextVar
from types import ModuleType
from typing import Any, Protocol

from ._clock import Clock, VirtualClock
from ._rng import EntropyStream

__all__ = ["ENTROPY", "UNOWNED", "EntropySource", "TaskEntropy", "install_entropy_hooks"]


class EntropySource(Protocol):
    """What :data:`ENTROPY` holds: a task's stream (made on first use) and its clock."""

    @property
    def clock(self) -> Clock:
        """The clock ``uuid1`` reads its time from."""
        ...

    def entropy_rng(self) -> EntropyStream:
        """The task's owned stream."""
        ...


ENTROPY: ContextVar[EntropySource | None] = ContextVar("graphflow_entropy", default=None)
"""Set while a node task of a deterministic run executes: where its entropy comes from."""


class TaskEntropy:
    """An :class:`EntropySource` for a task known by a key (the LangGraph harness's).

    Args:
        key: the durable names of the task (thread, task id); the stream is
            ``EntropyStream(key)``, made on the first draw.
        clock: the run's clock.
    """

    __slots__ = ("_key", "_rng", "clock")

    def __init__(self, key: str, clock: Clock) -> None:
        self._key = key
        self._rng: EntropyStream | None = None
        self.clock = clock

    def entropy_rng(self) -> EntropyStream:
        """The task's owned stream."""
        rng = self._rng
        if rng is None:
            rng = self._rng = EntropyStream(self._key)
        return rng


_installed = [False]
_ROUTED = ("random", "getrandbits", "randbytes", "seed", "getstate", "setstate", "gauss")
"""The global generator's methods that ask :data:`ENTROPY`: its primitives, and those that
keep state of their own (``gauss``'s spare value); every other function calls these."""

UNOWNED: dict[str, Any] = {f"random.{name}": getattr(random, name)
                           for name in ("random", "getrandbits", "seed", "getstate", "setstate")}
"""The ``random`` module's functions as they were before the hooks (this module never runs
them): a name bound to one of these (``from random import random`` done before the first
runtime) reaches the global generator itself, not the task's stream."""


def _routed(name: str) -> Any:
    base = getattr(random.Random, name)
    if name in _FAST:
        return _FAST[name](base)

    def method(self: random.Random, *args: Any, **kwargs: Any) -> Any:
        source = ENTROPY.get()
        if source is None:
            return base(self, *args, **kwargs)
        return getattr(source.entropy_rng(), name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"``random.{name}``: from the node task's owned stream inside one."
    return method


def _fast_random(base: Any) -> Any:
    def random(self: Any) -> float:
        source = ENTROPY.get()
        if source is None:
            return base(self)  # type: ignore[no-any-return]
        return source.entropy_rng().random()

    return random


def _fast_getrandbits(base: Any) -> Any:
    def getrandbits(self: Any, k: int) -> int:
        source = ENTROPY.get()
        if source is None:
            return base(self, k)  # type: ignore[no-any-return]
        return source.entropy_rng().getrandbits(k)

    return getrandbits


_FAST = {"random": _fast_random, "getrandbits": _fast_getrandbits}
"""The primitives every other function calls, without the generic wrapper's packing."""


class _OsProxy(ModuleType):
    """Stands in for ``os`` in the ``uuid`` module: ``uuid4()`` reads ``os.urandom`` there."""

    def __init__(self) -> None:
        super().__init__("os")
        self.urandom = _uuid_urandom

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def _uuid_urandom(size: int) -> bytes:
    source = ENTROPY.get()
    if source is None:
        return os.urandom(size)
    return source.entropy_rng().randbytes(size)


_UUID_EPOCH = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01


def _owned_uuid1_bytes(source: EntropySource) -> bytes:
    """A version-1 UUID's bytes: the task clock's time, a clock sequence and a node from the
    stream (the node with the multicast bit set, as RFC 4122 asks of a random node)."""
    clock = source.clock
    if isinstance(clock, VirtualClock):
        ns = clock.start_epoch_ns + clock.elapsed_ns
    else:  # pragma: no cover - entropy is owned only under a virtual clock
        ns = int(clock.now().timestamp() * 1e9)
    ts = ns // 100 + _UUID_EPOCH
    rng = source.entropy_rng()
    seq = rng.getrandbits(14)
    node = rng.getrandbits(48) | (1 << 40)
    fields = (ts & 0xFFFFFFFF, (ts >> 32) & 0xFFFF, (ts >> 48) & 0x0FFF,
              (seq >> 8) & 0x3F, seq & 0xFF, node)
    return uuid.UUID(fields=fields, version=1).bytes


def install_entropy_hooks() -> None:
    """Install the entropy hooks (idempotent; once per process)."""
    if _installed[0]:
        return
    _installed[0] = True
    # tempfile keeps one Random for the process's temporary names; make it now, outside any
    # node, so it is never one of a node's seeded generators.
    tempfile._get_candidate_names()  # type: ignore[attr-defined]

    original_seed = random.Random.seed

    def seed(self: random.Random, a: Any = None, version: int = 2) -> None:
        if a is None:
            source = ENTROPY.get()
            if source is not None:
                a = source.entropy_rng().getrandbits(128)
        original_seed(self, a, version)

    seed.__doc__ = original_seed.__doc__
    seed.__wrapped__ = original_seed  # type: ignore[attr-defined]
    random.Random.seed = seed  # type: ignore[method-assign]

    owned = type("OwnedGlobalRandom", (random.Random,),
                 {name: _routed(name) for name in _ROUTED if hasattr(random.Random, name)})
    inst = random._inst
    inst.__class__ = owned
    for name in _ROUTED:
        if hasattr(random, name):
            setattr(random, name, getattr(inst, name))

    uuid.os = _OsProxy()  # type: ignore[attr-defined]
    _own_uuid1()


def _uuid1_shim(node: Any = None, clock_seq: Any = None) -> Any:
    """The code ``uuid.uuid1`` runs once owned: it calls the dispatcher the hooks put in the
    ``uuid`` module's namespace (its own globals)."""
    return _graphflow_uuid1(node, clock_seq)  # type: ignore[name-defined]  # noqa: F821


def _own_uuid1() -> None:
    """Give ``uuid.uuid1`` the shim's code, so every reference to it (``from uuid import
    uuid1`` included) reaches the dispatcher. (Its ``_generate_time_safe`` is no seam:
    time-machine and freezegun set it to ``None`` while they travel and put back the one
    they found.)"""
    function = uuid.uuid1
    original = types.FunctionType(function.__code__, function.__globals__, "uuid1",
                                  function.__defaults__, function.__closure__)

    def dispatch(node: Any, clock_seq: Any) -> uuid.UUID:
        source = ENTROPY.get()
        if source is None or node is not None or clock_seq is not None:
            return original(node, clock_seq)  # type: ignore[no-any-return]
        return uuid.UUID(bytes=_owned_uuid1_bytes(source))

    function.__globals__["_graphflow_uuid1"] = dispatch
    function.__code__ = _uuid1_shim.__code__
