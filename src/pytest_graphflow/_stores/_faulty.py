"""``FaultyStore``: a wrapper that injects faults into any checkpoint store (SPEC §7).

The wrapper follows Hypothesis' ``ReadOnlyDatabase`` pattern: it owns no data and changes no
behaviour of the store it wraps, it only decides, call by call, whether the call reaches the
inner store at all. Every decision is a pure function of the rules and the calls seen so far,
so a run over a ``FaultyStore`` is as deterministic as the runtime driving it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

import anyio

from .._records._checkpoint import Checkpoint
from .._time._clock import Clock
from ..errors import InvalidArgument, SimulatedCrash
from ._faults import (
    PROTOCOL_OPS,
    CrashPhase,
    ErrorSpec,
    Fault,
    FaultRule,
    Outcome,
    StoreCall,
    _make_error,
    _pending_outcome,
    _summarize,
)
from ._protocol import CheckpointStore

__all__ = ["Fault", "FaultRule", "FaultyStore", "StoreCall"]

class FaultyStore:
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

    def __init__(self, inner: CheckpointStore, *, clock: Clock | None = None) -> None:
        missing = [op for op in PROTOCOL_OPS if not callable(getattr(inner, op, None))]
        if missing:
            raise InvalidArgument(
                f"FaultyStore(inner={inner!r}): inner is not a CheckpointStore; it lacks "
                f"{missing}"
            )
        self._inner = inner
        self._clock = clock
        self._rules: list[FaultRule] = []
        self._calls: list[StoreCall] = []
        self._saves: list[str] = []
        self._crash: StoreCall | None = None

    # ----------------------------------------------------------------- introspection

    @property
    def supports_fencing(self) -> bool:
        """Whether the wrapped store checks fencing tokens (its class says so and its
        ``save`` takes ``fence=``); fenced saves and commits are then passed on."""
        inner = self._inner
        found = inspect.getattr_static(inner, "supports_fencing", False)
        if isinstance(found, property):
            found = getattr(inner, "supports_fencing", False)
        if not found:
            return False
        params = inspect.signature(inner.save).parameters
        return "fence" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())

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
        return list(self._calls)

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
        return "\n".join(map(str, self._calls)) or "(no store calls)"

    def __repr__(self) -> str:
        state = " dead" if self._crash is not None else ""
        return (
            f"<FaultyStore over {type(self._inner).__name__}{state}: "
            f"{len(self._rules)} rule(s), {len(self._calls)} call(s)>"
        )

    # ------------------------------------------------------------------------ rules

    def bind_clock(self, clock: Clock, *, replace: bool = False) -> None:
        """Use ``clock`` for delays and call times, unless a clock is already bound.

        The runtime calls this when it starts a run, so delays happen in the run's (virtual)
        time; a clock given to the constructor wins unless ``replace=True``.
        """
        if self._clock is None or replace:
            self._clock = clock

    def add_fault(self, fault: Fault) -> FaultyStore:
        """Add a rule described by ``fault``.

        Returns:
            This store, for chaining; the new rule is :attr:`last_rule`.

        Raises:
            InvalidArgument: when the inner store has no coroutine method ``fault.op``.
        """
        if not isinstance(fault, Fault):
            raise InvalidArgument(f"add_fault({fault!r}): expected a Fault")
        if fault.op not in PROTOCOL_OPS and not inspect.iscoroutinefunction(
            getattr(self._inner, fault.op, None)
        ):
            raise InvalidArgument(
                f"{fault.describe()}: {type(self._inner).__name__} has no coroutine method "
                f"{fault.op!r}; store operations: {sorted(self._async_ops())}"
            )
        self._rules.append(FaultRule(fault))
        return self

    def reject_save(
        self,
        nth: int | None = None,
        *,
        every: int | None = None,
        when: Callable[[Checkpoint], bool] | None = None,
        error: ErrorSpec = None,
        times: int | None = None,
    ) -> FaultyStore:
        """Make ``save`` raise, without saving anything, on chosen calls.

        Args:
            nth: reject the nth save made after this rule was added (1-based).
            every: reject every ``every``-th save.
            when: count only saves whose checkpoint satisfies ``when(checkpoint)``; alone, it
                rejects every such save.
            error: the exception (instance or class) to raise; by default a
                :class:`~pytest_graphflow.errors.StoreFault` naming the save and checkpoint.
            times: reject at most this many saves.

        Returns:
            This store, for chaining.
        """
        return self.add_fault(
            Fault.reject_save(nth, every=every, when=when, error=error, times=times)
        )

    def fail(
        self,
        op: str,
        nth: int | None = None,
        *,
        every: int | None = None,
        when: Callable[..., bool] | None = None,
        error: ErrorSpec = None,
        times: int | None = None,
    ) -> FaultyStore:
        """Make operation ``op`` raise, without reaching the inner store, on chosen calls.

        Args:
            op: ``"get"``, ``"load"``, ``"latest"``, ``"list"``, ``"delete"``, ``"fork"``,
                ``"save"`` or any coroutine method of the inner store (``"claim"``, ...).
            nth: fail the nth call of ``op`` made after this rule was added (1-based).
            every: fail every ``every``-th call.
            when: count only calls for which ``when(*args, **kwargs)`` is true.
            error: the exception (instance or class); by default a ``StoreFault``.
            times: fail at most this many calls.

        Returns:
            This store, for chaining.
        """
        return self.add_fault(Fault.fail(op, nth, every=every, when=when, error=error, times=times))

    def delay(
        self,
        op: str,
        seconds: float,
        *,
        nth: int | None = None,
        every: int | None = None,
        when: Callable[..., bool] | None = None,
        times: int | None = None,
    ) -> FaultyStore:
        """Make calls of ``op`` wait ``seconds`` on the store's clock before anything else.

        Under a :class:`~pytest_graphflow.VirtualClock` the wait is virtual (``clock.sleep``);
        with no clock bound it is real (``anyio.sleep``). Without ``nth``/``every``/``when``
        every call waits.

        Returns:
            This store, for chaining.
        """
        return self.add_fault(
            Fault.delay(op, seconds, nth=nth, every=every, when=when, times=times)
        )

    def crash_at(
        self,
        op: str = "save",
        nth: int | None = 1,
        *,
        when: Callable[..., bool] | None = None,
        phase: CrashPhase = "before",
    ) -> FaultyStore:
        """Simulate a process death at the ``nth`` call of ``op`` (that satisfies ``when``).

        The call raises :class:`~pytest_graphflow.errors.SimulatedCrash` (a ``BaseException``,
        so no ``except Exception`` swallows it). With ``phase="before"`` the call does not
        reach the inner store; with ``phase="after"`` it does, and the crash comes after the
        inner store answered, so the caller never learns the outcome. From then on the store
        is dead: every call raises ``SimulatedCrash`` and reaches nothing, until
        :meth:`revive`. To recover the way a real deployment would, open a fresh runtime over
        :attr:`inner`.

        Returns:
            This store, for chaining.
        """
        return self.add_fault(Fault.crash_at(op, nth, when=when, phase=phase))

    def clear_rules(self) -> FaultyStore:
        """Remove every rule (the log, the saves and a crash are kept).

        Returns:
            This store, for chaining.
        """
        self._rules.clear()
        return self

    def revive(self) -> FaultyStore:
        """Bring a crashed store back to life (its rules stay; a fired crash does not re-fire).

        Returns:
            This store, for chaining.
        """
        self._crash = None
        return self

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
        ids = ", ".join(cp.id for cp in cps)
        summary = (f"{thread_id}, token {token}, run {run_id}: "
                   f"{ids + '; ' if ids else ''}{len(kwargs['events'])} event(s)"
                   f"{', run record' if run is not None else ''}")
        watch = {"save": tuple((cp,) for cp in cps)} if cps else {}
        await self._call("commit", commit, (thread_id, token), kwargs, summary=summary,
                         watch=watch)

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """Get through the fault rules (see :meth:`CheckpointStore.get`)."""
        result = await self._call("get", self._inner.get, (checkpoint_id,), {})
        return cast("Checkpoint | None", result)

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """Load through the fault rules (see :meth:`CheckpointStore.load`)."""
        result = await self._call("load", self._inner.load, (run_id, node_id), {})
        return cast("Checkpoint | None", result)

    async def latest(self, run_id: str) -> Checkpoint | None:
        """Latest through the fault rules (see :meth:`CheckpointStore.latest`)."""
        result = await self._call("latest", self._inner.latest, (run_id,), {})
        return cast("Checkpoint | None", result)

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
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        value = getattr(inner, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(value):
            return value
        method = cast("Callable[..., Awaitable[Any]]", value)

        async def forwarded(*args: Any, **kwargs: Any) -> Any:
            return await self._call(name, method, args, kwargs)

        forwarded.__name__ = name
        forwarded.__qualname__ = f"FaultyStore.{name}"
        forwarded.__doc__ = getattr(value, "__doc__", None)
        return forwarded

    # ------------------------------------------------------------- machinery

    def _async_ops(self) -> set[str]:
        ops = set(PROTOCOL_OPS)
        for name in dir(self._inner):
            if not name.startswith("_") and inspect.iscoroutinefunction(
                getattr(self._inner, name, None)
            ):
                ops.add(name)
        return ops

    def _now(self) -> datetime | None:
        clock = self._clock
        return clock.now() if clock is not None and getattr(clock, "virtual", False) else None

    def _finish(
        self, index: int, outcome: Outcome, error: BaseException | None = None, **more: Any
    ) -> None:
        # A copy with the outcome filled in (what ``dataclasses.replace`` does, without its
        # per-field work: this runs twice per store call of every test run).
        done = object.__new__(StoreCall)
        fields = dict(self._calls[index].__dict__)
        fields["outcome"] = outcome
        fields["error"] = None if error is None else repr(error)
        fields.update(more)
        object.__setattr__(done, "__dict__", fields)
        self._calls[index] = done

    def _dead_error(self, op: str, summary: str) -> SimulatedCrash:
        crash = self._crash
        assert crash is not None
        return SimulatedCrash(
            f"store is dead: the process crashed at call #{crash.index} "
            f"({crash.op} {crash.args}); {op}({summary}) reached nothing. Recover with a fresh "
            "runtime over the inner store (FaultyStore.inner), or call revive()"
        )

    async def _call(
        self,
        op: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        summary: str | None = None,
        watch: Mapping[str, tuple[tuple[Any, ...], ...]] | None = None,
    ) -> Any:
        index = len(self._calls)
        if summary is None:
            summary = _summarize(args, kwargs)
        self._calls.append(StoreCall(index, op, summary, "pending", time=self._now()))
        if self._crash is not None:
            dead = self._dead_error(op, summary)
            self._finish(index, "dead", dead, injected=True)
            raise dead
        try:
            wait = 0.0
            decider: FaultRule | None = None
            for rule in list(self._rules):
                if rule.op == op:
                    fires = rule._count(args, kwargs)
                elif watch and rule.op in watch:
                    # e.g. a save rule watching a commit that carries checkpoints
                    fires = rule._count((), {}, each=watch[rule.op])
                else:
                    continue
                if not fires:
                    continue
                if rule.kind == "delay":
                    rule.hits += 1
                    wait += rule.fault.seconds
                elif decider is None:
                    rule.hits += 1
                    decider = rule
            return await self._run(index, op, summary, fn, args, kwargs, wait, decider)
        except BaseException as exc:
            if self._calls[index].outcome == "pending":
                # Cancelled while waiting, or a rule's own ``when`` predicate raised.
                self._finish(index, _pending_outcome(exc), exc)
            raise

    async def _run(
        self,
        index: int,
        op: str,
        summary: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        wait: float,
        decider: FaultRule | None,
    ) -> Any:
        if wait:
            self._calls[index] = replace(self._calls[index], delay=wait)
            if self._clock is not None:
                await self._clock.sleep(wait)
            else:
                await anyio.sleep(wait)
            if self._crash is not None:  # another call crashed the store meanwhile
                dead = self._dead_error(op, summary)
                self._finish(index, "dead", dead, injected=True)
                raise dead
        fault = None if decider is None else decider.fault
        if fault is not None and fault.kind == "crash" and fault.phase == "before":
            raise self._die(index, decider, op, summary)
        if fault is not None and fault.kind in ("reject", "fail"):
            assert decider is not None
            error = _make_error(decider, op, summary, args)
            self._finish(index, "rejected" if fault.kind == "reject" else "failed", error,
                         injected=True)
            raise error.with_traceback(None)
        try:
            result = await fn(*args, **kwargs)
        except Exception as exc:
            if fault is not None and fault.kind == "crash":
                raise self._die(index, decider, op, summary) from exc
            self._finish(index, "failed", exc)
            raise
        if op == "save":
            self._saves.append(args[0].id)
        elif op == "commit":
            self._saves.extend(cp.id for cp in kwargs["checkpoints"])
        if fault is not None and fault.kind == "crash":
            raise self._die(index, decider, op, summary)
        if self._crash is not None:  # the process died while the inner store worked
            dead = self._dead_error(op, summary)
            self._finish(index, "dead", dead, injected=True)
            raise dead
        self._finish(index, "ok")
        return result

    def _die(
        self, index: int, rule: FaultRule | None, op: str, summary: str
    ) -> SimulatedCrash:
        assert rule is not None
        phase = rule.fault.phase
        crash = SimulatedCrash(
            f"simulated crash {phase} {op} #{rule.seen} ({summary}): "
            f"{rule.fault.describe()}. "
            + ("It did not reach the store" if phase == "before"
               else "It reached the store, but the caller never learned the outcome")
            + "; nothing after it reaches the store. Recover with a fresh runtime over the "
            "inner store (FaultyStore.inner)."
        )
        self._finish(index, "crashed", crash, injected=True)
        self._crash = self._calls[index]
        return crash
