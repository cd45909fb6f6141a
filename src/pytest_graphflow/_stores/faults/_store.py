"""``FaultyStore``: a wrapper that injects faults into any checkpoint store (SPEC §7).

The wrapper follows Hypothesis' ``ReadOnlyDatabase`` pattern: it owns no data and changes no
behaviour of the store it wraps, it only decides, call by call, whether the call reaches the
inner store at all. Every decision is a pure function of the rules and the calls seen so far,
so a run over a ``FaultyStore`` is as deterministic as the runtime driving it.

The rules API lives in :mod:`._rules`, how one call goes through the rules in
:mod:`._calls`; this module holds the wrapper, its introspection and the protocol.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import FunctionType
from typing import Any, cast

from ..._records._checkpoint import Checkpoint
from ..._time._clock import Clock
from ...errors import InvalidArgument
from .._features import StoreFeatures, features_of
from .._memory import InMemoryCheckpointStore
from .._protocol import CheckpointStore, checks_fencing
from ._calls import ERROR, OUTCOME, LoggedCall, as_record, record_of
from ._faults import PROTOCOL_OPS, Fault, FaultRule, StoreCall
from ._rules import FaultyRules

__all__ = ["Fault", "FaultRule", "FaultyStore", "StoreCall"]


class FaultyStore(FaultyRules):
    """A :class:`CheckpointStore` wrapper that rejects, fails, delays and crashes on command.

    Every call is logged in :attr:`calls`. Without rules the wrapper is transparent. Every
    coroutine method of the inner store beyond the protocol (``claim``, ``record_events``,
    ...) is forwarded through the same machinery, so rules can target it by name; other
    attributes are forwarded untouched.

    Rules are matched in the order they were added: every rule of the call's operation counts
    the call, every ``delay`` rule that fires adds its wait, and the first other rule that fires
    decides the outcome (precedence is by order of addition, not by kind).

    Example:
        >>> store = FaultyStore(InMemoryCheckpointStore(), clock=VirtualClock())
        >>> store.reject_save(nth=2).delay("get", 1.5)
        >>> store.crash_at("save", nth=4, phase="after")

    Args:
        inner: the store to wrap.
        clock: the clock ``delay`` waits on and :attr:`StoreCall.time` is read from; when
            ``None``, the runtime binds its own with :meth:`bind_clock`, and without any clock
            delays wait in real time (``anyio.sleep``).
    """

    pages_history = False
    """Its :meth:`list` takes no page arguments: the runtime reads whole lists through it, so
    the call log shows the same calls whatever the inner store."""

    claim_ttl: float
    """The inner store's ``claim_ttl`` (forwarded as ``__getattr__`` forwards any setting,
    without its slow path: a runtime reads it every leg)."""

    def __init__(self, inner: CheckpointStore, *, clock: Clock | None = None) -> None:
        cls = type(inner)
        if cls in _COMPLETE and _PROTOCOL.isdisjoint(getattr(inner, "__dict__", _PROTOCOL)):
            missing = []  # its class has every operation, the instance overrides none
        else:
            missing = [op for op in PROTOCOL_OPS if not callable(getattr(inner, op, None))]
            if all(callable(getattr(cls, op, None)) for op in PROTOCOL_OPS):
                _COMPLETE.add(cls)
        if missing:
            raise InvalidArgument(
                f"FaultyStore(inner={inner!r}): inner is not a CheckpointStore; it lacks "
                f"{missing}"
            )
        self._inner = inner
        self._set_clock(clock)
        self._memory = cls is InMemoryCheckpointStore  # adopt_fields may store directly
        self._rules: list[FaultRule] = []
        self._calls: list[StoreCall | LoggedCall] = []
        self._saves: list[str] = []
        self._crash: StoreCall | None = None

    # ----------------------------------------------------------------- introspection

    @property
    def supports_fencing(self) -> bool:
        """Whether the wrapped store checks fencing tokens (its class says so and its
        ``save`` takes ``fence=``); fenced saves and commits are then passed on."""
        found: bool | None = self.__dict__.get("_fencing")
        if found is None:
            found = self._wrapped()[1]
        return found

    def _check_key(self, names: frozenset[str]) -> tuple[Any, ...] | None:
        """What ``check_store``'s verdict on this wrapper depends on: the inner store's
        class and features, unless the wrapper or the inner store holds one of ``names``
        itself (then it is checked every time)."""
        inner = self._inner
        own = getattr(inner, "__dict__", None)
        if own is None or not names.isdisjoint(own) or not names.isdisjoint(self.__dict__):
            return None
        return (type(self), type(inner), self.features)

    @property
    def features(self) -> StoreFeatures:
        """The wrapped store's features, except that :meth:`list` takes no page arguments,
        the wrapper binds a clock and logs its calls and its rules may read ``visited``;
        the answers at once (``in_process``) and the lean step's save (``step_sink``) are
        passed on, logged, over an :class:`InMemoryCheckpointStore` only (its class exactly,
        the instance overriding none of the calls they stand for) (read once: a store's
        features do not change while it lives)."""
        found: StoreFeatures | None = self.__dict__.get("_features")
        if found is None:
            found = self._wrapped()[0]
        return found

    def _wrapped(self) -> tuple[StoreFeatures, bool]:
        """This wrapper's features and whether the inner store checks fencing, worked out
        once per inner store class when the class decides them (it declares its features and
        the instance overrides neither them, ``save`` nor ``supports_fencing``): every test
        makes a ``FaultyStore``."""
        inner = self._inner
        cls = type(inner)
        own = getattr(inner, "__dict__", _OVERRIDES)
        shared = (_OVERRIDES.isdisjoint(own)
                  and isinstance(cls.__dict__.get("features"), StoreFeatures))
        found = _BY_CLASS.get(cls) if shared else None
        if found is None:
            features = features_of(inner)
            quick = cls is InMemoryCheckpointStore and _QUICK.isdisjoint(own)
            wrapped = _WRAPPED.get((features, quick))
            if wrapped is None:
                wrapped = _WRAPPED[features, quick] = replace(
                    features, history_pages=False, clock_binding=True, call_log=True,
                    visited_snapshots=False, step_sink=quick and features.step_sink,
                    sent_commits=False,
                    in_process=quick and features.in_process)
            found = (wrapped, checks_fencing(inner))
            if shared:
                _BY_CLASS[cls] = found
        self.__dict__["_features"], self.__dict__["_fencing"] = found
        return found

    @property
    def inner(self) -> CheckpointStore:
        """The wrapped store (after a crash, open a fresh runtime over it to recover)."""
        return self._inner

    @property
    def clock(self) -> Clock | None:
        """The clock delays wait on, or ``None``."""
        return self._clock

    @property
    def calls(self) -> list[StoreCall]:
        """Every call made to this store, in the order they were made (a copy)."""
        return self.calls_since(0)

    @property
    def call_count(self) -> int:
        """How many calls were made to this store (``len(calls)``, without copying the log)."""
        return len(self._calls)

    def calls_since(self, start: int) -> list[StoreCall]:
        """The calls made from position ``start`` of the log on (``calls[start:]``)."""
        log = self._calls
        out: list[StoreCall] = []
        for i in range(max(start, 0), len(log)):
            call = log[i]
            if type(call) is not StoreCall:
                record = record_of(i, call)  # type: ignore[arg-type]
                if record.outcome != "pending":  # final: keep the record, not the entry
                    log[i] = record
                call = record
            out.append(call)
        return out

    @property
    def saves(self) -> list[str]:
        """Ids of the checkpoints whose ``save`` reached the inner store and returned."""
        return list(self._saves)

    @property
    def rules(self) -> list[FaultRule]:
        """The active rules, in the order they were added (a copy of the list)."""
        return list(self._rules)

    @property
    def last_rule(self) -> FaultRule:
        """The rule added last; read its ``hits`` after the run.

        Raises:
            LookupError: when the store has no rules.
        """
        if not self._rules:
            raise LookupError("this FaultyStore has no rules; add one first")
        return self._rules[-1]

    @property
    def dead(self) -> bool:
        """``True`` after a ``crash_at`` rule fired, until :meth:`revive`."""
        return self._crash is not None

    @property
    def crash(self) -> StoreCall | None:
        """The call at which the store crashed, or ``None``."""
        return self._crash

    def format_calls(self) -> str:
        """The call log as text, one call per line (for failure reports)."""
        return "\n".join(str(as_record(i, call)) for i, call in enumerate(self._calls)) or (
            "(no store calls)")

    def __repr__(self) -> str:
        state = " dead" if self._crash is not None else ""
        return (
            f"<FaultyStore over {type(self._inner).__name__}{state}: "
            f"{len(self._rules)} rule(s), {len(self._calls)} call(s)>"
        )

    # ------------------------------------------------------------- the protocol

    async def save(self, checkpoint: Checkpoint, **fence: Any) -> None:
        """Save through the fault rules (see :meth:`CheckpointStore.save`).

        A fenced save (``fence=(thread_id, token)``, on a store that supports fencing) is
        passed on as it is; rules see it as any save (``when(checkpoint)``).
        """
        if not fence:
            await self._call("save", self._inner.save, (checkpoint,), {})
            return
        inner_save = self._inner.save

        async def fenced(cp: Checkpoint) -> None:
            await inner_save(cp, **fence)

        await self._call("save", fenced, (checkpoint,), {})

    def adopt_fields(self, fields: dict[str, Any], fence: Any = None) -> bool:
        """The runtime's fast save (internal): over an in-memory store with no rule set and
        no crash, store a checkpoint given as its fields, logged as a ``save`` call like any
        other. Returns ``False`` (nothing done) when the save must go through :meth:`save`.
        """
        if self._rules or self._crash is not None or not self._memory:
            return False
        clock = self._vclock  # (self._when(), inline)
        call: list[Any] = ["save", (), None, (fields["id"], fields["run_id"]),
                           (clock, clock._ns) if clock is not None else self._now(),
                           "pending", None]
        self._calls.append(call)
        try:
            self._inner.adopt_fields(fields, fence)  # type: ignore[attr-defined]
        except Exception as exc:
            call[OUTCOME], call[ERROR] = "failed", exc
            raise
        self._saves.append(fields["id"])
        call[OUTCOME] = "ok"
        return True

    # ------------------------------------------------- answers at once (in_process)
    #
    # Over the in-memory store (StoreFeatures.in_process, step_sink), the runtime's claim,
    # release, free-run-id and resume reads and a lean step's save are answered without a
    # coroutine. Each is logged exactly as the awaited call it stands for (same op, arguments,
    # outcome and error), so ``calls`` reads the same; while a rule watches that operation
    # or the store is dead, it declines (``NotImplemented``, nothing logged or done) and the
    # runtime awaits the general call, which consults the rules as before.

    def _declines(self, op: str) -> bool:
        """Whether a rule counts calls of ``op`` (an answer at once then leaves ``op`` to the
        general call)."""
        return any(rule.fault.op == op for rule in self._rules)

    def claim_now(self, thread_id: str, run_id: str, now: datetime, ttl: float
                  ) -> Any:  # int, or NotImplemented
        """The in-memory store's ``claim_now`` (internal), logged as the ``claim`` call
        ``claim(thread_id, run_id, now=now, ttl=ttl)``; ``NotImplemented`` when it declines
        (see above)."""
        if self._crash is not None or (self._rules and self._declines("claim")):
            return NotImplemented
        clock = self._vclock  # (self._when(), inline)
        call: list[Any] = ["claim", (thread_id, run_id), {"now": now, "ttl": ttl}, None,
                           (clock, clock._ns) if clock is not None else self._now(),
                           "pending", None]
        self._calls.append(call)
        try:
            token: int = self._inner.claim_now(  # type: ignore[attr-defined]
                thread_id, run_id, now, ttl)
        except Exception as exc:
            call[OUTCOME], call[ERROR] = "failed", exc
            raise
        call[OUTCOME] = "ok"
        return token

    def release_now(self, thread_id: str, token: int) -> Any:  # None, or NotImplemented
        """The in-memory store's ``release_now`` (internal), logged as the ``release`` call
        ``release(thread_id, token)``; ``NotImplemented`` when it declines (see above) or
        ``token`` is not the thread's claim (the awaited call logs the ``StaleClaim``)."""
        if self._crash is not None or (self._rules and self._declines("release")):
            return NotImplemented
        claim = self._inner._claims.get(thread_id)  # type: ignore[attr-defined]
        if claim is None or claim.token != token:
            return NotImplemented
        clock = self._vclock  # (self._when(), inline)
        self._calls.append(["release", (thread_id, token), {}, None,
                            (clock, clock._ns) if clock is not None else self._now(), "ok",
                            None])
        self._inner.release_now(thread_id, token)  # type: ignore[attr-defined]
        return None

    def has_run(self, run_id: str) -> Any:  # bool, or NotImplemented
        """The in-memory store's ``has_run`` (internal), logged as the ``latest`` call
        ``latest(run_id)``; ``NotImplemented`` when it declines (see above)."""
        if self._crash is not None or (self._rules and self._declines("latest")):
            return NotImplemented
        self._calls.append(["latest", (run_id,), {}, None, self._when(), "ok", None])
        found: bool = self._inner.has_run(run_id)  # type: ignore[attr-defined]
        return found

    def kept_latest(self, run_id: str) -> Any:  # Checkpoint | None, or NotImplemented
        """The in-memory store's ``kept_latest`` (internal), logged as the ``latest`` call
        ``latest(run_id)``; ``NotImplemented`` when it declines (see above) or the run has
        no checkpoint (the awaited call checks ``run_id`` as it always did)."""
        if self._crash is not None or (self._rules and self._declines("latest")):
            return NotImplemented
        found: Checkpoint | None = self._inner.kept_latest(run_id)  # type: ignore[attr-defined]
        if found is None:
            return NotImplemented
        self._calls.append(["latest", (run_id,), {}, None, self._when(), "ok", None])
        return found

    def step_sink(self, run_id: str, thread_id: str, graph_id: str, revision: str,
                  tenant_id: str | None, fence: Any) -> Callable[..., Any] | None:
        """The in-memory store's ``step_sink`` (internal), each save logged as the ``save``
        call of its checkpoint; ``None`` when the inner store gives none or the store
        declines now, and the sink answers ``NotImplemented`` (nothing logged or stored)
        once it declines later (a rule added mid-run: the runtime then saves the general
        way)."""
        if self._crash is not None or (self._rules and self._declines("save")):
            return None
        inner_sink = self._inner.step_sink(  # type: ignore[attr-defined]
            run_id, thread_id, graph_id, revision, tenant_id, fence)
        if inner_sink is None:
            return None
        saves, log = self._saves, self._calls

        def sink(cid: str, *rest: Any) -> Any:
            if self._crash is not None or (self._rules and self._declines("save")):
                return NotImplemented
            # (the summary made when the log is read; self._when(), inline)
            clock = self._vclock
            call: list[Any] = ["save", (), None, (cid, run_id),
                               (clock, clock._ns) if clock is not None else self._now(),
                               "pending", None]
            log.append(call)
            try:
                inner_sink(cid, *rest)
            except Exception as exc:
                call[OUTCOME], call[ERROR] = "failed", exc
                raise
            saves.append(cid)
            call[OUTCOME] = "ok"
            return None

        return sink

    async def commit(
        self,
        thread_id: str,
        token: int,
        *,
        run_id: str,
        checkpoints: Sequence[Checkpoint] = (),
        events: Sequence[dict[str, Any]] = (),
        run: dict[str, Any] | None = None,
    ) -> None:
        """Commit through the fault rules (see
        :meth:`~pytest_graphflow._stores._protocol.ClaimingStore.commit`).

        It is logged as one ``commit`` call. A commit that carries checkpoints also counts as
        one save for the ``save`` rules (``reject_save``, ``crash_at("save")``, ...): such a
        rule's ``when(checkpoint)`` holds when it holds for any of them, and a rejected or
        crashed commit writes none of its parts.
        """
        commit = getattr(self._inner, "commit", None)
        if not callable(commit):
            raise AttributeError(f"{type(self._inner).__name__} has no commit()")
        cps = tuple(checkpoints)
        kwargs: dict[str, Any] = {"run_id": run_id, "checkpoints": list(cps),
                                  "events": list(events), "run": run}
        def summary() -> str:
            ids = ", ".join(cp.id for cp in cps)
            return (f"{thread_id}, token {token}, run {run_id}: "
                    f"{ids + '; ' if ids else ''}{len(kwargs['events'])} event(s)"
                    f"{', run record' if run is not None else ''}")

        watch = {"save": tuple((cp,) for cp in cps)} if cps and self._rules else {}
        await self._call("commit", commit, (thread_id, token), kwargs, summary=summary,
                         watch=watch)

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """Get through the fault rules (see :meth:`CheckpointStore.get`)."""
        result: Checkpoint | None = await self._call("get", self._inner.get, (checkpoint_id,),
                                                     {})
        return result

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """Load through the fault rules (see :meth:`CheckpointStore.load`)."""
        result: Checkpoint | None = await self._call("load", self._inner.load,
                                                     (run_id, node_id), {})
        return result

    async def latest(self, run_id: str) -> Checkpoint | None:
        """Latest through the fault rules (see :meth:`CheckpointStore.latest`)."""
        result: Checkpoint | None = await self._call("latest", self._inner.latest, (run_id,),
                                                     {})
        return result

    async def list(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> list[Checkpoint]:
        """List through the fault rules (see :meth:`CheckpointStore.list`)."""
        result = await self._call("list", self._inner.list, (run_id,), {"thread_id": thread_id})
        return cast("list[Checkpoint]", result)

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete through the fault rules (see :meth:`CheckpointStore.delete`)."""
        return cast("bool", await self._call("delete", self._inner.delete, (checkpoint_id,), {}))

    async def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
    ) -> str:
        """Fork through the fault rules (see :meth:`CheckpointStore.fork`)."""
        kwargs = {} if thread_id is None else {"thread_id": thread_id}
        result = await self._call("fork", self._inner.fork, (checkpoint_id, patch_state),
                                  kwargs)
        return cast("str", result)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the wrapper lacks: forward them to the inner store.
        inner = self.__dict__.get("_inner")
        if inner is None or name[:2] == "__":
            raise AttributeError(name)
        value = getattr(inner, name)
        if name[0] == "_" or not callable(value) or not _is_async(inner, name, value):
            return value  # a setting (``claim_ttl``, read every leg), a plain method
        method: Callable[..., Awaitable[Any]] = value
        # Kept on the instance, so it holds the wrapper weakly: no reference cycle (a test's
        # store then goes with the test, not at the collector's next full pass).
        ref = weakref.ref(self)

        async def forwarded(*args: Any, **kwargs: Any) -> Any:
            faulty = ref()
            if faulty is None:
                raise ReferenceError(f"FaultyStore.{name}: the FaultyStore it was taken from "
                                     "is gone; keep a reference to the store while you "
                                     "call its methods")
            return await faulty._call(name, method, args, kwargs)

        forwarded.__name__ = name
        forwarded.__qualname__ = f"FaultyStore.{name}"
        forwarded.__doc__ = getattr(value, "__doc__", None)
        self.__dict__[name] = forwarded  # found directly from now on
        return forwarded


class _Setting:
    """A setting of the inner store read through the wrapper (``FaultyStore.claim_ttl``): what
    ``__getattr__`` gives for it, found without the failed lookup first. A non-data
    descriptor, so a value set on the wrapper itself still wins, as before."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, store: FaultyStore | None, owner: type | None = None) -> Any:
        if store is None:
            return self
        inner = store.__dict__.get("_inner")
        value = getattr(inner, self.name) if inner is not None else None
        if inner is None or callable(value):  # (not a setting: the general forwarding)
            return store.__getattr__(self.name)
        return value


FaultyStore.claim_ttl = _Setting("claim_ttl")  # type: ignore[assignment]

_COMPLETE: set[type] = set()
"""Store classes that have every protocol operation themselves."""

_PROTOCOL = frozenset(PROTOCOL_OPS)

_WRAPPED: dict[tuple[StoreFeatures, bool], StoreFeatures] = {}
"""A wrapper's features by its inner store's and whether it answers at once (each test makes
a ``FaultyStore``)."""

_QUICK = frozenset({"claim", "release", "latest", "save", "adopt_fields", "claim_now",
                    "release_now", "has_run", "kept_latest", "step_sink"})
"""What an in-memory store instance may override that the wrapper's answers at once stand
for or call: then they are not passed on."""

_OVERRIDES = frozenset({"features", "save", "supports_fencing"}) | _QUICK
"""What an inner store instance may carry that changes its features or fencing."""

_BY_CLASS: dict[type, tuple[StoreFeatures, bool]] = {}
"""A wrapper's features and fencing by its inner store's class (see ``_wrapped``)."""

_ASYNC: dict[tuple[type, str], bool] = {}


def _is_async(inner: Any, name: str, value: Any) -> bool:
    """Whether ``value``, the attribute ``name`` of the store ``inner``, is a coroutine
    function: a method of the store's class is looked at once per class (``inspect`` costs
    more than the rest of forwarding it); anything else (an attribute of the instance, one
    set on it) every time, unless it is not callable at all (a setting such as
    ``claim_ttl``)."""
    key = (type(inner), name)
    found = _ASYNC.get(key)
    if found is not None and name not in getattr(inner, "__dict__", ()):
        return found
    if not callable(value):
        return False
    if name in getattr(inner, "__dict__", ()) or not isinstance(getattr(key[0], name, None),
                                                                 FunctionType):
        return inspect.iscoroutinefunction(value)
    found = _ASYNC[key] = inspect.iscoroutinefunction(value)
    return found
