"""The error catalogue of pytest-graphflow.

Every error the library raises derives from :class:`GraphflowError`. Where a builtin
exception fits, a leaf inherits it too, so ``except ValueError`` keeps working.

Two kinds of error exist (SPEC §6):

* errors *in the run* (a node that raises, conflicting writes, budgets, ...) end the run
  with an ``error`` event, ``run_end`` with status ``failed`` and a resumable checkpoint; the
  result carries them (``GraphResult.error``) and ``GraphResult.raise_for_status()`` raises them;
* errors of the *caller* (bad arguments, unknown ids, resume errors, claims) are raised by the
  call itself. A store's own exception is never wrapped (invariant C6).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

__all__ = [
    "BlockingSleepWarning",
    "Cancelled",
    "CheckpointNotFound",
    "ConflictingWrites",
    "DeadlineExpired",
    "EventsCompacted",
    "ExecutionMismatch",
    "ForkTargetExists",
    "GraphExecutionError",
    "GraphValidationError",
    "GraphflowError",
    "GuardrailBlocked",
    "InvalidArgument",
    "InvalidHistory",
    "JoinStarved",
    "MalformedCommit",
    "MidExecution",
    "MiddlewareFailed",
    "MissingExtra",
    "NodeFailed",
    "NotSuspended",
    "NothingToRecover",
    "ParentNotLatest",
    "ReplayDiverged",
    "ResumeError",
    "RunTimedOut",
    "SimulatedCrash",
    "SnapshotMismatch",
    "StaleClaim",
    "StoreFault",
    "StoreFileError",
    "SuperstepLimit",
    "SyncCallInEventLoop",
    "TenantMismatch",
    "ThreadBusy",
    "ThreadSuspended",
    "ToolFailed",
    "UndeclaredWrite",
    "UnexpectedError",
    "UnknownKey",
    "UnknownRoute",
    "UnsupportedFormat",
    "UpdateRejected",
    "VirtualDeadlock",
]


class GraphflowError(Exception):
    """Root of every error pytest-graphflow raises."""


class InvalidArgument(GraphflowError, TypeError):
    """An argument to a pytest-graphflow API is of the wrong type or out of range."""


class GraphValidationError(GraphflowError, ValueError):
    """The builder found one or more structural problems; every problem is listed.

    Attributes:
        problems: one line per problem, each naming the node or edge it concerns.
        graph_id: the graph that failed to compile.
    """

    def __init__(self, graph_id: str, problems: Sequence[str]) -> None:
        self.graph_id = graph_id
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"graph {graph_id!r} has {len(self.problems)} structural problem(s):\n{lines}"
        )


class GraphExecutionError(GraphflowError, RuntimeError):
    """A graph was used in a way its run does not allow (seed 001's interrupt misuse, ...)."""


class UnknownRoute(GraphExecutionError):
    """A node returned a route this graph cannot schedule.

    Attributes:
        node: the node that picked the route.
        target: the target it picked.
    """

    def __init__(self, node: str, target: object, allowed: Sequence[str], *,
                 listed: str = "declared targets", fix: str | None = None) -> None:
        self.node = node
        self.target = target
        self.allowed = list(allowed)
        if fix is None:  # a node picking its own target: Command.goto or Expand
            fix = (f"Declare it with g.node({node!r}, ..., destinations=[...]) or route to an "
                   "existing node.")
        super().__init__(
            f"node {node!r} routed to {target!r}, which it may not reach; {listed}: "
            f"{self.allowed}. {fix}"
        )

    @classmethod
    def from_branch(cls, node: str, target: object, allowed: Sequence[str], *,
                    key: bool = False) -> UnknownRoute:
        """A branch of ``node`` picked ``target``, not one of its targets (or, with ``key``,
        a key its mapping lacks): the fix is the branch's own target list or mapping."""
        if key:
            return cls(node, target, allowed, listed="the keys of its branch's mapping",
                       fix=f"Return one of them, or add the key to the mapping of "
                           f"g.branch({node!r}, ...).")
        return cls(node, target, allowed, listed="its branch's targets",
                   fix=f"Return one of them, or add it to the targets of "
                       f"g.branch({node!r}, ...).")


class ConflictingWrites(GraphExecutionError):
    """Two tasks of one parallel batch wrote the same key, and the key has no reducer."""

    def __init__(self, key: str, nodes: Sequence[str]) -> None:
        self.key = key
        self.nodes = list(nodes)
        super().__init__(
            f"nodes {self.nodes} of one parallel batch all wrote key {key!r}, which has no "
            f"reducer; annotate the field with Reducer(...) "
            f"(e.g. Annotated[list[str], Reducer(operator.add)]) or write it from one node only."
        )


class UndeclaredWrite(GraphExecutionError):
    """A node emitted an update for a key outside its declared write set."""

    def __init__(self, node: str, key: str, declared: Sequence[str]) -> None:
        self.node = node
        self.key = key
        self.declared = sorted(declared)
        super().__init__(
            f"node {node!r} wrote key {key!r} outside its declared write set {self.declared}; "
            f"add it to writes= or stop writing it."
        )


class UnknownKey(GraphExecutionError):
    """A key was read or written that the graph's state schema does not define.

    Attributes:
        node: the node (``"<input>"`` for a run's input, ``"<update>"`` for update_state).
        key: the unknown key.
        known: the keys the schema defines.
        read: ``True`` when the node read the key, ``False`` when it wrote it.
    """

    def __init__(self, node: str, key: str, known: Sequence[str], *, read: bool = False
                 ) -> None:
        self.node = node
        self.key = key
        self.known = sorted(known)
        self.read = read
        verb = "read" if read else "wrote"
        super().__init__(
            f"node {node!r} {verb} key {key!r}, which the state schema does not define; "
            f"known keys: {self.known}."
        )


class UpdateRejected(GraphExecutionError):
    """A key's reducer (or the state schema) rejected an update."""

    def __init__(self, node: str, key: str, reason: str) -> None:
        self.node = node
        self.key = key
        self.reason = reason
        super().__init__(f"update of key {key!r} by node {node!r} was rejected: {reason}")


class SuperstepLimit(GraphExecutionError):
    """The run reached its superstep limit with work still scheduled."""

    def __init__(self, limit: int, scheduled: Sequence[str]) -> None:
        self.limit = limit
        self.scheduled = list(scheduled)
        super().__init__(
            f"the run reached max_supersteps={limit} with nodes {self.scheduled} still "
            "scheduled; raise max_supersteps or check the graph for an unbounded cycle. The "
            "run is resumable with a new budget."
        )


class JoinStarved(GraphExecutionError):
    """The graph went quiescent while a join still waited for arrivals nothing can produce."""

    def __init__(self, join: str, missing: Sequence[str], arrived: Sequence[str]) -> None:
        self.join = join
        self.missing = list(missing)
        self.arrived = list(arrived)
        super().__init__(
            f"join {join!r} waits for {self.missing} (arrived: {self.arrived}) but nothing is "
            "scheduled that can reach it; check the branches feeding the join."
        )


class NodeFailed(GraphExecutionError):
    """A node raised; the node's exception is ``__cause__``."""

    def __init__(self, node: str, task_id: str, error: BaseException) -> None:
        self.node = node
        self.task_id = task_id
        self.error = error
        super().__init__(f"node {node!r} (task {task_id}) failed: {type(error).__name__}: {error}")


class MiddlewareFailed(GraphExecutionError):
    """A middleware hook threw: the run fails, the checkpoint stays Running, and recover
    re-runs only that task. middleware is the middleware's id.

    The hook's exception is ``__cause__`` (and ``error``). The failure is the hook's, not the
    node's: it is not retried and takes no ``on_error`` route. The run's checkpoint keeps its
    batch as it was, with every task that finished first kept (as after a timeout), so
    ``recover(thread_id)`` (or a resume) re-runs only the task whose hook threw. A guardrail
    whose check throws, or answers something other than ``Allow``/``Block``/``Rewrite``, is
    reported the same way, with its id.

    Attributes:
        middleware: the id of the middleware (or guardrail) whose hook threw.
        hook: ``"before"``, ``"wrap"``, ``"after"`` or a guardrail's ``"check"``.
        node: the node of the task.
        task_id: the task.
        error: the hook's exception.
    """

    def __init__(self, middleware: str, hook: str, node: str, task_id: str,
                 error: BaseException) -> None:
        self.middleware = middleware
        self.hook = hook
        self.node = node
        self.task_id = task_id
        self.error = error
        super().__init__(
            f"middleware {middleware!r} threw in its {hook} hook around node {node!r} (task "
            f"{task_id}): {type(error).__name__}: {error}. The run failed and its checkpoint "
            "keeps the batch: fix the hook, then recover(thread_id) re-runs only this task")


class GuardrailBlocked(GraphExecutionError):
    """A guardrail Block (which retracts its turn) refused a node's result.

    The node's patch was not applied and the checkpoint of its turn was never kept:
    ``checkpoint_id`` names the id it was given, which is in no history (a lookup raises
    ``CheckpointNotFound``). The task failed with this error: it takes the node's
    ``on_error`` route if it has one (``ctx.failure`` names this error), otherwise the run
    fails, and a resume continues from the turn before, running the node again.

    Attributes:
        guardrail: the id of the guardrail that blocked.
        node: the node whose result was blocked.
        task_id: the task.
        reason: the guardrail's reason.
        checkpoint_id: the retracted checkpoint's id.
    """

    def __init__(self, guardrail: str, node: str, task_id: str, reason: str,
                 checkpoint_id: str) -> None:
        self.guardrail = guardrail
        self.node = node
        self.task_id = task_id
        self.reason = reason
        self.checkpoint_id = checkpoint_id
        super().__init__(
            f"guardrail {guardrail!r} blocked the result of node {node!r} (task {task_id}): "
            f"{reason}. Its patch was not applied and its turn's checkpoint {checkpoint_id} "
            "retracted; resume the run to run the node again from the turn before, or give "
            "the node an on_error route to handle the block")


class ToolFailed(GraphExecutionError):
    """A tool call failed the run: the tool returned Fatal, or broke its contract (an update
    to a key it does not declare, a question it does not declare). cause says which.

    The task fails with this error whatever the node does with it (a node that catches it
    still fails): it is not retried (neither by the tool's nor by the node's ``Retry``), and
    it takes the node's ``on_error`` route if it has one (``ctx.failure["error_type"] ==
    "ToolFailed"``); otherwise the run ends ``failed``, resumable from the turn before.

    Attributes:
        cause: ``"fatal"`` (the tool returned ``Fatal(reason)``), ``"undeclared_update"``
            (its update names a key outside ``updates=``) or ``"undeclared_question"`` (it
            asked an ``interrupt`` whose id is outside ``asks=``).
        tool: the tool's name.
        key: the call's key (``ToolCall.key``).
        node: the node that called it.
        task_id: the task.
        detail: the reason the tool gave, the undeclared keys, or the question's id.
    """

    CAUSES = ("fatal", "undeclared_update", "undeclared_question")

    def __init__(self, cause: str, tool: str, *, key: str, node: str, task_id: str,
                 detail: str) -> None:
        self.cause = cause
        self.tool = tool
        self.key = key
        self.node = node
        self.task_id = task_id
        self.detail = detail
        what = {
            "fatal": f"returned Fatal: {detail}",
            "undeclared_update": f"updated {detail}, which it does not declare; add them to "
                                 "@tool(updates=[...]) or stop writing them",
            "undeclared_question": f"asked the question {detail}, which it does not declare; "
                                   "add its id to @tool(asks=[...]) or ask it from the node",
        }.get(cause, detail)
        super().__init__(
            f"tool {tool!r} (call {key}, node {node!r}) {what}. The run failed (cause="
            f"{cause!r}); give node {node!r} an on_error route to handle it, or fix the tool "
            "and resume the run")


class RunTimedOut(GraphExecutionError):
    """The run's timeout, measured on the runtime's clock, expired.

    The checkpoint keeps every task that finished first, so a resume with a new budget
    continues without re-running them.
    """

    def __init__(self, run_id: str, timeout: float) -> None:
        self.run_id = run_id
        self.timeout = timeout
        super().__init__(
            f"run {run_id} exceeded its timeout of {timeout}s (runtime clock); resume it with "
            "a larger timeout to continue."
        )


class Cancelled(GraphExecutionError):
    """The run was cancelled; every task was cancelled and joined.

    Tasks that finished first keep their results, so a resume continues without re-running
    them.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} was cancelled; resume it to continue.")


class UnexpectedError(GraphExecutionError):
    """An unexpected throwable - such as a Clock that threw - refused the run at admission,
    or ended it where it was.

    The original exception is ``__cause__`` (and ``error``). The run's thread claim is
    released; whatever the store holds for the thread stands (nothing is written after the
    failure), so ``recover`` continues a run it ended mid-way. A checkpointer whose commit
    throws is not this: its own error is raised (``StaleClaim``, ``StoreFault``, ...).

    Attributes:
        run_id: the run (``None`` for a new run refused at admission).
        thread_id: its thread (``None`` when the call named none).
        admitted: ``False`` when the run was refused at admission, ``True`` when it was
            ended mid-way.
        error: the original exception.
    """

    def __init__(self, run_id: str | None, thread_id: str | None, error: BaseException, *,
                 admitted: bool) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.error = error
        self.admitted = admitted
        where = ("ended the run where it was; recover(thread_id) continues it. The thread's "
                 "claim was released" if admitted
                 else "refused the run at admission; nothing was written and no claim kept")
        subject = "a new run" if run_id is None else f"run {run_id}"
        if thread_id is not None:
            subject += f" on thread {thread_id!r}"
        super().__init__(f"{subject}: an unexpected {type(error).__name__} ({error}) {where}. "
                         "Fix what threw (the runtime's clock) and retry.")


class VirtualDeadlock(GraphExecutionError):
    """Every task of a batch waits on something that virtual time cannot bring about."""


class ResumeError(GraphflowError, ValueError):
    """A resume was refused: no answers, an interrupt that is not pending, or a bad answer.

    Nothing was changed.
    """



class DeadlineExpired(ResumeError):
    """A question's deadline passed before it was answered: its answer is refused, and the
    graph's timeout route answers it instead.

    ``interrupt(payload, id=..., deadline=...)`` gave the question a deadline on the
    runtime's clock. Raised by a resume (``aresume``, ``resume_stream``) whose answers
    include an expired question, changing nothing: the run stays paused until
    ``GraphRuntime.expire_due()`` (or a ``Worker``) takes the graph's
    ``compile(on_timeout=...)`` route. Also the error of a run whose expired question the
    graph has no route for (``unrouted``): that run failed, and recovering it asks again.

    Attributes:
        run_id: the paused run.
        key: the expired question's ``Interrupt.key``.
        deadline: when it expired (``None`` when not known).
        now: the runtime clock's time of the refused resume (``None`` for ``unrouted``).
        unrouted: the run failed because the graph has no ``on_timeout`` route.
    """

    def __init__(self, run_id: str, key: str, deadline: Any = None, now: Any = None, *,
                 unrouted: bool = False) -> None:
        self.run_id = run_id
        self.key = key
        self.deadline = deadline
        self.now = now
        self.unrouted = unrouted
        if unrouted:
            text = (f"run {run_id}: question {key!r} expired before it was answered, and "
                    "the graph has no timeout route, so the run failed. Give the graph one "
                    "with compile(on_timeout=<node> or TimeoutAnswer(value)), or recover the "
                    "run to ask again")
        else:
            at = "" if deadline is None else f" at {_instant(deadline)}"
            seen = "" if now is None else f" (the runtime's clock reads {_instant(now)})"
            text = (f"run {run_id}: question {key!r} expired{at}{seen}, so its answer is "
                    "refused and nothing changed. Call runtime.expire_due() (a Worker does "
                    "it) to take the graph's on_timeout route, or give the question more time "
                    "with interrupt(..., deadline=...)")
        super().__init__(text)


def _instant(moment: Any) -> str:
    iso = getattr(moment, "isoformat", None)
    return str(iso()) if callable(iso) else str(moment)

class NotSuspended(ResumeError):
    """``resume`` was called on a run that is not suspended (e.g. it completed)."""


class NothingToRecover(ResumeError):
    """Recovery was asked of a thread with no incomplete execution."""


class ThreadSuspended(GraphflowError, RuntimeError):
    """A new run was started on a suspended thread; answer its interrupts with resume."""


class MidExecution(GraphflowError, RuntimeError):
    """A new run was started on a thread whose latest checkpoint is mid-execution; resume it."""


class CheckpointNotFound(GraphflowError, LookupError):
    """The thread has no checkpoint with the given id in its history: it never had one, or
    retention (``prune``), a guardrail ``Block`` (which retracts its turn) or
    ``delete_thread`` removed it. Nothing was changed.

    Raised too for a run id with no checkpoint left (a run of a deleted thread), and for a
    run this runtime never ran (``run_record``).
    """


class SnapshotMismatch(GraphflowError, ValueError):
    """A checkpoint does not match this compiled graph; every problem is listed.

    Attributes:
        problems: the incompatibilities (``Incompatibility``: ``kind``, ``subject``,
            ``message``) when the resume rules found them, else empty.
    """

    problems: tuple[Any, ...] = ()

    def __init__(self, message: str, problems: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class ExecutionMismatch(SnapshotMismatch):
    """An execution was passed to a graph other than the one that created or restored it.

    A run (``resume``/``recover``/``step``/``update_state`` by its id) is continued only by a
    graph of its own ``graph_id``; nothing was changed.

    Attributes:
        run_id: the run.
        expected: the ``graph_id`` that created the run.
        given: the ``graph_id`` of the graph passed.
    """

    def __init__(self, run_id: str, checkpoint_id: str, expected: str, given: str,
                 problems: Sequence[Any] = ()) -> None:
        self.run_id = run_id
        self.expected = expected
        self.given = given
        super().__init__(
            f"run {run_id} (checkpoint {checkpoint_id}) was created by graph {expected!r}, "
            f"not {given!r}: pass graph={expected!r}'s compiled graph (or none, for the one "
            "this runtime ran it with). Nothing was changed.", problems)


class UnsupportedFormat(GraphflowError, ValueError):
    """A checkpoint was written in a format this build does not read."""


class InvalidHistory(GraphflowError, ValueError):
    """A history file is not a readable graphflow history (not JSON, a field missing, a
    malformed event or checkpoint). The message names the file and what is wrong."""


class ReplayDiverged(GraphflowError, AssertionError):
    """Re-running a recorded history under the current code took another path.

    Attributes:
        index: the position of the first event that differs, in the history's events.
        recorded: that event as recorded (JSON form), or ``None`` when the recording ended.
        replayed: the event the current code produced there, or ``None`` when it ended.
    """

    def __init__(self, message: str, index: int, recorded: dict[str, Any] | None,
                 replayed: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.index = index
        self.recorded = recorded
        self.replayed = replayed


class ThreadBusy(GraphflowError, RuntimeError):
    """Another run holds the thread; retry once it has suspended, completed or expired.

    Attributes:
        thread_id: the busy thread.
        holder: the run holding it, when the caller may see it.
        expires_at: when the holder's claim expires unless renewed (the claiming runtime's
            clock), or ``None`` when the run holding the thread is live in this runtime or
            the claim is not a store's.
        expires_in: seconds from the caller's ``now`` to ``expires_at`` (``0.0`` once it
            passed), or ``None``.
    """

    def __init__(
        self,
        thread_id: str,
        holder: str | None = None,
        *,
        expires_at: datetime | None = None,
        now: datetime | None = None,
        virtual: bool = False,
    ) -> None:
        self.thread_id = thread_id
        self.holder = holder
        self.expires_at = expires_at
        self.expires_in: float | None = None
        who = f" (held by run {holder})" if holder else ""
        retry = "retry once that run has suspended or completed, or once its claim has expired"
        if expires_at is None or now is None:
            super().__init__(f"thread {thread_id!r} is busy{who}; {retry}.")
            return
        self.expires_in = left = max(0.0, (expires_at - now).total_seconds())
        when = (f", at {expires_at.isoformat()} on the runtime's clock ({_seconds(left)} s "
                f"from now, {now.isoformat()}) unless its holder renews it")
        advance = "" if not virtual else (
            " The runtime's clock is a VirtualClock, which moves only when told: advance it to "
            f"the expiry with clock.advance({_seconds(left)}).")
        super().__init__(f"thread {thread_id!r} is busy{who}; {retry}{when}.{advance}")

    def seen_by(self, now: datetime, *, virtual: bool, holder: str | None = None
                ) -> ThreadBusy:
        """The same refusal as a runtime whose clock reads ``now`` reports it (``holder``:
        the one its caller may see)."""
        return ThreadBusy(self.thread_id, holder, expires_at=self.expires_at, now=now,
                          virtual=virtual)


def _seconds(value: float) -> str:
    """Seconds as a Python literal, without a needless ``.0``."""
    return str(int(value)) if value.is_integer() else repr(value)


class StaleClaim(GraphflowError, RuntimeError):
    """A fencing token is not the thread's current claim: the claim was lost."""

    def __init__(self, thread_id: str, token: int, current: int | None) -> None:
        self.thread_id = thread_id
        self.token = token
        self.current = current
        super().__init__(
            f"claim token {token} on thread {thread_id!r} is stale (current: {current}); "
            "another run took the thread over. Nothing was written."
        )


class ParentNotLatest(GraphflowError, RuntimeError):
    """A new checkpoint's parent is not the thread's latest: another writer advanced the thread.

    A store refuses such a write under a claim (``commit``, ``save(..., fence=...)``)
    atomically: nothing is written. A checkpoint that branches on purpose from an earlier one
    (time travel, ``update_state`` of an earlier checkpoint) says so with
    ``metadata["branch"]``; a plain ``save`` (no claim) is not checked.

    Attributes:
        thread_id: the thread.
        checkpoint_id: the refused checkpoint.
        parent_id: the parent it names.
        latest: the id of the thread's latest checkpoint.
    """

    def __init__(self, thread_id: str, checkpoint_id: str, parent_id: str, latest: str
                 ) -> None:
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.parent_id = parent_id
        self.latest = latest
        super().__init__(
            f"checkpoint {checkpoint_id!r} names parent {parent_id!r}, but the latest "
            f"checkpoint of thread {thread_id!r} is {latest!r}: another writer advanced the "
            "thread. Read the thread again and write after its latest checkpoint (or mark a "
            "deliberate branch with metadata={'branch': True}). Nothing was written.")


class TenantMismatch(GraphflowError, PermissionError):
    """The run's tenant is not the thread's. Nothing was changed."""

    def __init__(self, thread_id: str, requested: str | None, *, what: str = "thread") -> None:
        self.thread_id = thread_id
        self.requested = requested
        super().__init__(
            f"tenant {requested!r} may not use {what} {thread_id!r}; pass the tenant_id the "
            f"{what} was created with."
        )


class ForkTargetExists(GraphflowError, ValueError):
    """A fork's target thread (or run) already exists; a fork only ever creates a new
    thread. Nothing was changed."""


class EventsCompacted(GraphflowError, LookupError):
    """Events before ``earliest_seq`` were compacted away and cannot be replayed."""


class MalformedCommit(InvalidArgument):
    """A commit is malformed, such as a pending write naming a checkpoint other than the latest.

    Raised by a store's ``commit`` (nothing is written) when an event names a checkpoint the
    commit does not write and that is not the thread's latest, or the events' ``seq`` do not
    strictly increase.

    Attributes:
        thread_id: the thread of the commit.
        problem: what is malformed.
    """

    def __init__(self, thread_id: str, problem: str) -> None:
        self.thread_id = thread_id
        self.problem = problem
        super().__init__(f"commit on thread {thread_id!r} is malformed: {problem}. Nothing "
                         "was written.")


class StoreFileError(GraphflowError, OSError):
    """A store file cannot be used as asked: it is not a store (another kind of file, another
    SQLite database, another table layout), it is damaged, it is read-only, or the disk is
    full. The message names the file and the fix; the file was not changed.

    Attributes:
        path: the file.
    """


class StoreFault(GraphflowError, OSError):
    """The default error a :class:`FaultyStore` rule raises."""


class MissingExtra(GraphflowError, ImportError):
    """An optional part of pytest-graphflow was imported without its extra installed
    (``pytest_graphflow.langgraph`` needs ``pip install 'pytest-graphflow[langgraph]'``)."""


class SimulatedCrash(BaseException):
    """A simulated process death injected by ``FaultyStore.crash_at``.

    It derives from ``BaseException`` so that no ``except Exception`` in node or user code can
    swallow it: the run unwinds, and nothing after the crash point reaches the store.
    """


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class BlockingSleepWarning(UserWarning):
    """Node code called ``time.sleep`` on the event loop of a virtual-clock run.

    It blocks the loop in real time (every other task of the batch waits) and does not move
    the virtual clock; use ``await anyio.sleep(...)`` (or ``asyncio.sleep``) instead.
    """


class SyncCallInEventLoop(GraphflowError, RuntimeError):
    """A synchronous API (``invoke``, ``trace``, ``resume``, a whole-run checker) was called
    from inside a running event loop (an async test, say); it starts a loop of its own.
    Await the async twin instead (``ainvoke``, ``atrace``, ``aresume``)."""
