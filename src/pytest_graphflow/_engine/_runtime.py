"""``GraphRuntime``: running, streaming and resuming graphs (SPEC §2).

The runtime's public API. Preparing each leg of a run (a fresh run or a resume: reading,
claiming and checking the thread) is ``Legs`` in ``_legs``; argument and option checks are in
``_options``; ``update_state`` is ``write_update`` in ``_update``; the loop itself is the
``Runner`` of ``_runner``.
"""

from __future__ import annotations

import functools
import sys
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar, Unpack

from pydantic import BaseModel

from .._graph._blocking import install_blocking_sleep_warning
from .._graph._builder import POLICIES, CheckpointPolicy, CompiledGraph
from .._graph._middleware import Guardrail, Middleware, checked_hooks
from .._graph._node import Resume
from .._records._checkpoint import Checkpoint
from .._records._checks import check_id, check_optional_id
from .._records._events import EventBase, Interrupt
from .._records._ids import IdSource
from .._stores._claims import artifact_bytes, store_claim_ttl
from .._stores._default import default_store
from .._stores._deletion import DeletedThread
from .._stores._features import StoreFeatures, check_store, features_of
from .._stores._protocol import CheckpointStore
from .._stores._waiting import Waiting, check_waiting
from .._time._clock import Clock, RealClock, VirtualClock
from .._time._hooks import INSTALLED, install_hooks
from .._time._loops import in_running_loop, run_sync_owned
from ..errors import (
    CheckpointNotFound,
    GraphExecutionError,
    InvalidArgument,
    TenantMismatch,
)
from ._deadline_ops import expire_due, list_waiting
from ._delete import delete_thread
from ._fork import fork_checkpoint
from ._host import KEPT_RECORDS, LegHost, RunBook, RunIds, SeededIds
from ._legs import Legs, check_recoverable
from ._options import RunOptions, check_budget, check_constructor, check_graph, run_options
from ._results import EventLog, GraphResult, RunLeg, RunRecord, Trace
from ._run_state import RunState
from ._runner import Runner
from ._step import run_step
from ._stream import RunHandle, RunStream, drain, run_to_end
from ._subgraph import run_subgraph
from ._write_update import write_update

__all__ = ["GraphRuntime", "child_runtime", "run_sync", "use_run_ids"]

T = TypeVar("T")
_CLOCKS = (type(None), VirtualClock, RealClock)
_SYNC_NAMES: dict[str, tuple[str, str]] = {}
"""What a sync method's error says it is and what to await instead, by async method name."""
_DEFAULT_FEATURES: dict[type, StoreFeatures] = {}
"""What the store a runtime makes itself supports, by class (read once per process)."""
StreamMode = Literal["events", "updates", "values", "custom", "debug"]
_DEFAULT: Any = object()


class GraphRuntime:
    """Runs compiled graphs: ``invoke``/``ainvoke``, ``stream``, ``aresume``, ``start``.

    With the default real clock and ``seed=None`` it is the production runtime; with a
    :class:`VirtualClock` and a ``seed`` it is the deterministic testing runtime: same graph,
    input and seed give the same event stream, ids and times included.

    Args:
        store: the checkpoint store (default: a fresh :class:`InMemoryCheckpointStore`).
        clock: :class:`RealClock` (default) or :class:`VirtualClock`.
        seed: decides the order of a parallel batch's tasks and every id; ``None`` for
            system randomness.
        max_supersteps: the superstep budget of a run (leg); ``SuperstepLimit`` beyond it.
        timeout: seconds, on the runtime's clock, a run (leg) may take; ``RunTimedOut``.
        on_interrupt: a hook answering interrupts at once (return ``PAUSE`` to pause).
        tenant_id: the tenant runs belong to; a thread belongs to one tenant.
        claim_ttl: seconds a thread claim lasts, on this runtime's clock; ``None`` (the
            default) takes the store's own ``claim_ttl`` (30 s for a store without one), so
            the store is the one place to set it. A number here wins over the store's.
        backend: the anyio backend of the sync API (``"asyncio"`` or ``"trio"``).
        checkpoint_policy: run every graph under this policy instead of its own (same
            structure and revision, see :meth:`CompiledGraph.with_policy`).
        on_leg: called with a :class:`RunLeg` as each leg of a run starts; the leg fills in
            (events, error, visited nodes) as the run goes. With it, every API builds events,
            ``invoke`` included.
        middleware: :class:`Middleware` around the node tasks of every graph this runtime
            runs, outermost first (outside each graph's own); see ``docs/middleware.md``.
            Its ``nodes=`` names nodes of whichever graphs have them.
        guardrails: :class:`Guardrail` checks of every graph's node results, in order (before
            each graph's own).
    """

    def __init__(
        self,
        store: CheckpointStore | None = _DEFAULT,
        *,
        clock: Clock | None = None,
        seed: int | None = None,
        max_supersteps: int | None = 1000,
        timeout: float | None = None,
        on_interrupt: Callable[[Interrupt], Any] | None = None,
        tenant_id: str | None = None,
        claim_ttl: float | None = None,
        backend: str = "asyncio",
        checkpoint_policy: CheckpointPolicy | None = None,
        on_leg: Callable[[RunLeg], None] | None = None,
        middleware: Iterable[Middleware] | None = None,
        guardrails: Iterable[Guardrail] | None = None,
    ) -> None:
        if store is _DEFAULT or store is None:
            store = default_store()
            # The store the runtime made itself: what its class supports is read once.
            features = _DEFAULT_FEATURES.get(type(store))
            if features is None:
                check_store(store, "GraphRuntime")
                features = _DEFAULT_FEATURES[type(store)] = features_of(store)
        else:
            check_store(store, "GraphRuntime")
            features = features_of(store)
        if seed is not None and type(seed) is not int and (
                not isinstance(seed, int) or isinstance(seed, bool)):
            raise InvalidArgument(f"GraphRuntime(seed={seed!r}): seed must be an int or None")
        if max_supersteps != 1000 or timeout is not None or type(max_supersteps) is not int:
            check_budget(max_supersteps, timeout)
        if not (on_interrupt is None and tenant_id is None and claim_ttl is None
                and on_leg is None and backend == "asyncio" and type(clock) in _CLOCKS):
            check_constructor(clock, on_interrupt, tenant_id, claim_ttl, backend, on_leg)
        if checkpoint_policy is not None and checkpoint_policy not in POLICIES:
            raise InvalidArgument(f"GraphRuntime(checkpoint_policy={checkpoint_policy!r}): use "
                                  f"one of {sorted(POLICIES)} or None")
        hooks: tuple[tuple[Middleware, ...], tuple[Guardrail, ...]] = ((), ()) \
            if middleware is None and guardrails is None \
            else checked_hooks(middleware, guardrails, "GraphRuntime")
        self._set_up(store, features, clock if clock is not None else RealClock(), seed,
                     checkpoint_policy, on_leg, max_supersteps=max_supersteps, timeout=timeout,
                     on_interrupt=on_interrupt, tenant_id=tenant_id,
                     claim_ttl=None if claim_ttl is None else float(claim_ttl),
                     backend=backend, hooks=hooks)

    def _set_up(
        self,
        store: CheckpointStore,
        features: StoreFeatures,
        clock: Clock,
        seed: int | None,
        checkpoint_policy: CheckpointPolicy | None,
        on_leg: Callable[[RunLeg], None] | None,
        *,
        max_supersteps: int | None = 1000,
        timeout: float | None = None,
        on_interrupt: Callable[[Interrupt], Any] | None = None,
        tenant_id: str | None = None,
        claim_ttl: float | None = None,
        backend: str = "asyncio",
        hooks: tuple[tuple[Middleware, ...], tuple[Guardrail, ...]] = ((), ()),
    ) -> None:
        """The runtime's parts, from arguments already checked and the store's features
        already read (internal): what ``__init__`` does after its checks, and all a caller
        that made the parts itself does (the plugin's runtime of a test: its checks cost a
        few dozen calls a test, and their answer is the same for every test)."""
        self._store = store
        self._features = features
        self.clock: Clock = clock
        self.seed = seed
        self.max_supersteps = max_supersteps
        self.timeout = timeout
        self.on_interrupt = on_interrupt
        self.tenant_id = tenant_id
        self._claim_ttl = claim_ttl
        self.backend = backend
        self.checkpoint_policy = checkpoint_policy
        self.on_leg = on_leg
        self.middleware: tuple[Middleware, ...] = hooks[0]
        self.guardrails: tuple[Guardrail, ...] = hooks[1]
        self._book = RunBook(IdSource(None) if seed is None else SeededIds(seed))
        if features.clock_binding:
            store.bind_clock(clock)  # type: ignore[attr-defined]
        # The preparer of legs sees the runtime through a weak proxy: no reference cycle,
        # so a runtime and everything of its runs go as soon as the caller drops it, without
        # waiting for the garbage collector (the default path makes one runtime per run).
        host: LegHost = weakref.proxy(self)
        self._legs = Legs(host, self._book, _SUBGRAPHS, store, features)
        # The first runtime patches the sleeps (importing patches nothing).
        if not INSTALLED[0] or (not INSTALLED[1] and "trio" in sys.modules):
            install_hooks()
        if not getattr(time.sleep, "__graphflow__", False):  # (else it is installed)
            install_blocking_sleep_warning()

    def __repr__(self) -> str:
        tenant = "" if self.tenant_id is None else f", tenant_id={self.tenant_id!r}"
        return (f"{type(self).__name__}(seed={self.seed!r}, clock={self.clock!r}, "
                f"store={self.store!r}{tenant})")

    @property
    def store(self) -> CheckpointStore:
        """The runtime's checkpoint store."""
        return self._store

    @store.setter
    def store(self, store: CheckpointStore) -> None:
        self._store = store
        self._features = features_of(store)
        self._legs.use_store(store, self._features)

    @property
    def store_features(self) -> StoreFeatures:
        """What the runtime's store supports (:class:`StoreFeatures`), read once when the
        store is set."""
        return self._features

    @property
    def claim_ttl(self) -> float:
        """Seconds a thread claim of this runtime lasts (on its clock): the ``claim_ttl``
        given to the runtime, else the store's ``claim_ttl``, else 30."""
        if self._claim_ttl is not None:
            return self._claim_ttl
        return store_claim_ttl(self._store)

    # ------------------------------------------------------------------ public API

    def stream(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        thread_id: str | None = None,
        mode: StreamMode = "events",
        **options: Unpack[RunOptions],
    ) -> RunStream:
        """Start a run and stream its events (or a view of them, see ``mode``)."""
        check_graph(graph)
        check_optional_id(thread_id, "thread_id", "stream")
        opts = run_options(self, options)
        return RunStream(lambda: self._legs.prepare_new(graph, input, thread_id, opts), mode)

    def resume_stream(
        self,
        run_or_checkpoint_id: str,
        resume: Resume | None = None,
        *,
        graph: CompiledGraph | None = None,
        mode: StreamMode = "events",
        **options: Unpack[RunOptions],
    ) -> RunStream:
        """Resume a paused, failed or cancelled run and stream its events from there.

        A run id continues from the run's last saved checkpoint (C8); a checkpoint id from
        exactly that checkpoint (time travel).
        """
        check_id(run_or_checkpoint_id, "run_or_checkpoint_id", "resume")
        if resume is not None and not isinstance(resume, Resume):
            raise InvalidArgument(f"resume={resume!r}: pass a Resume(...) or None")
        if graph is not None:
            check_graph(graph)
        opts = run_options(self, options)
        stream: RunStream

        async def prepare() -> Runner:
            opts["record_events"] = stream._record_events
            return await self._legs.prepare_resume(run_or_checkpoint_id, resume, graph, opts)

        stream = RunStream(prepare, mode)
        return stream

    async def ainvoke(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        thread_id: str | None = None,
        **options: Unpack[RunOptions],
    ) -> GraphResult[Any]:
        """Run ``graph`` to its end (or halt) and return the result.

        Raises:
            Exception: the store's own exception for a rejected save (C6), an edge
                function's own exception (C7), and caller errors; failures *in* the run are
                in the result.
        """
        if type(graph) is not CompiledGraph:
            check_graph(graph)
        if thread_id is not None:
            check_optional_id(thread_id, "thread_id", "invoke")
        opts = run_options(self, options)
        opts["record_events"] = False
        return await run_to_end(await self._legs.prepare_new(graph, input, thread_id, opts))

    async def aresume(
        self,
        run_or_checkpoint_id: str,
        resume: Resume | None = None,
        *,
        graph: CompiledGraph | None = None,
        **options: Unpack[RunOptions],
    ) -> GraphResult[Any]:
        """Resume a run and return its result (see :meth:`resume_stream`)."""
        check_id(run_or_checkpoint_id, "run_or_checkpoint_id", "resume")
        if resume is not None and type(resume) is not Resume and not isinstance(resume, Resume):
            raise InvalidArgument(f"resume={resume!r}: pass a Resume(...) or None")
        if graph is not None:
            check_graph(graph)
        opts = run_options(self, options)
        opts["record_events"] = False
        return await run_to_end(await self._legs.prepare_resume(
            run_or_checkpoint_id, resume, graph, opts))

    async def arecover(
        self,
        thread_id: str,
        *,
        graph: CompiledGraph | None = None,
        **options: Unpack[RunOptions],
    ) -> GraphResult[Any]:
        """Continue the incomplete run of ``thread_id`` (after a crash, a failure, a
        cancellation or a timeout) from its last checkpoint — what a fresh process calls
        when it knows the thread but not the run.

        Raises:
            NothingToRecover: the thread has no checkpoint, or its last run completed.
            ThreadSuspended: the thread waits for answers; resume it with a ``Resume``.
        """
        check_id(thread_id, "thread_id", "recover")
        if graph is not None:
            check_graph(graph)
        opts = run_options(self, options)
        tenant = opts["tenant_id"]
        last = await self._legs.thread_latest(thread_id)
        if last is not None and last.tenant_id != tenant:
            raise TenantMismatch(thread_id, tenant)
        check_recoverable(thread_id, last)
        assert last is not None
        opts["record_events"] = False
        opts["recover"] = thread_id
        run_id = last.run_id
        return await drain(RunStream(
            lambda: self._legs.prepare_resume(run_id, None, graph, opts), "events"))

    def recover(
        self, thread_id: str, *, graph: CompiledGraph | None = None, **options: Unpack[RunOptions]
    ) -> GraphResult[Any]:
        """Synchronous :meth:`arecover`."""
        return self._run_sync(self.arecover, thread_id, graph=graph, **options)

    def invoke(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        thread_id: str | None = None,
        **options: Unpack[RunOptions],
    ) -> GraphResult[Any]:
        """Synchronous :meth:`ainvoke` (runs an event loop of ``backend``)."""
        return run_sync_owned(
            functools.partial(self.ainvoke, graph, input, thread_id=thread_id, **options),
            self.clock, self.backend, what="invoke()", instead=_INSTEAD_INVOKE,
            coroutine=True)

    def resume(
        self,
        run_or_checkpoint_id: str,
        resume: Resume | None = None,
        *,
        graph: CompiledGraph | None = None,
        **options: Unpack[RunOptions],
    ) -> GraphResult[Any]:
        """Synchronous :meth:`aresume`."""
        return run_sync_owned(
            functools.partial(self.aresume, run_or_checkpoint_id, resume, graph=graph,
                              **options),
            self.clock, self.backend, what="resume()", instead=_INSTEAD_RESUME,
            coroutine=True)

    async def start(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        thread_id: str | None = None,
        **options: Unpack[RunOptions],
    ) -> RunHandle:
        """Admit a run and return its :class:`RunHandle` (claims and ids are taken now)."""
        stream = self.stream(graph, input, thread_id=thread_id, **options)
        runner = await stream._ensure()
        return RunHandle(stream, runner.run_id)

    async def atrace(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        **options: Unpack[RunOptions],
    ) -> Trace:
        """Run to the end and return a :class:`Trace` (result, events, store log)."""
        return await self._trace(self.stream(graph, input, **options))

    def trace(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        **options: Unpack[RunOptions],
    ) -> Trace:
        """Synchronous :meth:`atrace`."""
        return self._run_sync(self.atrace, graph, input, **options)

    async def aresume_trace(
        self, run_or_checkpoint_id: str, resume: Resume | None = None, **options: Unpack[RunOptions]
    ) -> Trace:
        """Resume and return a :class:`Trace` of the resumed leg."""
        return await self._trace(self.resume_stream(run_or_checkpoint_id, resume, **options))

    def resume_trace(
        self, run_or_checkpoint_id: str, resume: Resume | None = None, **options: Unpack[RunOptions]
    ) -> Trace:
        """Synchronous :meth:`aresume_trace`."""
        return self._run_sync(self.aresume_trace, run_or_checkpoint_id, resume, **options)

    async def astep(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        run_id: str | None = None,
        resume: Resume | None = None,
        **options: Unpack[RunOptions],
    ) -> GraphResult[Any]:
        """Run one superstep: start a run (``run_id=None``) or continue ``run_id`` by one.

        The run pauses after the superstep as at a breakpoint after every node (status
        ``interrupted``, ``result.breakpoint`` naming the batch's nodes); call again with
        ``run_id=result.run_id`` for the next one. A superstep that ends the run, fails it or
        pauses it at an interrupt returns that instead (answer interrupts with ``resume=``).

        Cancelled while it runs (the caller's cancel scope, ``task.cancel()``), a step keeps
        nothing of its superstep and returns status ``cancelled`` with the cancellation still
        requested (seed 004's "interrupt flag"; see :mod:`._step`); the sync ``step`` lets a
        ``KeyboardInterrupt`` go on after cancelling the superstep the same way.
        """
        return await run_step(self, self._legs, self.resume_stream, graph, input, run_id,
                              resume, options)

    def step(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        run_id: str | None = None,
        resume: Resume | None = None,
        **options: Unpack[RunOptions],
    ) -> GraphResult[Any]:
        """Synchronous :meth:`astep`."""
        return self._run_sync(self.astep, graph, input, run_id=run_id, resume=resume,
                              **options)

    async def aupdate_state(
        self,
        run_or_thread_id: str,
        values: Mapping[str, Any] | BaseModel,
        *,
        as_node: str | None = None,
        graph: CompiledGraph | None = None,
    ) -> str:
        """Write ``values`` into the state from outside a run; return the new checkpoint id.

        ``run_or_thread_id`` is a run id (its last checkpoint), a checkpoint id (exactly that
        one: the update forks the history from there) or a thread id (its last checkpoint).
        The values merge as a node's patch would (reducers applied, validated), into a new
        checkpoint whose parent is the one updated. Without ``as_node`` only the state changes:
        a paused run stays paused at the same interrupts. With ``as_node`` the update is written
        as that node (its ``writes=`` contract applies) and the run continues as if the node had
        just completed: its edges are decided on the new state, and its targets replace the
        pending tasks and interrupts. Resume the run by id to continue it.

        Raises:
            CheckpointNotFound: nothing matches ``run_or_thread_id``.
            UnknownKey, UndeclaredWrite, UpdateRejected: bad values (nothing is written).
            ThreadBusy: a run holds the thread.
            InvalidArgument: ``as_node`` is not a node of the graph.
        """
        return await write_update(self._legs, run_or_thread_id, values, as_node=as_node,
                                  graph=graph)

    def update_state(
        self,
        run_or_thread_id: str,
        values: Mapping[str, Any] | BaseModel,
        *,
        as_node: str | None = None,
        graph: CompiledGraph | None = None,
    ) -> str:
        """Synchronous :meth:`aupdate_state`."""
        return self._run_sync(self.aupdate_state, run_or_thread_id, values, as_node=as_node,
                              graph=graph)

    async def afork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        graph: CompiledGraph | None = None,
        tenant_id: str | None = _DEFAULT,
    ) -> str:
        """Copy a checkpoint into a new run on a new thread, with ``patch_state`` replacing
        keys of its state; return the new run id (resume it by that id).

        The arguments are checked here, for every store, before the store is asked to
        write: each key of ``patch_state`` must be a state key of the checkpoint's graph
        (``graph``, or one this runtime knows) and each value must fit its type; without a
        known graph, a key of the checkpoint's state and a value of the kind it holds.

        Args:
            checkpoint_id: the checkpoint to copy.
            patch_state: state keys to values, applied after copying.
            thread_id: the new thread (default: a fresh id); it must not exist yet.
            graph: the checkpoint's graph, to check ``patch_state`` against its schema.
            tenant_id: the caller's tenant (default: the runtime's ``tenant_id``).

        Raises:
            InvalidArgument: a bad id, or a patch that does not fit; nothing is written.
            CheckpointNotFound: the store has no such checkpoint.
            TenantMismatch: the checkpoint's run belongs to another tenant.
            ForkTargetExists: ``thread_id`` names a thread the store holds.
        """
        tenant = self.tenant_id if tenant_id is _DEFAULT else tenant_id
        return await fork_checkpoint(self._legs, checkpoint_id, patch_state, thread_id, graph,
                                     tenant)

    def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        graph: CompiledGraph | None = None,
        tenant_id: str | None = _DEFAULT,
    ) -> str:
        """Synchronous :meth:`afork`."""
        return self._run_sync(self.afork, checkpoint_id, patch_state, thread_id=thread_id,
                              graph=graph, tenant_id=tenant_id)

    async def attach(self, run_id: str, name: str, data: bytes | str,
                     media_type: str = "application/octet-stream", *,
                     tenant_id: str | None = _DEFAULT) -> None:
        """Attach an artifact to a run from outside it (seed 002), replacing one of that name.

        Args:
            tenant_id: the caller's tenant (default: the runtime's ``tenant_id``).

        Raises:
            InvalidArgument: a bad name, data or media type.
            TenantMismatch: the run belongs to another tenant (nothing is written).
            GraphExecutionError: the store keeps no artifacts.
        """
        content = artifact_bytes(run_id, name, data, media_type, where="attach")
        await self._check_tenant(run_id, tenant_id, "attach")
        if not self._features.artifacts:
            raise GraphExecutionError(f"the store {type(self.store).__name__} keeps no "
                                      "artifacts (its features say artifacts=False)")
        await self.store.put_artifact(  # type: ignore[attr-defined]
            run_id, name, content, media_type)

    async def artifacts(self, run_id: str, *, tenant_id: str | None = _DEFAULT
                        ) -> list[dict[str, Any]]:
        """The run's artifacts (``name``, ``media_type``, ``size``), in the order first stored;
        ``[]`` when the store keeps none.

        Args:
            tenant_id: the caller's tenant (default: the runtime's ``tenant_id``).

        Raises:
            TenantMismatch: the run belongs to another tenant (nothing of it is returned).
        """
        await self._check_tenant(run_id, tenant_id, "artifacts")
        if not self._features.artifacts:
            return []
        return list(await self.store.artifacts(run_id))  # type: ignore[attr-defined]

    async def adelete_thread(
        self, thread_id: str, *, tenant_id: str | None = _DEFAULT
    ) -> DeletedThread:
        """Delete a thread from the store: its checkpoints, the events, run records and
        artifacts of its runs, and its claim, in one transaction (seed 004's
        ``deleteThread``). A thread the store does not know is a no-op (all zeros). After it,
        resuming one of its runs or checkpoints raises ``CheckpointNotFound``.

        Args:
            thread_id: the thread.
            tenant_id: the caller's tenant (default: the runtime's ``tenant_id``).

        Returns:
            What was deleted (:class:`DeletedThread`).

        Raises:
            TenantMismatch: the thread belongs to another tenant; nothing is deleted.
            ThreadBusy: a run holds the thread (running here, or a live claim of any
                process); nothing is deleted.
            GraphExecutionError: the store cannot delete threads (no ``delete_thread``).
        """
        tenant = self.tenant_id if tenant_id is _DEFAULT else tenant_id
        return await delete_thread(self._legs, thread_id, tenant)

    def delete_thread(
        self, thread_id: str, *, tenant_id: str | None = _DEFAULT
    ) -> DeletedThread:
        """Synchronous :meth:`adelete_thread`."""
        return self._run_sync(self.adelete_thread, thread_id, tenant_id=tenant_id)

    async def history(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        tenant_id: str | None = _DEFAULT,
    ) -> list[Checkpoint]:
        """The checkpoints of a run, oldest first (resume from any of them by id).

        Args:
            run_id: the run.
            limit: at most this many, the newest (a page); ``None`` for all.
            before: only checkpoints older than this checkpoint id: the page before a page
                ``p`` is ``history(run_id, limit=n, before=p[0].id)``.
            tenant_id: the caller's tenant (default: the runtime's ``tenant_id``).

        Raises:
            CheckpointNotFound: ``before`` names no checkpoint.
            TenantMismatch: the run belongs to another tenant (nothing of it is returned).
        """
        check_id(run_id, "run_id", "history")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise InvalidArgument(f"history(limit={limit!r}): limit must be an int >= 1 or None")
        check_optional_id(before, "before", "history")
        await self._check_tenant(run_id, tenant_id, "history")
        store: Any = self.store
        if limit is None and before is None:
            return list(await store.list(run_id))
        if self._features.history_pages:
            return list(await store.list(run_id, limit=limit, before=before))
        found: list[Checkpoint] = list(await store.list(run_id))
        if before is not None:
            ids = [cp.id for cp in found]
            if before not in ids:
                raise CheckpointNotFound(f"history(before={before!r}): run {run_id} has no "
                                         "such checkpoint")
            found = found[: ids.index(before)]
        return found if limit is None else found[-limit:]

    def run_record(self, run_id: str) -> RunRecord:
        """The record of a run this runtime ran, or, over a store that keeps run records,
        that the store holds (read from it outside an event loop; see :meth:`arun_record`).

        Raises:
            CheckpointNotFound: when neither this runtime nor the store has a record of
                ``run_id`` (inside an event loop: when this runtime holds none; a record it
                no longer holds is read with ``await runtime.arun_record(run_id)``).
        """
        held = self._book.records.get(run_id)
        if held is not None:
            return held
        if self._records_in_store() and not in_running_loop():
            return self._run_sync(self.arun_record, run_id)
        hint = ("; this runtime holds the records of its live runs and its last "
                f"{KEPT_RECORDS} ended ones: read older ones from the store with `await "
                f"runtime.arun_record({run_id!r})`" if self._records_in_store() else "")
        raise CheckpointNotFound(f"this runtime has no record of run {run_id!r}{hint}")

    async def arun_record(self, run_id: str) -> RunRecord:
        """The record of ``run_id``: the one this runtime holds, else, over a store that keeps
        run records (SQLite, PostgreSQL), the store's.

        Raises:
            CheckpointNotFound: when neither has a record of ``run_id``.
        """
        check_id(run_id, "run_id", "arun_record")
        found = await self._legs.find_record(run_id)
        if found is None:
            where = " or in its store" if self._records_in_store() else ""
            raise CheckpointNotFound(f"there is no record of run {run_id!r} in this "
                                     f"runtime{where}")
        return found

    @property
    def runs(self) -> list[RunRecord]:
        """Records of the runs this runtime holds, in the order it took them up: every run it
        ran, except over a store that keeps run records, where it holds those of its live
        runs and of its last ``KEPT_RECORDS`` (256) ended ones (the store has the rest:
        :meth:`arun_record`, ``await store.runs()``)."""
        return list(self._book.records.values())

    async def waiting(
        self, *, tenant_id: str | None = _DEFAULT, limit: int | None = None,
        after: str | None = None,
    ) -> list[Waiting]:
        """The runs of the caller's tenant waiting for answers, with their questions and
        deadlines, in thread-id order (the store's ``waiting``; see :class:`Waiting`).

        Args:
            tenant_id: the caller's tenant (default: the runtime's ``tenant_id``); only its
                threads are listed.
            limit: at most this many (a page); ``None``: all.
            after: the next page: ``after=page[-1].thread_id``.

        Raises:
            GraphExecutionError: the store cannot list waiting runs.
            InvalidArgument: a bad ``limit``, ``tenant_id`` or ``after``.
        """
        tenant = self.tenant_id if tenant_id is _DEFAULT else tenant_id
        check_waiting("GraphRuntime", tenant, limit, after, False)
        return await list_waiting(self, tenant_id=tenant, limit=limit, after=after)

    async def aexpire_due(
        self, *, graphs: Iterable[CompiledGraph] | Mapping[str, CompiledGraph] | None = None,
        tenant_id: str | None = _DEFAULT, any_tenant: bool = False,
    ) -> list[GraphResult[Any]]:
        """Fire every question whose deadline (``interrupt(..., deadline=)``) passed by this
        runtime's clock, earliest first: each such run resumes, an ``interrupt_expired``
        event names the question, and the asking task takes its graph's
        ``compile(on_timeout=...)`` route. A ``Worker`` calls this as it polls.

        Args:
            graphs: the graphs to resume runs under (default: those this runtime knows); with
                them, only runs of these graphs are fired.
            tenant_id: fire the runs of this tenant (default: the runtime's ``tenant_id``).
            any_tenant: fire every tenant's runs (a worker serving them all).

        Returns:
            The fired runs' results, in the order they were fired. A run held by another
            runtime, or answered meanwhile, is skipped.

        Raises:
            GraphExecutionError: the store cannot list waiting runs, or a due run's graph is
                not known (pass ``graphs=``).
        """
        tenant = self.tenant_id if tenant_id is _DEFAULT else tenant_id
        return await expire_due(self, tenant_id=tenant, any_tenant=any_tenant, graphs=graphs)

    def expire_due(
        self, *, graphs: Iterable[CompiledGraph] | Mapping[str, CompiledGraph] | None = None,
        tenant_id: str | None = _DEFAULT, any_tenant: bool = False,
    ) -> list[GraphResult[Any]]:
        """Synchronous :meth:`aexpire_due`."""
        return self._run_sync(self.aexpire_due, graphs=graphs, tenant_id=tenant_id,
                              any_tenant=any_tenant)

    def register(self, graph: CompiledGraph) -> None:
        """Remember ``graph`` so runs of it can be resumed by id alone."""
        check_graph(graph)
        self._book.graphs.register(graph)

    # ------------------------------------------------------------------ internals

    async def _check_tenant(self, run_id: str, tenant_id: str | None, where: str) -> None:
        """Refuse a caller whose tenant (``tenant_id``, or the runtime's by default) is not
        run ``run_id``'s (seed 004): the tenant of its latest checkpoint, or of its run
        record when it has no checkpoint. A run the store knows nothing of is not checked.

        Raises:
            TenantMismatch: naming only what the caller passed.
        """
        check_id(run_id, "run_id", where)
        tenant = self.tenant_id if tenant_id is _DEFAULT else tenant_id
        check_optional_id(tenant, "tenant_id", where)
        latest = await self.store.latest(run_id)
        if latest is not None:
            owner = latest.tenant_id
        else:
            record = await self._legs.find_record(run_id)
            if record is None:
                return
            owner = record.tenant_id
        if owner != tenant:
            raise TenantMismatch(run_id, tenant, what="run")

    def _records_in_store(self) -> bool:
        """Whether the store keeps the run records (then the runtime holds only a few)."""
        return self._features.run_records

    async def _trace(self, stream: RunStream) -> Trace:
        store: Any = self.store
        logged = self._features.call_log
        start = store.call_count if logged else 0
        events: list[EventBase] = []
        async for event in stream:
            events.append(event)
        result = stream.result()
        store_log = store.calls_since(start) if logged else []
        return Trace(result=result, events=EventLog(events, stream.states), store_log=store_log)

    def _run_sync(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        # Under a VirtualClock the loop reads it: fail_after/move_on_after and
        # anyio.current_time() in node code are virtual too.
        name = getattr(fn, "__name__", "ainvoke")
        said = _SYNC_NAMES.get(name)
        if said is None:
            said = _SYNC_NAMES[name] = _said(name)
        return run_sync_owned(lambda: fn(*args, **kwargs), self.clock, self.backend,
                              what=said[0], instead=said[1])


def _said(name: str) -> tuple[str, str]:
    """What a sync method's error says it is, and what to await instead (async ``name``)."""
    sync = name[1:] if name.startswith("a") else name
    return (f"{sync}()", f"`await runtime.{name}(...)` (e.g. `await "
            "graph_runtime.atrace(...)` / `ainvoke(...)`) in async code")


_INSTEAD_INVOKE = _said("ainvoke")[1]
_INSTEAD_RESUME = _said("aresume")[1]


def use_run_ids(runtime: GraphRuntime, ids: RunIds) -> None:
    """Make ``runtime`` take its new run ids from ``ids`` (a replay's recorded token)."""
    runtime._book.ids = ids


def run_sync(runtime: GraphRuntime, fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` to its end from sync code, on ``runtime``'s clock and backend, as its
    sync methods do (``assert_replays``)."""
    return runtime._run_sync(fn)


def child_runtime(run: RunState, on_interrupt: Callable[[Interrupt], object] | None,
                  ids: RunIds) -> GraphRuntime:
    """The runtime a subgraph node runs its child on: the parent leg's store, clock, seed,
    tenant and budget, with run ids derived from the parent task (``ids``)."""
    spec = run.spec
    rt = GraphRuntime(store=spec.store, clock=spec.clock, seed=spec.seed,
                      tenant_id=spec.tenant_id, max_supersteps=spec.max_supersteps,
                      on_interrupt=on_interrupt)
    rt._book.ids = ids
    return rt


_SUBGRAPHS = functools.partial(run_subgraph, runtime=child_runtime)
