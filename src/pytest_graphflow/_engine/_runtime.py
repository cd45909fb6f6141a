"""``GraphRuntime``: running, streaming and resuming graphs (SPEC §2)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from .._graph._blocking import install_blocking_sleep_warning
from .._graph._builder import POLICIES, CheckpointPolicy, CompiledGraph
from .._graph._node import Resume
from .._records._checkpoint import FORMAT_VERSION, Checkpoint
from .._records._checks import check_id, check_optional_id
from .._records._events import (
    EventBase,
    Interrupt,
)
from .._records._ids import IdSource
from .._records._json import NotJSONError, jcopy, to_json_value
from .._stores._memory import InMemoryCheckpointStore
from .._stores._protocol import CheckpointStore
from .._time import _wallclock
from .._time._clock import Clock, RealClock, VirtualClock
from .._time._hooks import install_hooks
from .._time._loops import run_sync_owned
from ..errors import (
    CheckpointNotFound,
    GraphExecutionError,
    GraphflowError,
    InvalidArgument,
    MidExecution,
    NothingToRecover,
    NotSuspended,
    ResumeError,
    SnapshotMismatch,
    TenantMismatch,
    ThreadBusy,
    ThreadSuspended,
    UnknownKey,
    UnsupportedFormat,
    UpdateRejected,
)
from ._claim import ThreadClaim, released_on_error, take
from ._merge import merge_patches, validate_state
from ._results import EventLog, GraphResult, RunLeg, RunRecord, Trace
from ._run_state import RunState
from ._runner import Runner
from ._stream import RunHandle, RunStream, drain
from ._subgraph import run_subgraph
from ._update import apply_update, updated_checkpoint
from ._upgrade import upgrade_problems

__all__ = ["GraphRuntime"]

T = TypeVar("T")
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
        claim_ttl: seconds a thread claim lasts on stores with claims.
        backend: the anyio backend of the sync API (``"asyncio"`` or ``"trio"``).
        checkpoint_policy: run every graph under this policy instead of its own (same
            structure and revision, see :meth:`CompiledGraph.with_policy`).
        on_leg: called with a :class:`RunLeg` as each leg of a run starts; the leg fills in
            (events, error, visited nodes) as the run goes. With it, every API builds events,
            ``invoke`` included.
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
        claim_ttl: float = 30.0,
        backend: str = "asyncio",
        checkpoint_policy: CheckpointPolicy | None = None,
        on_leg: Callable[[RunLeg], None] | None = None,
    ) -> None:
        if store is _DEFAULT or store is None:
            store = InMemoryCheckpointStore()
        for name in ("save", "get", "latest", "list"):
            if not callable(getattr(store, name, None)):
                raise InvalidArgument(f"GraphRuntime(store={store!r}): the store has no "
                                      f"{name}(); pass a CheckpointStore")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise InvalidArgument(f"GraphRuntime(seed={seed!r}): seed must be an int or None")
        _check_budget(max_supersteps, timeout)
        _check_constructor(clock, on_interrupt, tenant_id, claim_ttl, backend, on_leg)
        self.store: CheckpointStore = store
        self.clock: Clock = clock if clock is not None else RealClock()
        self.seed = seed
        self.max_supersteps = max_supersteps
        self.timeout = timeout
        self.on_interrupt = on_interrupt
        self.tenant_id = tenant_id
        self.claim_ttl = claim_ttl
        self.backend = backend
        if checkpoint_policy is not None and checkpoint_policy not in POLICIES:
            raise InvalidArgument(f"GraphRuntime(checkpoint_policy={checkpoint_policy!r}): use "
                                  f"one of {sorted(POLICIES)} or None")
        self.checkpoint_policy = checkpoint_policy
        self.on_leg = on_leg
        self._policy_graphs: dict[int, tuple[CompiledGraph, CompiledGraph]] = {}
        self._ids = IdSource(seed)
        self._graphs: dict[str, CompiledGraph] = {}
        self._runs: dict[str, RunRecord] = {}
        self._live: dict[str, Runner] = {}
        bind = getattr(store, "bind_clock", None)
        if callable(bind):
            bind(self.clock)
        install_hooks()  # the first runtime patches the sleeps (importing patches nothing)
        install_blocking_sleep_warning()

    # ------------------------------------------------------------------ public API

    def stream(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        thread_id: str | None = None,
        mode: StreamMode = "events",
        **options: Any,
    ) -> RunStream:
        """Start a run and stream its events (or a view of them, see ``mode``)."""
        self._check_graph(graph)
        check_optional_id(thread_id, "thread_id", "stream")
        opts = self._options(options)
        return RunStream(lambda: self._prepare_new(graph, input, thread_id, opts), mode)

    def resume_stream(
        self,
        run_or_checkpoint_id: str,
        resume: Resume | None = None,
        *,
        graph: CompiledGraph | None = None,
        mode: StreamMode = "events",
        **options: Any,
    ) -> RunStream:
        """Resume a paused, failed or cancelled run and stream its events from there.

        A run id continues from the run's last saved checkpoint (C8); a checkpoint id from
        exactly that checkpoint (time travel).
        """
        check_id(run_or_checkpoint_id, "run_or_checkpoint_id", "resume")
        if resume is not None and not isinstance(resume, Resume):
            raise InvalidArgument(f"resume={resume!r}: pass a Resume(...) or None")
        if graph is not None:
            self._check_graph(graph)
        opts = self._options(options)
        stream: RunStream

        async def prepare() -> Runner:
            opts["record_events"] = stream._record_events
            return await self._prepare_resume(run_or_checkpoint_id, resume, graph, opts)

        stream = RunStream(prepare, mode)
        return stream

    async def ainvoke(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        thread_id: str | None = None,
        **options: Any,
    ) -> GraphResult[Any]:
        """Run ``graph`` to its end (or halt) and return the result.

        Raises:
            the store's own exception for a rejected save (C6), an edge function's own
            exception (C7), and caller errors; failures *in* the run are in the result.
        """
        self._check_graph(graph)
        check_optional_id(thread_id, "thread_id", "invoke")
        opts = self._options(options)
        opts["record_events"] = False
        return await drain(RunStream(
            lambda: self._prepare_new(graph, input, thread_id, opts), "events"))

    async def aresume(
        self,
        run_or_checkpoint_id: str,
        resume: Resume | None = None,
        *,
        graph: CompiledGraph | None = None,
        **options: Any,
    ) -> GraphResult[Any]:
        """Resume a run and return its result (see :meth:`resume_stream`)."""
        stream = self.resume_stream(run_or_checkpoint_id, resume, graph=graph, **options)
        stream._record_events = False
        return await drain(stream)

    async def arecover(
        self,
        thread_id: str,
        *,
        graph: CompiledGraph | None = None,
        **options: Any,
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
            self._check_graph(graph)
        opts = self._options(options)
        tenant = opts["tenant_id"]
        last = await self._thread_latest(thread_id)
        if last is not None and last.tenant_id != tenant:
            raise TenantMismatch(thread_id, tenant)
        self._check_recoverable(thread_id, last)
        assert last is not None
        opts["record_events"] = False
        opts["recover"] = thread_id
        run_id = last.run_id
        return await drain(RunStream(
            lambda: self._prepare_resume(run_id, None, graph, opts), "events"))

    @staticmethod
    def _check_recoverable(thread_id: str, last: Checkpoint | None) -> None:
        """Refuse a recovery of a thread with nothing incomplete, or one waiting for answers.
        """
        if last is None or last.status == "completed":
            raise NothingToRecover(
                f"thread {thread_id!r} has no incomplete run to recover"
                + (" (the store holds no checkpoint of it)" if last is None else
                   f" (its last run, {last.run_id}, completed); start a new run on it instead")
            )
        if last.status == "interrupted":
            raise ThreadSuspended(
                f"thread {thread_id!r} is waiting for answers (run {last.run_id}); resume it "
                f"with aresume({last.run_id!r}, Resume(...))"
            )

    def recover(
        self, thread_id: str, *, graph: CompiledGraph | None = None, **options: Any
    ) -> GraphResult[Any]:
        """Synchronous :meth:`arecover`."""
        return self._run_sync(self.arecover, thread_id, graph=graph, **options)

    def invoke(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        thread_id: str | None = None,
        **options: Any,
    ) -> GraphResult[Any]:
        """Synchronous :meth:`ainvoke` (runs an event loop of ``backend``)."""
        return self._run_sync(self.ainvoke, graph, input, thread_id=thread_id, **options)

    def resume(
        self,
        run_or_checkpoint_id: str,
        resume: Resume | None = None,
        *,
        graph: CompiledGraph | None = None,
        **options: Any,
    ) -> GraphResult[Any]:
        """Synchronous :meth:`aresume`."""
        return self._run_sync(self.aresume, run_or_checkpoint_id, resume, graph=graph,
                              **options)

    async def start(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        thread_id: str | None = None,
        **options: Any,
    ) -> RunHandle:
        """Admit a run and return its :class:`RunHandle` (claims and ids are taken now)."""
        stream = self.stream(graph, input, thread_id=thread_id, **options)
        runner = await stream._ensure()
        return RunHandle(stream, runner.run_id)

    async def atrace(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        **options: Any,
    ) -> Trace:
        """Run to the end and return a :class:`Trace` (result, events, store log)."""
        return await self._trace(self.stream(graph, input, **options))

    def trace(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        **options: Any,
    ) -> Trace:
        """Synchronous :meth:`atrace`."""
        return self._run_sync(self.atrace, graph, input, **options)

    async def aresume_trace(
        self, run_or_checkpoint_id: str, resume: Resume | None = None, **options: Any
    ) -> Trace:
        """Resume and return a :class:`Trace` of the resumed leg."""
        return await self._trace(self.resume_stream(run_or_checkpoint_id, resume, **options))

    def resume_trace(
        self, run_or_checkpoint_id: str, resume: Resume | None = None, **options: Any
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
        **options: Any,
    ) -> GraphResult[Any]:
        """Run one superstep: start a run (``run_id=None``) or continue ``run_id`` by one.

        The run pauses after the superstep as at a breakpoint after every node (status
        ``interrupted``, ``result.breakpoint`` naming the batch's nodes); call again with
        ``run_id=result.run_id`` for the next one. A superstep that ends the run, fails it or
        pauses it at an interrupt returns that instead (answer interrupts with ``resume=``).
        """
        self._check_graph(graph)
        options["interrupt_after"] = list(graph.nodes)
        if run_id is None:
            if resume is not None:
                raise InvalidArgument("step(resume=...) needs the run_id of the run to continue")
            return await self.ainvoke(graph, input, **options)
        if input is not None:
            raise InvalidArgument(f"step(run_id={run_id!r}) continues a run: pass no input "
                                  "(change its state with update_state)")
        return await self.aresume(run_id, resume, graph=graph, **options)

    def step(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None = None,
        *,
        run_id: str | None = None,
        resume: Resume | None = None,
        **options: Any,
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
        cp = await self._resolve_target(run_or_thread_id)
        graph = self._graph_for(cp, graph)
        if cp.tenant_id != self.tenant_id:
            raise TenantMismatch(cp.thread_id, self.tenant_id)
        claim = await self._claim(cp.thread_id, cp.run_id, self.tenant_id)
        try:
            latest = await self.store.latest(cp.run_id)
            counters = [cp.metadata, latest.metadata if latest is not None else {}]
            cp_counter = max(int(m.get("cp_counter", 0)) for m in counters) + 1
            task_counter = max(int(m.get("task_counter", 0)) for m in counters)
            token = cp.run_id[4:] if cp.run_id.startswith("run-") else cp.run_id
            clock = self.clock
            if isinstance(clock, VirtualClock) and clock.now() < cp.timestamp:
                clock.advance((cp.timestamp - clock.now()).total_seconds())
            new = await updated_checkpoint(
                graph, cp, values, as_node=as_node, cid=f"cp-{token}-{cp_counter}",
                task_hex=token, task_counter=task_counter, now=clock.now())
            new.metadata["cp_counter"] = cp_counter
            fence = claim.fence
            if fence is None:
                await self.store.save(new)
            else:  # written under the claim: refused if another process took the thread
                await self.store.save(new, fence=fence)  # type: ignore[call-arg]
        finally:
            await released_on_error(claim)
        return new.id

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

    async def _resolve_target(self, ref: str) -> Checkpoint:
        """A run's last checkpoint, a checkpoint, or a thread's last checkpoint."""
        if isinstance(ref, str) and await self.store.latest(ref) is None \
                and await self.store.get(ref) is None:
            found = await self.store.list(thread_id=ref)
            if found:
                return await self._resolve(found[-1].id, self.tenant_id)
        return await self._resolve(ref, self.tenant_id)

    async def attach(self, run_id: str, name: str, data: bytes | str,
                     media_type: str = "application/octet-stream") -> None:
        """Attach an artifact to a run from outside it (seed 002), replacing one of that name.

        Raises:
            InvalidArgument: a bad name, data or media type.
            GraphExecutionError: the store keeps no artifacts.
        """
        put = getattr(self.store, "put_artifact", None)
        if put is None:
            raise GraphExecutionError(f"the store {type(self.store).__name__} keeps no "
                                      "artifacts (it has no put_artifact)")
        await put(run_id, name, data, media_type)

    async def artifacts(self, run_id: str) -> list[dict[str, Any]]:
        """The run's artifacts (``name``, ``media_type``, ``size``), in the order first stored;
        ``[]`` when the store keeps none."""
        found = getattr(self.store, "artifacts", None)
        return [] if found is None else list(await found(run_id))

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
        tenant = self.tenant_id if tenant_id is _DEFAULT else tenant_id
        store: Any = self.store
        latest = await store.latest(run_id)
        if latest is not None and latest.tenant_id != tenant:
            raise TenantMismatch(run_id, tenant, what="run")
        if limit is None and before is None:
            return list(await store.list(run_id))
        if getattr(store, "pages_history", False):
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
        """The record of a run this runtime ran.

        Raises:
            CheckpointNotFound: when this runtime never ran ``run_id``.
        """
        try:
            return self._runs[run_id]
        except KeyError:
            raise CheckpointNotFound(f"this runtime has no record of run {run_id!r}") from None

    @property
    def runs(self) -> list[RunRecord]:
        """Records of the runs this runtime ran, in start order."""
        return list(self._runs.values())

    def register(self, graph: CompiledGraph) -> None:
        """Remember ``graph`` so runs of it can be resumed by id alone."""
        self._check_graph(graph)
        self._graphs[graph.graph_id] = graph

    # ------------------------------------------------------------------ internals

    async def _trace(self, stream: RunStream) -> Trace:
        before = getattr(self.store, "calls", None)
        start = len(before) if isinstance(before, list) else 0
        events: list[EventBase] = []
        async for event in stream:
            events.append(event)
        result = stream.result()
        after = getattr(self.store, "calls", None)
        store_log = list(after[start:]) if isinstance(after, list) else []
        return Trace(result=result, events=EventLog(events, stream.states), store_log=store_log)

    def _run_sync(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        async def main() -> T:
            # Under a VirtualClock the loop reads it: fail_after/move_on_after and
            # anyio.current_time() in node code are virtual too.
            return await fn(*args, **kwargs)

        name = getattr(fn, "__name__", "ainvoke")
        sync = name[1:] if name.startswith("a") else name
        return run_sync_owned(main, self.clock, self.backend, what=f"{sync}()",
                              instead=f"`await runtime.{name}(...)` (e.g. `await "
                              "graph_runtime.atrace(...)` / `ainvoke(...)`) in async code")

    def _check_graph(self, graph: Any) -> None:
        if not isinstance(graph, CompiledGraph):
            hint = " (call .compile() first)" if hasattr(graph, "compile") else ""
            raise InvalidArgument(f"expected a CompiledGraph, got {graph!r}{hint}")

    def _options(self, options: dict[str, Any]) -> dict[str, Any]:
        allowed = {"max_supersteps", "timeout", "on_interrupt", "tenant_id",
                   "interrupt_before", "interrupt_after"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise InvalidArgument(f"unknown run option(s) {unknown}; run options are "
                                  f"{sorted(allowed)}")
        if "tenant_id" in options:
            check_optional_id(options["tenant_id"], "tenant_id", "run option")
        opts = {
            "max_supersteps": options.get("max_supersteps", self.max_supersteps),
            "timeout": options.get("timeout", self.timeout),
            "on_interrupt": options.get("on_interrupt", self.on_interrupt),
            "tenant_id": options.get("tenant_id", self.tenant_id),
        }
        for name in ("interrupt_before", "interrupt_after"):
            nodes = options.get(name, ())
            if isinstance(nodes, str) or not all(isinstance(n, str) for n in nodes):
                raise InvalidArgument(f"{name}={nodes!r} must be a list of node names")
            opts[name] = frozenset(nodes)
        _check_budget(opts["max_supersteps"], opts["timeout"])
        if opts["on_interrupt"] is not None and not callable(opts["on_interrupt"]):
            raise InvalidArgument(f"on_interrupt={opts['on_interrupt']!r} must be callable")
        return opts

    def _state_from_input(
        self, graph: CompiledGraph, input: Mapping[str, Any] | BaseModel | None
    ) -> dict[str, Any]:
        if input is None:
            data: dict[str, Any] = {}
        elif isinstance(input, BaseModel):
            data = input.model_dump(mode="json")
        elif isinstance(input, Mapping):
            data = dict(input)
        else:
            raise InvalidArgument(f"input={input!r}: pass a dict, a {graph.state_model.__name__} "
                                  "or None")
        for key in data:
            if key not in graph.keys:
                raise UnknownKey("<input>", key, sorted(graph.keys))
        try:
            return {k: to_json_value(v) for k, v in data.items()}
        except NotJSONError as exc:
            raise UpdateRejected("<input>", "<input>", f"input values must be JSON: {exc}") \
                from None

    async def _claim(self, thread_id: str, run_id: str, tenant: str | None) -> ThreadClaim:
        """Claim the thread for one leg of ``run_id`` (one claim per runtime instance).

        Raises:
            ThreadBusy: another run holds the thread (in this runtime, or a live claim in the
                store); the holder is named only to a caller of the thread's tenant.
            TenantMismatch: the thread is busy and belongs to another tenant.
        """
        for live in self._live.values():
            if not live.done and (live.run.thread_id == thread_id or live.run_id == run_id):
                raise await self._busy(thread_id, live.run_id, tenant)
        try:
            return await take(self.store, self.clock, thread_id, run_id, self.claim_ttl)
        except ThreadBusy as exc:
            raise await self._busy(thread_id, exc.holder, tenant) from None

    async def _busy(self, thread_id: str, holder: str | None, tenant: str | None
                    ) -> GraphflowError:
        """The error a caller of ``tenant`` may see for a busy thread (seed 004): the holder
        is never named for a thread without a checkpoint, nor to another tenant."""
        last = await self._thread_latest(thread_id)
        if last is None:
            return ThreadBusy(thread_id, None)
        if last.tenant_id != tenant:
            return TenantMismatch(thread_id, tenant)
        return ThreadBusy(thread_id, holder)

    async def _thread_latest(self, thread_id: str) -> Checkpoint | None:
        """The thread's latest checkpoint, or ``None``; a one-row read on stores that page."""
        store: Any = self.store
        if getattr(store, "pages_history", False):
            found: list[Checkpoint] = list(await store.list(thread_id=thread_id, limit=1))
        else:
            found = await store.list(thread_id=thread_id)
        return found[-1] if found else None

    def _wall(self) -> tuple[bool, Callable[[], None] | None]:
        clock = self.clock
        if isinstance(clock, VirtualClock) and clock.patch_wall_clock:
            driver = _wallclock.activate()
            return True, lambda: _wallclock.deactivate(driver)
        return False, None

    async def _new_run_id(self) -> tuple[str, str]:
        for _ in range(1000):
            token = self._ids.run_hex()
            run_id = f"run-{token}"
            if run_id not in self._runs and await self.store.latest(run_id) is None:
                return run_id, token
        raise GraphExecutionError("could not find a free run id")  # pragma: no cover

    async def _prepare_new(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None,
        thread_id: str | None,
        opts: dict[str, Any],
    ) -> Runner:
        install_hooks()  # trio's, once a run meets trio
        self._graphs.setdefault(graph.graph_id, graph)
        graph = self._policy(graph)
        patch = self._state_from_input(graph, input)
        run_id, token = await self._new_run_id()
        tenant = opts["tenant_id"]
        explicit = thread_id is not None
        if thread_id is None:
            thread_id = f"thread-{token}"
            base = validate_state(graph, patch).model_dump(mode="json")
            claim = await self._claim(thread_id, run_id, tenant)
        else:
            # A live run holding the thread is ThreadBusy, whatever the thread's checkpoints
            # say; the thread is read after the claim, so no other run can advance it between.
            claim = await self._claim(thread_id, run_id, tenant)
            try:
                base = await self._thread_base(graph, thread_id, tenant, patch)
            except BaseException:
                await released_on_error(claim)
                raise
        wall, on_done = self._wall()

        run = RunState(
            graph=graph, store=self.store, clock=self.clock, seed=self.seed, run_id=run_id,
            thread_id=thread_id, tenant_id=tenant, state=base,
            max_supersteps=opts["max_supersteps"], timeout=opts["timeout"],
            on_interrupt=opts["on_interrupt"], wall_clock=wall,
            record_events=opts.get("record_events", True), thread_explicit=explicit,
        )
        run.set_breakpoints(*_breakpoints(graph, opts))
        run.subgraph_runner = _SUBGRAPHS
        run.claim = claim
        runner = Runner(run, release=claim.release, on_done=on_done)
        self._track(runner)
        return runner

    async def _thread_base(
        self,
        graph: CompiledGraph,
        thread_id: str,
        tenant: str | None,
        patch: dict[str, Any],
    ) -> dict[str, Any]:
        """The starting state of a new run on ``thread_id``: its last state plus the input."""
        last = await self._thread_latest(thread_id)
        if last is not None:
            if last.tenant_id != tenant:
                raise TenantMismatch(thread_id, tenant)
            # Seed 004: only a thread waiting for answers is suspended; a failed, timed-out,
            # cancelled or crashed run left its thread mid-execution.
            if last.status == "interrupted":
                raise ThreadSuspended(
                    f"thread {thread_id!r} is suspended (run {last.run_id} waits for answers "
                    f"to its interrupts); resume it with aresume({last.run_id!r}, Resume(...))"
                )
            if last.status != "completed":
                raise MidExecution(
                    f"thread {thread_id!r} is mid-execution (run {last.run_id} is "
                    f"{last.status}, checkpoint {last.id}); continue it with "
                    f"arecover({thread_id!r}) or aresume({last.run_id!r}) instead of starting "
                    "a new run"
                )
            base = merge_patches(graph, last.state, [("<input>", patch)], parallel=False)
            if graph.codec.plain:
                base = validate_state(graph, base).model_dump(mode="json")
            else:  # the thread's state was validated as it was written: only the input is
                base = graph.codec.validate(base, [("<input>", patch)])[0]
        else:
            base = validate_state(graph, patch).model_dump(mode="json")
        return base

    async def _resolve(self, ref: str, tenant: str | None) -> Checkpoint:
        if not isinstance(ref, str):
            raise InvalidArgument(f"expected a run id or checkpoint id, got {ref!r}")
        cp = await self.store.latest(ref)
        if cp is None:
            cp = await self.store.get(ref)
        if cp is None:
            raise CheckpointNotFound(
                f"no checkpoint for run or checkpoint id {ref!r}: the store has none. Pass the "
                "run_id of run_start (or GraphResult.run_id) or a checkpoint id"
            )
        if cp.tenant_id != tenant:
            # Named by what the caller passed: no id of the other tenant's thread.
            raise TenantMismatch(ref, tenant, what="run or checkpoint")
        if cp.format_version != FORMAT_VERSION:
            raise UnsupportedFormat(
                f"checkpoint {cp.id} has format_version {cp.format_version}; this build reads "
                f"{FORMAT_VERSION}"
            )
        return cp

    def _graph_for(self, cp: Checkpoint, graph: CompiledGraph | None) -> CompiledGraph:
        if graph is None:
            graph = self._graphs.get(cp.graph_id)
            if graph is None:
                raise GraphExecutionError(
                    f"this runtime does not know graph {cp.graph_id!r} of checkpoint {cp.id}; "
                    "pass graph= (a fresh runtime in another process must be given the graph)"
                )
        problems = upgrade_problems(cp, graph)
        if problems:
            revision = ("" if cp.revision == graph.revision else
                        f" (checkpoint {cp.id} was written under revision {cp.revision}; the "
                        f"graph is {graph.revision})")
            raise SnapshotMismatch(
                f"checkpoint {cp.id} cannot resume under graph {graph.graph_id!r}{revision}: "
                + "; ".join(p.message for p in problems), problems)
        self._graphs.setdefault(graph.graph_id, graph)
        return graph

    async def _prepare_resume(
        self,
        ref: str,
        resume: Resume | None,
        graph: CompiledGraph | None,
        opts: dict[str, Any],
    ) -> Runner:
        install_hooks()
        tenant = opts["tenant_id"]
        recover: str | None = opts.get("recover")
        cp = await self._resolve(ref, tenant)
        graph = self._policy(self._graph_for(cp, graph))
        if recover is not None:
            self._check_recoverable(recover, cp)  # the run may have ended since it was read
        else:
            self._check_resumable(cp, resume, claimed=False)
        seen = cp.id if recover is None and ref == cp.run_id else await self._view(cp, recover)
        clock = self.clock
        if isinstance(clock, VirtualClock) and clock.now() < cp.timestamp:
            # A fresh virtual clock continues from the checkpoint, so time never goes back
            # within a run's log (C10), and the claim is taken at that time.
            clock.advance((cp.timestamp - clock.now()).total_seconds())
        claim = await self._claim(cp.thread_id, cp.run_id, tenant)
        try:
            # Read again under the claim: a run that advanced the thread between this call
            # reading it and claiming it must not be run a second time (seed 004).
            cp = await self._resolve(ref, tenant)
            latest = cp if ref == cp.run_id else await self.store.latest(cp.run_id)
            if recover is not None:
                last = await self._thread_latest(recover)
                if last is not None and last.id != seen:
                    raise ThreadBusy(recover, last.run_id)
                self._check_recoverable(recover, last)
            else:
                if latest is not None and latest.id != seen:
                    raise ThreadBusy(cp.thread_id, latest.run_id)
                self._check_resumable(cp, resume)
        except BaseException:
            await released_on_error(claim)
            raise
        answers = dict(cp.answers)
        if cp.status == "interrupted" and cp.interrupts:
            assert resume is not None
            answers.update(resume.resolve(cp.interrupts))
        cp_counter = int(cp.metadata.get("cp_counter", 0))
        task_counter = int(cp.metadata.get("task_counter", 0))
        seq = cp.next_seq
        if latest is not None and latest.id != cp.id:
            # Time travel: the run's log goes on after everything it already holds, so no
            # event number (and no id) of the original continuation is used twice (C10).
            cp_counter = max(cp_counter, int(latest.metadata.get("cp_counter", 0)))
            task_counter = max(task_counter, int(latest.metadata.get("task_counter", 0)))
            seq = max(seq, latest.next_seq)
        state = cp.state
        if resume is not None and resume.update is not None:
            try:
                state = apply_update(graph, state, resume.update)[0]
            except BaseException:
                await released_on_error(claim)
                raise
        wall, on_done = self._wall()
        run = RunState(
            graph=graph, store=self.store, clock=self.clock, seed=self.seed, run_id=cp.run_id,
            thread_id=cp.thread_id, tenant_id=cp.tenant_id, state=state,
            max_supersteps=opts["max_supersteps"], timeout=opts["timeout"],
            on_interrupt=opts["on_interrupt"], wall_clock=wall,
            record_events=opts.get("record_events", True),
        )
        run.set_breakpoints(*_breakpoints(graph, opts))
        run.subgraph_runner = _SUBGRAPHS
        run.continue_from(cp, answers=answers, seq=seq, cp_counter=cp_counter,
                          task_counter=task_counter)
        run.claim = claim
        runner = Runner(run, release=claim.release, on_done=on_done)
        self._track(runner, resumed=True)
        return runner

    async def _view(self, cp: Checkpoint, recover: str | None) -> str | None:
        """What this call saw before claiming: the id of the thread's latest checkpoint (a
        recovery) or of the run's latest checkpoint (a resume)."""
        if recover is not None:
            last = await self._thread_latest(recover)
        else:
            last = await self.store.latest(cp.run_id)
        return None if last is None else last.id

    @staticmethod
    def _check_resumable(cp: Checkpoint, resume: Resume | None, *, claimed: bool = True
                         ) -> None:
        """Refuse a resume of ``cp`` that cannot go on. Before the claim, only what no other
        run can change is checked: a ``Resume`` for a checkpoint that is not waiting may be a
        race with a resume that is still running (``ThreadBusy`` then, from the claim)."""
        if cp.status == "completed":
            raise NotSuspended(f"run {cp.run_id} completed (checkpoint {cp.id}); there is "
                               "nothing to resume. Start a new run on its thread instead")
        answering = resume is not None and resume.has_answers
        if cp.status == "interrupted" and not cp.interrupts:
            if answering:  # paused for a breakpoint: nothing to answer
                raise ResumeError(f"run {cp.run_id} paused for a breakpoint (checkpoint "
                                  f"{cp.id}); it has no interrupts to answer, resume it "
                                  "without a Resume")
        elif cp.status == "interrupted":
            if resume is None or not resume.has_answers:
                keys = [i.key for i in cp.interrupts]
                raise ResumeError(f"run {cp.run_id} is paused at interrupts {keys}; resume it "
                                  "with Resume(value) or Resume(answers={key: ...})")
            resume.resolve(cp.interrupts)  # refuses answers that do not fit, changing nothing
        elif answering and claimed:
            raise NotSuspended(f"run {cp.run_id} has no pending interrupts (status "
                               f"{cp.status!r}, checkpoint {cp.id}): another resume may have "
                               "answered them. Read its state with history(); resume it "
                               "without a Resume only to continue a failed, cancelled or "
                               "timed-out run")

    def _policy(self, graph: CompiledGraph) -> CompiledGraph:
        """``graph`` under the runtime's checkpoint policy, if it sets one."""
        policy = self.checkpoint_policy
        if policy is None or graph.checkpoint_policy == policy:
            return graph
        cached = self._policy_graphs.get(id(graph))
        if cached is None or cached[0] is not graph:
            cached = self._policy_graphs[id(graph)] = (graph, graph.with_policy(policy))
        return cached[1]

    def _track(self, runner: Runner, *, resumed: bool = False) -> None:
        live = self._live
        for run_id in [r for r, other in live.items() if other.done]:
            del live[run_id]
        live[runner.run_id] = runner
        run = runner.run
        record = self._runs.get(runner.run_id)
        if record is None:
            self._runs[runner.run_id] = RunRecord(
                run_id=runner.run_id, thread_id=run.thread_id, graph_id=run.graph.graph_id,
                revision=run.graph.revision, status="running", started_at=self.clock.now(),
                updated_at=None, tenant_id=run.tenant_id,
            )
        else:
            record.status = "running"
            record.legs += 1
        run.record = self._runs[runner.run_id]
        if self.on_leg is not None:
            run.record_events = True  # an observer sees every leg's events
            run.leg = RunLeg(
                graph=run.graph, run_id=runner.run_id, resumed=resumed, seed=self.seed,
                initial_state=None if resumed else jcopy(run.state),
                answers=jcopy(run.answers) if resumed else {}, store=self.store)
            self.on_leg(run.leg)


_SUBGRAPHS = functools.partial(run_subgraph, runtime=GraphRuntime)


def _breakpoints(
    graph: CompiledGraph, opts: dict[str, Any]
) -> tuple[frozenset[str], frozenset[str]]:
    """A run's own breakpoints (before, after), checked against ``graph``."""
    out: list[frozenset[str]] = []
    for name in ("interrupt_before", "interrupt_after"):
        nodes: frozenset[str] = opts.get(name, frozenset())
        unknown = sorted(nodes - set(graph.nodes))
        if unknown:
            raise InvalidArgument(f"{name}={sorted(nodes)}: graph {graph.graph_id!r} has no "
                                  f"node {unknown[0]!r}; its nodes are {list(graph.nodes)}")
        out.append(nodes)
    return out[0], out[1]


def _check_constructor(
    clock: Any, on_interrupt: Any, tenant_id: Any, claim_ttl: Any, backend: Any, on_leg: Any
) -> None:
    """The constructor's arguments, checked at once (not at the first run)."""
    where = "GraphRuntime"
    if clock is not None and not isinstance(clock, (RealClock, VirtualClock)) and not (
        callable(getattr(clock, "now", None)) and callable(getattr(clock, "sleep", None))
    ):
        raise InvalidArgument(f"{where}(clock={clock!r:.80}): pass a RealClock(), a "
                              "VirtualClock() or None")
    if on_interrupt is not None and not callable(on_interrupt):
        raise InvalidArgument(f"{where}(on_interrupt={on_interrupt!r:.80}): pass a callable or "
                              "None")
    if on_leg is not None and not callable(on_leg):
        raise InvalidArgument(f"{where}(on_leg={on_leg!r:.80}): pass a callable or None")
    check_optional_id(tenant_id, "tenant_id", where)
    if (isinstance(claim_ttl, bool) or not isinstance(claim_ttl, (int, float))
            or not 0 < claim_ttl < float("inf")):
        raise InvalidArgument(f"{where}(claim_ttl={claim_ttl!r:.80}): claim_ttl must be a "
                              "positive number of seconds")
    if backend not in ("asyncio", "trio"):
        raise InvalidArgument(f"{where}(backend={backend!r:.80}): backend is 'asyncio' or "
                              "'trio'")


def _check_budget(max_supersteps: Any, timeout: Any) -> None:
    if max_supersteps is not None and (not isinstance(max_supersteps, int)
                                       or isinstance(max_supersteps, bool) or max_supersteps < 1):
        raise InvalidArgument(f"max_supersteps={max_supersteps!r} must be an int >= 1 or None")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise InvalidArgument(f"timeout={timeout!r} must be a number of seconds > 0 or None "
                              "(float('inf') means no limit)")
