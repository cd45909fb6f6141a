"""The deterministic batch scheduler and virtual-time sleep interception (SPEC §7).

Under a :class:`VirtualClock`, the tasks of a batch take turns: exactly one holds the *baton*
at a time, and the seeded RNG picks which ready task continues at every start and every
wake-up. A task gives the baton back when it sleeps (``anyio.sleep``, ``asyncio.sleep``,
``trio.sleep``) or finishes. When no task is ready, virtual time jumps to the earliest
wake-up. Because time only moves when every task of the batch waits on a virtual timer, a
task blocked on real work (a worker thread, real I/O) never sees time jump under it.

The sleep functions are patched once, process-wide, when the first :class:`GraphRuntime` is
made (trio's once trio is imported and a run starts); the patch acts only in a task whose
context says it is a node task under a scheduler, and defers to the original otherwise.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import math
import sys
import weakref
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, NamedTuple

import anyio

from ._clock import VirtualClock

__all__ = [
    "NODE_SLEEPER",
    "Backend",
    "BatchScheduler",
    "backend",
    "install_sleep_hooks",
    "install_trio_sleep_hooks",
]

NODE_SLEEPER: ContextVar[Callable[[float], Awaitable[None]] | None] = ContextVar(
    "graphflow_node_sleeper", default=None
)
"""Set in node tasks under a virtual clock: the function a patched sleep defers to."""

_installed = [False, False]  # asyncio and anyio's asyncio backend; trio and anyio's trio backend


def install_sleep_hooks() -> None:
    """Patch ``asyncio.sleep`` and anyio's asyncio backend sleep (idempotent)."""
    if _installed[0]:
        return
    _installed[0] = True

    original_asyncio_sleep = asyncio.sleep

    async def asyncio_sleep(delay: float, result: Any = None) -> Any:
        sleeper = NODE_SLEEPER.get()
        if sleeper is None:
            return await original_asyncio_sleep(delay, result)
        await sleeper(delay)
        return result

    asyncio_sleep.__wrapped__ = original_asyncio_sleep  # type: ignore[attr-defined]
    asyncio.sleep = asyncio_sleep

    from anyio._backends import _asyncio as anyio_asyncio

    _patch_backend(anyio_asyncio.AsyncIOBackend)
    _patch_anyio_sleep()


def _patch_anyio_sleep() -> None:
    """Patch ``anyio.sleep`` itself: in a node task it goes to the node's sleeper at once.

    ``anyio.sleep`` asks sniffio for the running backend, then calls the backend's sleep,
    which the backend patches send to the same sleeper: some eight calls a sleep that a node
    task never needs (its sleeper is the same whichever the backend). Anywhere else it is
    anyio's own. Code that imported the function before the patch (``from anyio import
    sleep``) still reaches the sleeper through the backend patches.
    """
    from anyio._core import _eventloop

    original = _eventloop.sleep
    sleep = _deferring(original)
    sleep.__doc__ = original.__doc__
    sleep.__module__ = original.__module__
    anyio.sleep = sleep  # type: ignore[assignment]


def _deferring(original: Callable[[float], Awaitable[None]]) -> Callable[[float], Any]:
    """``original`` (a sleep of one argument), deferring to the node's sleeper in a node
    task under a virtual clock."""

    async def sleep(delay: float) -> None:
        sleeper = NODE_SLEEPER.get()
        if sleeper is None:
            return await original(delay)
        await sleeper(delay)

    sleep.__wrapped__ = original  # type: ignore[attr-defined]
    return sleep


def install_trio_sleep_hooks() -> None:
    """Patch ``trio.sleep`` and anyio's trio backend sleep (idempotent; call only once trio
    is imported: this never imports it for nothing)."""
    if _installed[1]:
        return
    _installed[1] = True
    import trio
    from anyio._backends import _trio as anyio_trio

    trio.sleep = _deferring(trio.sleep)  # type: ignore[assignment]
    _patch_backend(anyio_trio.TrioBackend)


def _patch_backend(backend: Any) -> None:
    original = backend.sleep.__func__

    async def sleep(cls: Any, delay: float) -> None:
        sleeper = NODE_SLEEPER.get()
        if sleeper is None:
            return await original(cls, delay)  # type: ignore[no-any-return]
        await sleeper(delay)

    backend.sleep = classmethod(sleep)


class Backend(NamedTuple):
    """The running async backend's own makers of what a batch uses many of.

    ``anyio.Event()``, ``anyio.CancelScope()`` and ``anyio.create_task_group()`` ask sniffio
    for the backend at every call, and ``anyio.get_current_task()`` builds a ``TaskInfo``:
    each costs more than the object made. A batch asks once (:func:`backend`) and uses these.
    """

    event: Callable[[], Any]
    """The baton's event: anyio's on trio; on asyncio a :class:`_Baton`, which one task
    waits on (what anyio's event does there, without its layers)."""
    cancel_scope: Callable[[], anyio.CancelScope]
    task_group: Callable[[], anyio.abc.TaskGroup]
    current_task: Callable[[], object]
    """The running task itself (what ``anyio.get_current_task().id`` identifies)."""
    take_turn: Callable[[Any], Awaitable[None]]
    """``await take_turn(event)``: wait for the baton's event (:func:`_take_turn`)."""
    spawn: Callable[..., None]
    """``spawn(tg, fn, *args)``: start ``fn(*args)`` as a task of the task group ``tg`` (what
    ``tg.start_soon`` does; on asyncio without anyio's layers: :func:`_spawn_asyncio`)."""


_BACKENDS: dict[str, Backend] = {}


def backend() -> Backend:
    """The running backend's :class:`Backend` (one look-up; the classes are found once per
    backend, as anyio's own factories make them)."""
    name = "asyncio"
    if "trio" in sys.modules:  # else nothing but asyncio can be running (and sniffio, which
        name = _running_library()  # trio needs, may not be installed)
    found = _BACKENDS.get(name)
    if found is None:
        current: Callable[[], object]
        take: Callable[[Any], Awaitable[None]]
        event: Callable[[], Any]
        spawn: Callable[..., None] = _start_soon
        group: Callable[[], anyio.abc.TaskGroup] = type(anyio.create_task_group())
        if name == "trio":
            current = sys.modules["trio"].lowlevel.current_task
            take = _wait
            event = type(anyio.Event())
        else:
            current = asyncio.current_task
            take = _take_turn
            event = _Baton
            if _asyncio_group_known(anyio.create_task_group()):
                spawn = _spawn_asyncio
                group = _asyncio_group_class()
        found = _BACKENDS[name] = Backend(event, type(anyio.CancelScope()), group, current,
                                          take, spawn)
    return found


def _start_soon(tg: Any, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
    tg.start_soon(fn, *args)


def _asyncio_group_known(tg: Any) -> bool:
    """Whether anyio's asyncio task group (and cancel scope) are laid out as
    :func:`_spawn_asyncio` expects: the group waits for its own set of tasks through
    ``_on_completed_fut`` (anyio 4.x); any other layout keeps ``tg.start_soon``."""
    if _task_states is None:  # pragma: no cover - another anyio
        return False
    scope = getattr(tg, "cancel_scope", None)
    return (isinstance(getattr(tg, "_tasks", None), set)
            and isinstance(getattr(tg, "_exceptions", None), list)
            and "_on_completed_fut" in getattr(tg, "__dict__", ())
            and isinstance(getattr(scope, "_tasks", None), set)
            and hasattr(scope, "_host_task") and hasattr(scope, "_active")
            and hasattr(type(scope), "_effectively_cancelled"))


def _spawn_asyncio(tg: Any, fn: Callable[..., Any], *args: Any) -> None:
    """``tg.start_soon(fn, *args)`` on asyncio, without anyio's per-task layers.

    anyio 4's ``start_soon`` wraps each task's coroutine in a handle that makes a cancel
    scope and an event of its own (each asking sniffio for the backend), enters that scope in
    the task and names the task: some 60 Python calls a task, more than a small node costs.
    Here the task is made as the handle makes it (a task of the loop, in the group's cancel
    scope, running its coroutine in a scope of its own: :func:`_scoped`), without the
    handle, its event and the backend look-ups, and ends as anyio's own ``task_done`` ends
    it: its error collected by the group, the group's scope cancelled. A loop with a task factory
    of its own (eager tasks, say) keeps ``start_soon``.
    """
    loop = asyncio.get_running_loop()
    scope = tg.cancel_scope
    if loop.get_task_factory() is not None or not scope._active:
        tg.start_soon(fn, *args)  # (a closed group raises there, as it should)
        return
    task = asyncio.Task(_scoped(type(scope), fn(*args)), loop=loop)
    _task_states[task] = _TaskState(id(scope._host_task), scope)
    scope._tasks.add(task)
    tg._tasks.add(task)
    task.add_done_callback(functools.partial(_asyncio_task_done, tg))


async def _scoped(scope: Callable[[], Any], coro: Awaitable[Any]) -> None:
    """A task's coroutine in a cancel scope of its own, a child of its group's: as anyio's
    task handle runs it. The group's cancellation reaches the tasks in the order anyio gives
    it: the task running the group's body first (the scope's own), then each child's scope
    (a batch's body runs its first task: its node unwinds before the others')."""
    with scope():
        await coro


def _asyncio_group_class() -> Callable[[], anyio.abc.TaskGroup]:
    """anyio's asyncio task group, leaving without a turn of the loop that would come
    straight back (see :func:`_take_turn`).

    A group that started no task (a batch whose one task ran in the group's body) gives the
    loop a turn as it leaves (anyio's ``cancel_shielded_checkpoint``). A shielded turn
    delivers no cancellation: it only lets the loop run what else is ready or due. When
    nothing is (no ready callback, no timer due), the turn would only come straight back,
    and the group leaves its scope at once; otherwise, and whenever it has tasks, an error
    or a cancellation to see to, it leaves as anyio's does.
    """
    from anyio._backends._asyncio import TaskGroup

    class _TaskGroup(TaskGroup):
        async def __aexit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
            if exc_val is None and not self._tasks and not self._exceptions \
                    and not self.cancel_scope.cancel_called:
                loop: Any = asyncio.get_running_loop()
                ready = getattr(loop, "_ready", None)  # asyncio's own loops
                scheduled = getattr(loop, "_scheduled", None)
                if (ready is not None and scheduled is not None and not ready
                        and (not scheduled or scheduled[0]._when > loop.time())):
                    del self._exceptions  # (as anyio's own exit lets go of them)
                    return self.cancel_scope.__exit__(None, None, None)
            return await super().__aexit__(exc_type, exc_val, exc_tb)

    return _TaskGroup


def _asyncio_task_done(tg: Any, task: asyncio.Task[Any]) -> None:
    """anyio's ``TaskGroup._spawn.task_done`` for a task of :func:`_spawn_asyncio`."""
    state = _task_states.pop(task, None)
    if state is not None and state.cancel_scope is not None:
        state.cancel_scope._tasks.discard(task)
    tasks = tg._tasks
    tasks.discard(task)
    waiting = tg._on_completed_fut
    if waiting is not None and not tasks and not waiting.done():
        waiting.set_result(None)
    try:
        exc: BaseException | None = task.exception()
    except asyncio.CancelledError as cancelled:
        while isinstance(cancelled.__context__, asyncio.CancelledError):
            cancelled = cancelled.__context__
        exc = cancelled
    if exc is not None:
        if not isinstance(exc, asyncio.CancelledError):
            tg._exceptions.append(exc)
        if not tg.cancel_scope._effectively_cancelled:
            tg.cancel_scope.cancel()


def _anyio_task_states() -> tuple[Any, Any]:
    try:
        from anyio._backends._asyncio import TaskState, _task_states
    except ImportError:  # pragma: no cover - another anyio: _spawn_asyncio is not used
        return None, None
    return TaskState, _task_states


_TaskState, _task_states = _anyio_task_states()


def _running_library() -> str:
    """``sniffio.current_async_library()``, its answers read in place: the thread's or the
    context's library when one set it (trio does), else asyncio inside an asyncio task."""
    import sniffio

    name = sniffio.thread_local.name or sniffio.current_async_library_cvar.get()
    if name is not None:
        return name
    loop = asyncio._get_running_loop()
    if loop is not None and asyncio.current_task(loop) is not None:
        return "asyncio"
    return sniffio.current_async_library()  # (curio, or no library: sniffio's own answer)


async def _wait(ev: anyio.Event) -> None:
    await ev.wait()


class _Baton:
    """The baton's event on asyncio: what anyio's ``Event`` is there (an ``asyncio.Event``
    behind a wrapper), for the one task that waits on it, in a few attributes. Set once;
    :func:`_take_turn` waits on it as ``Event.wait`` would (a turn of the loop when it is
    set already, else a future of the loop that :meth:`set` resolves)."""

    __slots__ = ("_fut", "_set")

    def __init__(self) -> None:
        self._set = False
        self._fut: asyncio.Future[None] | None = None

    def set(self) -> None:
        """Hand the baton over: wake the task waiting, if one is."""
        if not self._set:
            self._set = True
            fut = self._fut
            if fut is not None and not fut.done():
                fut.set_result(None)

    def is_set(self) -> bool:
        """Whether the baton was handed over."""
        return self._set

    async def wait(self) -> None:
        """Wait for the baton (``anyio.Event.wait`` on asyncio)."""
        await _take(self)


async def _take_turn(ev: _Baton) -> None:
    """Wait for ``ev``, the baton handed to this task (asyncio).

    When the scheduler set it already (a lone task's start, its wake-up after a sleep),
    ``Event.wait`` would still give the loop one turn. When the loop has nothing else ready
    and no timer due, that turn would only come straight back here: skip it, and only check
    for a cancellation (what the turn would have delivered). A turn that could run anything
    else (a task the node started, a callback, a due timer) is taken as before.
    """
    if ev._set:
        loop: Any = asyncio.get_running_loop()
        ready = getattr(loop, "_ready", None)  # asyncio's own loops (not uvloop's, say)
        scheduled = getattr(loop, "_scheduled", None)
        if (ready is not None and scheduled is not None and not ready
                and (not scheduled or scheduled[0]._when > loop.time())):
            if _scopes_known and not _cancel_due(loop):
                return
            await _checkpoint_if_cancelled()
            return
    await _take(ev)


def _cancel_due(loop: Any) -> bool:
    """Whether anyio's ``checkpoint_if_cancelled`` would act in the running task: a scope of
    the task's, from its own out to the first shielded one, had its cancel called.

    Its own walk, read in place: each scope's ``cancel_called`` and ``shield`` are properties
    (two calls a scope, and a batch's task sits some scopes deep), the task's look-up another
    three. A task anyio does not know has no scope to cancel.
    """
    task = _current_task(loop)
    if task is None:
        return False
    state = _task_states_data.get(weakref.ref(task))
    scope = None if state is None else state.cancel_scope
    while scope is not None:
        if scope._cancel_called:
            return True
        if scope._shield:
            return False
        scope = scope._parent_scope
    return False


async def _take(ev: _Baton) -> None:
    """``anyio.Event.wait`` on asyncio for a :class:`_Baton`: one turn of the loop when it is
    set (anyio's checkpoint), else wait on a future of the loop (``asyncio.Event.wait``)."""
    if ev._set:
        await _checkpoint()
        return
    fut = ev._fut = asyncio.get_running_loop().create_future()
    try:
        await fut
    finally:
        ev._fut = None


def _asyncio_checkpoints() -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    from anyio._backends._asyncio import AsyncIOBackend

    return AsyncIOBackend.checkpoint_if_cancelled, AsyncIOBackend.checkpoint


_checkpoint_if_cancelled, _checkpoint = _asyncio_checkpoints()

_current_task = asyncio.current_task


def _anyio_scopes_known() -> bool:
    """Whether anyio's asyncio cancel scopes and task states are laid out as
    :func:`_cancel_due` reads them (anyio 4.x); otherwise anyio's own check is called."""
    from anyio._backends._asyncio import CancelScope

    slots = getattr(CancelScope, "__slots__", ())
    return (_TaskState is not None and "cancel_scope" in getattr(_TaskState, "__slots__", ())
            and isinstance(getattr(_task_states, "data", None), dict)
            and all(name in slots for name in ("_cancel_called", "_shield", "_parent_scope")))


_scopes_known = _anyio_scopes_known()
_task_states_data: dict[Any, Any] = _task_states.data if _scopes_known else {}


_HOSTED: Any = object()
"""The ready list's event of a hosted task (:meth:`BatchScheduler.register_hosted`)."""


class BatchScheduler:
    """Runs a batch's tasks one at a time in seeded order under a virtual clock.

    Args:
        clock: the virtual clock to advance.
        rng: decides which ready task continues.
        deadline_ns: a virtual deadline (run timeout); reaching it calls ``on_deadline``.
        kinds: the running backend's makers (:func:`backend`), when the caller has them.
    """

    def __init__(
        self,
        clock: VirtualClock,
        rng: Any,
        deadline_ns: int | None = None,
        on_deadline: Callable[[], None] | None = None,
        on_stall: Callable[[list[int]], None] | None = None,
        loop_deadline: Callable[[], int | None] | None = None,
        kinds: Backend | None = None,
    ) -> None:
        self.kinds = kinds or backend()
        self.clock = clock
        self.rng = rng
        self.deadline_ns = deadline_ns
        self.on_deadline = on_deadline
        self.on_stall = on_stall
        self.loop_deadline = loop_deadline
        self.kick: anyio.Event | None = None
        self.start_keeper: Callable[[], object] | None = None
        """On an owned loop: starts :meth:`keeper` in the batch's task group, at the first jump
        to a loop deadline (most batches have none, and pay no task for it)."""
        self._kicked_for: int | None = None
        self.order_keys: list[int] = []
        self._done: set[int] = set()
        self.keeper_scope: anyio.CancelScope | None = None
        self._forever: list[int] = []
        self.order: list[int] = []
        self._ready: list[tuple[int, Any]] = []
        """The tasks ready to run, in the order they became ready (the seeded pick's list)."""
        self._ready_daemons: list[tuple[int, Any]] = []
        """The daemons ready to run, in that order: each goes before any task, without a draw.
        Kept apart so that a pick does not scan the batch's ready tasks for a daemon."""
        self._timers: list[tuple[int, int, int, Any]] = []
        self._counter = 0
        self._running: int | None = None
        self._closed = False
        self.timed_out = False
        self._daemons: set[int] = set()
        self._daemon_scopes: dict[int, anyio.CancelScope] = {}
        self._spawn: dict[int, Callable[[], object]] = {}
        self.spawned: set[int] = set()
        """Daemons whose task was started (the others have nothing to cancel)."""
        self.host_event: Any = None
        """The event the coroutine running the hosted tasks waits on (:meth:`register_hosted`)."""
        self.host_key: int | None = None
        """The hosted task that holds the baton."""

    def register(self, key: int) -> Any:
        """Register a task before the batch starts; it waits on the returned event."""
        ev = self.kinds.event()
        self._ready.append((key, ev))
        self.order_keys.append(key)
        return ev

    def register_hosted(self, key: int) -> None:
        """Register a task that runs in a coroutine shared with other such tasks, one after
        the other, and never gives the baton back before it ends (a sync node). When it gets
        the baton, :attr:`host_key` names it and :attr:`host_event` is set; the host makes a
        new :attr:`host_event` before the task ends. The seeded picks are the same as if it
        had a task of its own."""
        self._ready.append((key, _HOSTED))
        self.order_keys.append(key)

    def daemon(self, key: int, scope: anyio.CancelScope, period: float,
               spawn: Callable[[], object]) -> None:
        """Register a helper (e.g. a claim renewal) that acts every ``period`` seconds and
        takes turns like a task but does not keep the batch going: it never counts as
        remaining work, its timers alone never hold off a stall, it goes first when ready (no
        draw of the seeded RNG, so the tasks' order is unchanged), and ``scope`` is cancelled
        once the last task finished (if its task was started: see :attr:`spawned`).

        No task is started for it up front: its first turn is a timer, ``period`` from now
        (:meth:`daemon_delay`), and ``spawn()`` starts the task when that turn comes, holding
        the baton (its work is due at once; it sleeps with :meth:`sleeper` afterwards). A
        batch that ends sooner, as most do, never starts it.
        """
        self._daemons.add(key)
        self._daemon_scopes[key] = scope
        self._spawn[key] = spawn
        self._counter += 1
        wake = self.clock.elapsed_ns + round(self.daemon_delay(period) * 1e9)
        heapq.heappush(self._timers, (wake, self._counter, key, None))

    def daemon_delay(self, period: float) -> float:
        """How long a daemon that acts every ``period`` seconds sleeps now: ``period``, or, when
        the batch's next wake-up is further away, until ``period`` before it. Virtual time
        jumps straight there, so no one can observe the instants skipped, and a task sleeping
        for days costs a few turns, not one per period."""
        period_ns = round(period * 1e9)
        wakes = [t[0] for t in self._timers if t[2] not in self._daemons]
        if not wakes:
            return period
        return max(period_ns, min(wakes) - period_ns - self.clock.elapsed_ns) / 1e9

    def drop_daemon(self, key: int) -> None:
        """A cancelled daemon leaves without dispatching: the batch is being cancelled, and
        no task may be woken (nor time moved) on its way out."""
        self._ready_daemons = [r for r in self._ready_daemons if r[0] != key]
        self._timers = [t for t in self._timers if t[2] != key]
        heapq.heapify(self._timers)
        if self._running == key:
            self._running = None

    def _stop_daemons(self) -> None:
        if not self._daemons:
            return
        self._ready_daemons = []
        self._timers = [t for t in self._timers if t[2] not in self._daemons]
        heapq.heapify(self._timers)
        self._spawn.clear()
        for key, scope in self._daemon_scopes.items():
            if key in self.spawned:  # a daemon never started has no task to cancel
                scope.cancel()

    @property
    def remaining(self) -> int:
        """Tasks of the batch that have not finished."""
        return len(self.order_keys) - len(self._done)

    def stall(self) -> bool:
        """Every task of this batch waits on something that can never happen: fail them."""
        if self._closed or self.remaining == 0 or self.on_stall is None:
            return False
        waiting = [k for k in self.order_keys if k not in self._done]
        self._closed = True
        self.on_stall(waiting)
        return True

    def finished(self, key: int) -> None:
        """Task ``key`` is done for good: pass the baton on; stop the keeper (and the
        daemons, before time could jump to their timers) after the last."""
        done = self._done  # (``remaining``, inline: this runs once a task)
        if key not in self._daemons:
            done.add(key)
            if len(self.order_keys) == len(done):
                self._stop_daemons()
        self.release(key)
        if self.keeper_scope is not None and len(self.order_keys) == len(done):
            self.keeper_scope.cancel()

    async def keeper(self) -> None:
        """On an owned loop: after a jump to a loop deadline, let the loop fire it, then go on.

        Started by the first such jump (:attr:`start_keeper`), it then waits for the next
        ones. Runs outside node context, so its zero-length sleeps reach the real loop.
        """
        with anyio.CancelScope() as scope:
            self.keeper_scope = scope
            if self.remaining == 0:
                return
            while True:
                self.kick = anyio.Event()
                for _ in range(3):
                    await anyio.lowlevel.checkpoint()
                self._dispatch()
                await self.kick.wait()

    def start(self) -> None:
        """Hand the baton to the first task (call once every task is registered)."""
        self._dispatch()

    def release(self, key: int) -> None:
        """The task ``key`` finished (or failed): pass the baton on."""
        if self._running == key:
            self._running = None
            self._dispatch()
        else:  # a task cancelled while waiting: forget it
            if key in self._daemons:
                self._ready_daemons = [r for r in self._ready_daemons if r[0] != key]
            else:
                self._ready = [r for r in self._ready if r[0] != key]
            self._timers = [t for t in self._timers if t[2] != key]
            heapq.heapify(self._timers)
            if key in self._forever:
                self._forever.remove(key)

    def close(self) -> None:
        """Stop dispatching (the batch is being cancelled)."""
        self._closed = True

    def sleeper(self, key: int) -> Callable[[float], Awaitable[None]]:
        """The sleep function for task ``key`` (what patched sleeps defer to).

        Only the node's own task takes part in the batch's turns; a child task the node
        started itself sleeps on the loop (virtual on a loop the runtime owns).
        """
        current_task = self.kinds.current_task
        take_turn = self.kinds.take_turn
        # Called from the node's own task. Held weakly: a failed node's traceback keeps its
        # frames, and so this function, alive until the collector runs; the task (and all it
        # holds) then goes when it ends, not with the collector.
        owner = weakref.ref(current_task())

        async def sleep(delay: float) -> None:
            if not delay >= 0:
                raise ValueError(f"sleep length must be non-negative, got {delay!r}")
            if current_task() is not owner():
                token = NODE_SLEEPER.set(None)
                try:
                    await anyio.sleep(delay)
                finally:
                    NODE_SLEEPER.reset(token)
                return
            ev = self.kinds.event()
            if math.isinf(delay):
                self._forever.append(key)
            else:
                wake = self.clock.elapsed_ns + round(delay * 1e9)
                self._counter += 1
                heapq.heappush(self._timers, (wake, self._counter, key, ev))
            if self._running == key:
                self._running = None
            self._dispatch()
            # anyio's Event.wait may itself sleep(0): let that reach the real sleep.
            token = NODE_SLEEPER.set(None)
            try:
                await take_turn(ev)
            except anyio.get_cancelled_exc_class():
                # Woken by a loop deadline (e.g. move_on_after in the node), not by the
                # scheduler: forget the timer and take the baton while the node unwinds.
                self._timers = [t for t in self._timers if t[3] is not ev]
                heapq.heapify(self._timers)
                if key in self._forever:
                    self._forever.remove(key)
                if self._running is None and not self._closed:
                    self._running = key
                raise
            finally:
                NODE_SLEEPER.reset(token)

        return sleep

    def _dispatch(self) -> None:
        if self._closed or self._running is not None:
            return
        if self._ready_daemons:  # a ready daemon goes first, without a draw
            self._run(*self._ready_daemons.pop(0))
            return
        if not self._ready and self.loop_deadline is not None:
            deadline = self.loop_deadline()
            if (deadline is not None and deadline != self._kicked_for
                    and (not self._timers or deadline <= self._timers[0][0])
                    and (self.deadline_ns is None or deadline <= self.deadline_ns)):
                # The loop's own deadline comes first: move time there and let the loop act.
                self.clock.advance_to_ns(deadline)
                self._kicked_for = deadline
                start, self.start_keeper = self.start_keeper, None
                if start is not None:
                    start()  # the keeper's first turn: it starts with what a kick does
                elif self.kick is not None:
                    self.kick.set()
                return
        if (not self._ready and self._forever and self._daemons
                and all(t[2] in self._daemons for t in self._timers)):
            self._timers = []  # only daemons would wake: the tasks wait forever (a stall)
        if not self._ready and self._timers:
            wake = self._timers[0][0]
            if self.deadline_ns is not None and wake > self.deadline_ns:
                self.clock.advance_to_ns(self.deadline_ns)
                self.timed_out = True
                self._closed = True
                if self.on_deadline is not None:
                    self.on_deadline()
                return
            self.clock.advance_to_ns(wake)
            daemons = self._daemons
            while self._timers and self._timers[0][0] == wake:
                _, _, key, ev = heapq.heappop(self._timers)
                (self._ready_daemons if key in daemons else self._ready).append((key, ev))
            if self._ready_daemons:
                self._run(*self._ready_daemons.pop(0))
                return
        ready = self._ready
        if not ready:
            if not self._timers and self._forever:
                self._closed = True
                if self.on_stall is not None:
                    self.on_stall(list(self._forever))
            return
        i = 0 if self.rng is None or len(ready) == 1 else self.rng.randrange(len(ready))
        key, ev = ready.pop(i)
        self.order.append(key)
        self._run(key, ev)

    def _run(self, key: int, ev: Any) -> None:
        """Hand the baton to ``key`` (a task, or a daemon)."""
        self._running = key
        if ev is None:  # a daemon's first turn: start its task, which holds the baton
            self.spawned.add(key)
            self._spawn.pop(key)()
        elif ev is _HOSTED:
            self.host_key = key
            assert self.host_event is not None
            self.host_event.set()
        else:
            ev.set()
