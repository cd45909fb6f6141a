"""The event loop a LangGraph run executes on under the harness: virtual time, seeded order.

LangGraph's async runner starts one asyncio task per node task of a superstep and runs sync
node functions through ``loop.run_in_executor``. The harness runs it on a
:class:`SeededLoop`, a :class:`~pytest_graphflow._time._vloop.VirtualEventLoop` (its clock is
the :class:`VirtualClock`, so ``asyncio.sleep`` and the loop's timers are virtual) with two
changes:

* **Seeded turns.** Every node task waits at a *gate* before it starts, and again after every
  sleep. Only when the loop is idle (no callback ready, no timer due) does the loop open one
  gate, chosen by the seeded RNG among the waiting tasks sorted by task id. So the tasks of a
  step start, and resume after sleeping, one at a time in an order the seed decides; virtual
  time moves only once every task waits on a timer.
* **Sync node code takes turns on worker threads** (:mod:`._sync`). ``run_in_executor`` runs
  the function on a worker thread while the loop waits, so only one thread runs at a time and
  a sync node that does not sleep ends inside the call, in the seeded order. A blocking
  ``time.sleep(d)`` in it parks the worker on a virtual timer of ``d`` and gives the loop
  back: parallel sync nodes sleep at the same time, as LangGraph's thread pool runs them, and
  wake through the seeded gate like async nodes.

``time.monotonic``/``perf_counter`` (and ``_ns``) read the virtual clock in the leg's context
(node code, LangGraph's retry and timeout code), so ``TimeoutPolicy`` fires in virtual time.

The node tasks are recognised by rebinding the name ``arun_with_retry`` in
``langgraph.pregel._runner`` (the coroutine LangGraph starts for every node task) to a wrapper
that passes the gate first; outside a harness run the wrapper calls the original directly.

Inside those node tasks langchain-core's run ids are owned too: a chat model names an
id-less answer ``lc_run--<run id>``, and run ids are ``uuid7`` values from the wall clock
and OS randomness (``uuid_utils``). The name ``_uuid_utils_uuid7`` in
``langchain_core.utils.uuid`` (the one function every langchain-core ``uuid7`` goes
through) is rebound to one that, in a harness node task, makes a uuid7 from the virtual
clock and the task's owned stream; anywhere else it calls ``uuid_utils``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from .._time._clock import VirtualClock
from .._time._entropy import ENTROPY, TaskEntropy, install_entropy_hooks
from .._time._loops import _cancel_leftovers, _close_asyncgens, _Holder
from .._time._rng import ScheduleRng
from .._time._sched import NODE_SLEEPER, install_sleep_hooks
from .._time._vloop import VirtualEventLoop
from ._attempts import AttemptLog, Attempts
from ._ids import ID_NAMESPACE
from ._sync import SyncWorkers, park

__all__ = ["LEG", "LegContext", "SeededLoop", "TaskStart", "install_loop_hooks", "run_leg"]


@dataclass(frozen=True)
class TaskStart:
    """A node task that passed its start gate.

    Attributes:
        step: LangGraph's step of the task (in its own graph: a subgraph counts its own).
        node: the task's node.
        task_id: LangGraph's task id.
        graph: the subgraph the task runs in, as the path of subgraph nodes
            (``"refund"``, ``"refund/check"``); ``""`` for the graph under test.
        contested: another task of the same batch (graph and step) waited at a gate when
            this one's opened, so the seed chose between them.
    """

    step: int
    node: str
    task_id: str
    graph: str
    contested: bool


@dataclass
class LegContext:
    """What node code under a harness leg needs: the loop (its gates) and the clock."""

    loop: SeededLoop
    clock: VirtualClock
    started: list[TaskStart]
    writes: dict[str, list[tuple[str, Any]]]
    task_nodes: dict[str, str]
    thread_id: str = ""
    began: dict[str, Any] = field(default_factory=dict)
    """When each node task passed its start gate (virtual time), by task id."""
    attempts: AttemptLog | None = None
    """Where retried attempts are reported."""
    steps: dict[str, int] = field(default_factory=dict)
    """The step of each task LangGraph reported in the leg's ``tasks`` stream, by task id
    (that stream's items carry no step)."""


LEG: ContextVar[LegContext | None] = ContextVar("graphflow_langgraph_leg", default=None)
"""Set for the duration of a harness leg (inherited by every task LangGraph starts)."""

_IN_NODE: ContextVar[bool] = ContextVar("graphflow_langgraph_in_node", default=False)
_TASK_KEY: ContextVar[str] = ContextVar("graphflow_langgraph_task_key", default="")
"""The node task's gate key (``name:id``), for a sync function it hands to the executor."""

_installed = False
_real_sleep = time.sleep
_NODE_TASK = "arun_with_retry"  # the coroutine LangGraph's runner starts per node task


class SeededLoop(VirtualEventLoop):
    """A virtual-time asyncio loop that opens node gates one at a time in seeded order.

    Args:
        clock: the virtual clock (the loop's ``time()``).
        rng: picks which waiting gate opens when the loop is idle.
    """

    def __init__(self, clock: VirtualClock, rng: ScheduleRng) -> None:
        super().__init__(clock)
        self._rng = rng
        self._gates: list[tuple[str, int, asyncio.Future[bool], str]] = []
        self._gate_count = 0
        self._cut: tuple[int, Callable[[], object]] | None = None
        idle_select = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> Any:
            if timeout == 0:
                # Callbacks are ready: run them without polling for I/O first (a syscall a
                # turn). A graph's run has no I/O of its own on this loop; a node's own
                # socket is polled when the loop is idle, as the gates already have it.
                return []
            if self._gates and not self._ready:  # type: ignore[attr-defined]
                self._open_one()
                return []
            cut = self._cut
            if cut is not None and (
                    timeout is None
                    or self._vclock.elapsed_ns + round(timeout * 1e9) > cut[0]):
                # idle, and the next wake-up (if any) is past the cut: time stops there
                at, action = cut
                self._cut = None
                self._vclock.advance_to_ns(max(at, self._vclock.elapsed_ns))
                action()
                return []
            return idle_select(timeout)

        self._selector.select = select  # type: ignore[attr-defined]
        self._workers = SyncWorkers(self, self.gate,
                                    getattr(asyncio.sleep, "__wrapped__", asyncio.sleep))

    def begin(self, clock: VirtualClock, rng: ScheduleRng) -> None:
        """Point the loop at a new leg's clock and seeded order (a thread's loop is reused
        from leg to leg; nothing of the last leg is left on it)."""
        self._vclock = clock
        self._rng = rng
        self._gates.clear()
        self._gate_count = 0
        self._cut = None

    def end(self) -> None:
        """Forget the leg: stop the sync nodes still parked at a sleep (their threads go
        back to the pool) and drop what refers to the leg's objects."""
        self._workers.close()
        self._gates.clear()
        self._cut = None

    def cut_at(self, elapsed_ns: int, action: Callable[[], object]) -> None:
        """Call ``action`` once virtual time would move past ``elapsed_ns`` (every task
        waiting, the next wake-up later, or none): the clock stops at that instant. Tasks
        whose wake-up is exactly then run first, as our runtime's deadlines let them."""
        self._cut = (elapsed_ns, action)

    def _open_one(self) -> None:
        self._gates.sort(key=lambda g: (g[0], g[1]))
        i = self._rng.randrange(len(self._gates)) if len(self._gates) > 1 else 0
        _, _, future, batch = self._gates.pop(i)
        if not future.done():
            future.set_result(bool(batch) and any(g[3] == batch for g in self._gates))

    async def gate(self, key: str, batch: str = "") -> bool:
        """Wait until the loop is idle and the seed picks this caller (``key`` sorts ties).

        Returns:
            whether another caller of the same ``batch`` (``""``: none) was waiting too, so
            the seed chose between them.
        """
        future: asyncio.Future[bool] = self.create_future()
        self._gate_count += 1
        entry = (key, self._gate_count, future, batch)
        self._gates.append(entry)
        try:
            return await future
        finally:
            if entry in self._gates:
                self._gates.remove(entry)

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        """Run ``func`` on a worker thread, taking turns with the loop (see the module
        docstring); or, when nothing else could run while it blocks (no other task ready,
        at a gate or on a timer), on the loop thread: a blocking sleep then moves virtual
        time at once, which no one can tell apart, and costs no hand-over."""
        if self._gates or self._ready or self._scheduled:  # type: ignore[attr-defined]
            return self._workers.submit(_TASK_KEY.get(), func, *args)
        future: asyncio.Future[Any] = self.create_future()
        try:
            future.set_result(func(*args))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def close(self) -> None:
        """Stop the sync nodes still sleeping and the worker threads, then close."""
        self._workers.close()
        super().close()


_local = threading.local()
"""``holder``: the calling thread's :class:`SeededLoop` (a ``_Holder`` that closes it when
the thread's storage goes, at interpreter exit, or when a leg is interrupted)."""


def _forget_loop() -> None:
    """In a forked child, leave the parent's loop alone (its selector and wake-up pipe are
    shared with the parent, so closing them would unregister the parent's): the child's
    next leg makes a loop of its own."""
    holder: _Holder | None = getattr(_local, "holder", None)
    if holder is not None:
        holder.finalizer.detach()
        _local.holder = None


os.register_at_fork(after_in_child=_forget_loop)


def run_leg(clock: VirtualClock, rng: ScheduleRng,
            main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run one harness leg, ``main()``, to its end on the calling thread's seeded loop.

    The loop is made once per thread and pointed at each leg's clock and seeded order
    (making an event loop, its selector and wake-up pipe, cost about as much as a small
    graph's run). As ``asyncio.run`` would, the leg runs in a copy of the caller's context,
    and when it returns the tasks it left behind are cancelled and awaited, its unfinished
    async generators (LangGraph's streams) are closed and its sync nodes still parked at a
    sleep are stopped, so nothing of one leg runs during the next.

    Raises:
        SyncCallInEventLoop: called from a running event loop (await ``atrace`` instead).
    """
    if asyncio._get_running_loop() is not None:
        from ..errors import SyncCallInEventLoop

        raise SyncCallInEventLoop(
            "LangGraphHarness.trace()/resume() runs the graph on an event loop of its own, "
            "but it was called inside a running event loop (an async test or node?): "
            "await h.atrace(...)/h.aresume(...) instead")
    holder: _Holder | None = getattr(_local, "holder", None)
    if holder is None or holder.loop.is_closed():
        holder = _local.holder = _Holder(SeededLoop(clock, rng))
    loop = holder.loop
    assert isinstance(loop, SeededLoop)
    loop.begin(clock, rng)
    task = loop.create_task(main())
    try:
        loop.run_task(task)
    except BaseException:
        try:
            if not task.done():  # interrupted (KeyboardInterrupt): give the loop up
                _local.holder = None
                holder.finalizer()
        except (KeyboardInterrupt, SystemExit):
            pass  # the same interruption, out of the tasks again as the loop cancels them
        finally:
            if task.done() and not task.cancelled():
                task.exception()  # raised to the caller: not "never retrieved" as well
        raise
    finally:
        if not loop.is_closed():
            try:
                _cancel_leftovers(loop, task)
                _close_asyncgens(loop)
            finally:
                loop.end()


def install_loop_hooks() -> None:
    """Wrap LangGraph's node-task coroutine and ``time.sleep``, and own node entropy
    (idempotent)."""
    global _installed
    if _installed:
        ensure_time_hooks()
        return
    install_sleep_hooks()
    install_entropy_hooks()
    import langgraph.pregel._runner as runner

    original = getattr(runner, _NODE_TASK)

    async def arun_with_retry(task: Any, *args: Any, **kwargs: Any) -> Any:
        leg = LEG.get()
        if leg is None:
            return await original(task, *args, **kwargs)
        key = f"{getattr(task, 'name', '')}:{getattr(task, 'id', '')}"
        metadata = (getattr(task, "config", None) or {}).get("metadata") or {}
        step = int(metadata.get("langgraph_step", -1))
        task_ns = str(metadata.get("langgraph_checkpoint_ns", ""))
        graph = _graph_path(task_ns)
        contested = await leg.loop.gate(key, f"{graph}|{step}")
        leg.started.append(TaskStart(step, str(task.name), str(task.id), graph, contested))
        if str(task.id) not in leg.began:
            leg.began[str(task.id)] = leg.clock.now()
        leg.task_nodes[str(task.id)] = str(task.name)
        sleeper_token = NODE_SLEEPER.set(_sleeper(leg, key))
        node_token = _IN_NODE.set(True)
        key_token = _TASK_KEY.set(key)
        # A subgraph this task runs draws its ids under the task's namespace (its own).
        ns_token = ID_NAMESPACE.set(task_ns)
        # The task's own uuid/random: keyed by the thread and LangGraph's task id (a hash of
        # the checkpoint it extends and its path), so a re-run task draws the same values.
        entropy_token = ENTROPY.set(TaskEntropy(
            f"graphflow-langgraph-entropy:{leg.thread_id}:{task.id}", leg.clock))
        policies = getattr(task, "retry_policy", None) or (
            args[0] if args else kwargs.get("retry_policy"))
        if policies and leg.attempts is not None:
            # each attempt reported: a retry is an error(will_retry) and a new node_start
            graph_ns = tuple(task_ns.split("|")[:-1]) if task_ns else ()
            task = replace(task, proc=Attempts(task, policies, leg.attempts, graph_ns))
        try:
            result = await original(task, *args, **kwargs)
            # Every write of the task, edges included (the channels LangGraph's own
            # ``branch:to:X``/``join:...`` edges write), whatever the durability mode.
            leg.writes[str(task.id)] = list(getattr(task, "writes", ()))
            return result
        finally:
            ENTROPY.reset(entropy_token)
            _IN_NODE.reset(node_token)
            _TASK_KEY.reset(key_token)
            NODE_SLEEPER.reset(sleeper_token)
            ID_NAMESPACE.reset(ns_token)

    arun_with_retry.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(runner, _NODE_TASK, arun_with_retry)
    _skip_restored_tasks()
    _own_chat_run_ids()
    ensure_time_hooks()
    _installed = True


def ensure_time_hooks() -> None:
    """Put ``time.sleep`` and the virtual ``monotonic``/``perf_counter`` back if something
    rebound them since (freezegun's ``stop()`` restores the functions it found when it started,
    so a test's ``freeze_time`` that began before the first harness undid them, and LangGraph's
    timeouts then read real time). Cheap and idempotent: called for every harness and leg."""
    if time.sleep is not _blocking_sleep:
        time.sleep = _blocking_sleep  # type: ignore[assignment]
    _virtual_elapsed_time()


def _graph_path(task_ns: str) -> str:
    """The subgraph nodes a task runs under, from its checkpoint namespace
    (``"refund:<task id>|lookup:<task id>"`` -> ``"refund"``)."""
    if "|" not in task_ns:
        return ""  # a task of the graph under test
    return "/".join(part.split(":", 1)[0] for part in task_ns.split("|")[:-1])


_DEBUG_TASKS = "map_debug_tasks"  # what LangGraph's loop maps a step's tasks to debug with


def _skip_restored_tasks() -> None:
    """Leave out of a harness leg's ``tasks`` stream the tasks that will not run, and note
    the step of those reported (``LegContext.steps``).

    On resume LangGraph restores the writes of a step's finished tasks from the saved pending
    writes (and marks a task that failed into an ``error_handler`` as failed) before it
    reports the step's tasks; its runner then runs only the tasks with no writes. The
    restored ones got a ``task`` item with no result: a ``node_start`` for a
    task that never ran, which broke C2 (issue 24.6). Outside a harness leg the name calls
    LangGraph's own function unchanged.
    """
    import langgraph.pregel._loop as pregel_loop

    original = getattr(pregel_loop, _DEBUG_TASKS)
    if getattr(original, "__wrapped__", None) is not None:
        return

    def map_debug_tasks(tasks: Any) -> Any:
        leg = LEG.get()
        if leg is None:
            return original(tasks)
        running = [t for t in tasks if not getattr(t, "writes", None)]
        for task in running:
            metadata = (getattr(task, "config", None) or {}).get("metadata") or {}
            step = metadata.get("langgraph_step")
            if isinstance(step, int):
                leg.steps[str(task.id)] = step
        return original(running)

    map_debug_tasks.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(pregel_loop, _DEBUG_TASKS, map_debug_tasks)


_UUID7 = "_uuid_utils_uuid7"  # the function langchain_core.utils.uuid.uuid7 calls


def _own_chat_run_ids() -> None:
    """Make langchain-core's run ids (and so ``lc_run--`` message ids) seeded in harness
    node tasks."""
    try:
        import langchain_core.utils.uuid as lc_uuid
    except ImportError:  # pragma: no cover - langgraph depends on langchain-core
        return
    original = getattr(lc_uuid, _UUID7, None)
    if original is None or getattr(original, "__wrapped__", None) is not None:
        return

    def seeded_uuid7(*args: Any, **kwargs: Any) -> Any:
        leg = LEG.get()
        source = ENTROPY.get()
        if leg is None or source is None or not _IN_NODE.get() or args or kwargs:
            return original(*args, **kwargs)
        return _uuid7(int(leg.clock.now().timestamp() * 1000), source.entropy_rng())

    seeded_uuid7.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(lc_uuid, _UUID7, seeded_uuid7)


def _uuid7(unix_ms: int, rng: Any) -> uuid.UUID:
    """A version-7 uuid: the time in ms, then 74 bits from ``rng``."""
    rand = rng.getrandbits(74)
    value = (unix_ms & 0xFFFFFFFFFFFF) << 80 | 0x7 << 76 | (rand >> 62) << 64
    value |= 0b10 << 62 | (rand & 0x3FFFFFFFFFFFFFFF)
    return uuid.UUID(int=value)


def _sleeper(leg: LegContext, key: str) -> Callable[[float], Awaitable[None]]:
    real_asyncio_sleep = getattr(asyncio.sleep, "__wrapped__", asyncio.sleep)

    async def sleep(delay: float) -> None:
        token = NODE_SLEEPER.set(None)
        try:
            await real_asyncio_sleep(delay)
            await leg.loop.gate(key)
        finally:
            NODE_SLEEPER.reset(token)

    return sleep


_ELAPSED = ("monotonic", "perf_counter")  # the time module's elapsed-time clocks


def _virtual_elapsed_time() -> None:
    """Make ``time.monotonic``/``perf_counter`` (and their ``_ns`` forms) read the virtual
    clock within a harness leg (its node tasks, LangGraph's retry, timeout and heartbeat
    code, which all run in the leg's context); anywhere else they are the real ones.

    Rebinding the names in :mod:`time` reaches every caller that looks them up there
    (``time.monotonic()``, as LangGraph does); a ``from time import monotonic`` made before
    keeps the real clock. Event loops read their own ``loop.time()`` (the harness's is
    virtual), so asyncio is unaffected.
    """
    for name in _ELAPSED:
        real = getattr(time, name)
        real_ns = getattr(time, f"{name}_ns")
        if getattr(real, "__wrapped__", None) is not None:
            continue

        def seconds(_real: Callable[[], float] = real) -> float:
            leg = LEG.get()
            return _real() if leg is None else leg.clock.monotonic()

        def nanoseconds(_real: Callable[[], int] = real_ns) -> int:
            leg = LEG.get()
            return _real() if leg is None else leg.clock.elapsed_ns

        seconds.__wrapped__ = real  # type: ignore[attr-defined]
        nanoseconds.__wrapped__ = real_ns  # type: ignore[attr-defined]
        setattr(time, name, seconds)
        setattr(time, f"{name}_ns", nanoseconds)


def _blocking_sleep(seconds: float) -> None:
    """``time.sleep``: in a node under a harness leg, virtual: a sync node's worker parks
    on a virtual timer (other tasks run meanwhile); on the loop thread (an async node that
    blocks) virtual time advances at once, every other task waiting, as the blocked loop
    would make them wait."""
    leg = LEG.get()
    if leg is None or not _IN_NODE.get():
        _real_sleep(seconds)
        return
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    if not park(seconds):
        leg.clock.advance(seconds)
