"""``InMemoryCheckpointStore``: checkpoints in dicts, indexed by run (seed 003)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from .._records._checkpoint import Checkpoint, TaskRecord
from .._records._checks import check_id
from .._records._fast import adopt, every_field, make, plain_tasks, template
from .._records._ids import derived_hex
from .._records._json import DumpedEvents, jcopy
from ..errors import CheckpointNotFound, ForkTargetExists, ThreadBusy
from . import _claims as rules
from ._args import (
    CheckedCheckpoints,
    check_commit,
    check_events,
    check_fork,
    check_list,
    check_nesting,
    check_run_record,
)
from ._closing import ClosingStore
from ._deletion import DeletedThread, check_deletable, check_delete_args
from ._features import StoreFeatures
from ._protocol import Fence
from ._waiting import WaitingPage, check_waiting, waiting_row
from ._wire import checkpoint_json, parsed_event

__all__ = ["InMemoryCheckpointStore"]

_Records = list[dict[str, Any]]
"""A list of JSON records (events, run records, artifact descriptions)."""

_Normalised = list[tuple[int, dict[str, Any]]]
"""Events as ``(seq, JSON form)`` pairs."""

_WHERE = "the in-memory store"
_TASK_FIELDS = template(TaskRecord)[1]
_CP_FIELDS = every_field(Checkpoint)


class _Draft(dict[str, Any]):
    """A checkpoint the runtime handed over, kept as its fields (the dict itself) until
    someone reads it.

    Building the pydantic model (and the tuple of visited nodes) for every superstep costs
    more than the rest of a step; most checkpoints are never read back.

    The store keeps every checkpoint of a run, so what each one holds is what the garbage
    collector walks at every full collection of a long run: a checkpoint of a plain step is
    two objects the collector tracks, this dict and the state. Its lists of strings
    (``node_ids``, ``interrupts``, most often empty) are kept as tuples, which the collector
    stops tracking, its tasks (when they carry no item, failure or expansion checkpoint) as
    ``(task_id, node)`` pairs, and the visited-nodes snapshot as the run's log with its
    length apart. :meth:`checkpoint` gives them back.
    """

    __slots__ = ("_cp", "_visited_n")
    _cp: Checkpoint
    _visited_n: int

    # The fields the store's indexes read, under the model's names.
    id = property(itemgetter("id"))
    run_id = property(itemgetter("run_id"))
    thread_id = property(itemgetter("thread_id"))
    node_id = property(itemgetter("node_id"))
    node_ids = property(itemgetter("node_ids"))
    parent_id = property(itemgetter("parent_id"))
    timestamp = property(itemgetter("timestamp"))
    metadata = property(itemgetter("metadata"))

    @property
    def fields(self) -> dict[str, Any]:
        """The checkpoint's fields (the draft itself)."""
        return self

    def checkpoint(self) -> Checkpoint:
        """The checkpoint itself (built once, never handed out: reads copy it)."""
        try:
            return self._cp
        except AttributeError:
            pass
        fields = dict(self)
        if type(fields["node_ids"]) is tuple:
            fields["node_ids"] = list(fields["node_ids"])
        if type(fields["interrupts"]) is tuple:
            fields["interrupts"] = list(fields["interrupts"])
        tasks = fields["tasks"]
        if type(tasks) is tuple:
            fields["tasks"] = plain_tasks(TaskRecord, _TASK_FIELDS, tasks)
        visited = fields["visited"]
        if self._visited_n >= 0:
            fields["visited"] = tuple(visited[:self._visited_n])
        elif not isinstance(visited, tuple):
            fields["visited"] = tuple(visited)
        count, every = _CP_FIELDS
        # make()'s own path for every field given, without passing them as keywords (two
        # dicts of 24 entries built and matched: ~15,000 instructions a resume)
        self._cp = adopt(Checkpoint, fields, every) if len(fields) == count \
            else make(Checkpoint, **fields)
        return self._cp

    def clone(self, **changes: Any) -> Checkpoint:
        """A deep copy, as :meth:`Checkpoint.clone`."""
        return self.checkpoint().clone(**changes)


class _Step(tuple[Any, ...]):
    """A checkpoint of a lean step (``_engine/_lean``) as the store keeps it: a tuple of
    what varies from step to step (see :meth:`InMemoryCheckpointStore.step_sink`), the
    run's constant fields shared by every step of the run.

    Less than half the memory of the checkpoint's fields as a dict (a long run keeps one a
    step), and still two objects the garbage collector tracks (this and the state).
    :meth:`checkpoint` gives the checkpoint the same fields as a dict would have given it.
    """

    # The fields the store's indexes read, under the model's names.
    id = property(itemgetter(0))
    node_id = property(itemgetter(1))
    parent_id = property(itemgetter(3))
    timestamp = property(itemgetter(4))

    @property
    def run_id(self) -> str:
        """The run (one of the run's constant fields)."""
        return self[15][0]  # type: ignore[no-any-return]

    @property
    def thread_id(self) -> str:
        """The thread (one of the run's constant fields)."""
        return self[15][1]  # type: ignore[no-any-return]

    @property
    def node_ids(self) -> tuple[str, ...]:
        """The step's one node (none for a run's first checkpoint, before any node)."""
        node = self[1]
        return () if node is None else (node,)

    @property
    def metadata(self) -> dict[str, Any]:
        """The counters a lean step's checkpoint carries."""
        return {"cp_counter": self[13], "task_counter": self[14]}

    def checkpoint(self) -> Checkpoint:
        """The checkpoint itself (built once, never handed out: reads copy it)."""
        try:
            return self.__dict__["_cp"]  # type: ignore[no-any-return]
        except KeyError:
            pass
        (cid, node, step, parent, timestamp, state, status, tasks, log, n, arrivals,
         answers, next_seq, cp_counter, task_counter, const) = self
        run_id, thread_id, graph_id, revision, tenant_id = const
        cp = make(
            Checkpoint, id=cid, run_id=run_id, thread_id=thread_id, graph_id=graph_id,
            revision=revision, node_id=node, node_ids=[] if node is None else [node],
            step=step, parent_id=parent,
            timestamp=timestamp, state=state, format_version=1, status=status,
            next_step=step + 1,
            tasks=plain_tasks(TaskRecord, _TASK_FIELDS, zip(tasks[::2], tasks[1::2],
                                                            strict=True)),
            completed={}, interrupts=[], answers={} if answers is None else answers,
            visited=tuple(log[:n]), arrivals=arrivals, next_seq=next_seq, error=None,
            tenant_id=tenant_id,
            metadata={"cp_counter": cp_counter, "task_counter": task_counter})
        self.__dict__["_cp"] = cp
        return cp

    def clone(self, **changes: Any) -> Checkpoint:
        """A deep copy, as :meth:`Checkpoint.clone`."""
        return self.checkpoint().clone(**changes)


StepSink = Callable[..., None]
"""What :meth:`InMemoryCheckpointStore.step_sink` gives: stores a lean step's checkpoint."""


def _pairs(tasks: list[Any]) -> list[Any] | tuple[tuple[str, str], ...]:
    """``tasks`` as ``(task_id, node)`` pairs, or the list itself if one carries more."""
    out = []
    for task in tasks:
        data = task.__dict__
        if data["failure"] is not None or data["item"] is not None or data["has_item"] \
                or data["checkpoint_id_before"] is not None:
            return tasks
        out.append((data["task_id"], data["node"]))
    return tuple(out)


class InMemoryCheckpointStore(CheckedCheckpoints, ClosingStore):
    """An in-memory :class:`CheckpointStore`, for tests and short-lived runs.

    Checkpoints are kept by id and indexed by run and by thread, so ``latest`` and ``load``
    do not scan the whole store. ``save`` and every read copy, so neither the caller nor the
    runtime can change a stored checkpoint by mutating an object.

    It also keeps the extras the runtime uses when a store has them, with exactly the
    semantics of :class:`~pytest_graphflow._stores.sqlite._store.SQLiteCheckpointStore`: event logs
    (``record_events``/``events``/``compact_events``), run records (``record_run``/``runs``/
    ``run``), artifacts, thread claims with fencing tokens (``claim``/``renew``/``release``/
    ``current_claim``), retention (``prune``) and thread deletion (``delete_thread``).

    Args:
        claim_ttl: seconds a claim stays live unless renewed, on the claiming runtime's clock.
    """

    pages_history = True
    """:meth:`list` takes ``limit`` and ``before`` (``GraphRuntime.history`` pages with them)."""

    features = StoreFeatures(claims=True, fencing=True, commit=True, history_pages=True,
                             artifacts=True, prune=True, delete_thread=True, waiting=True,
                             tenants=True, fields_save=True, step_sink=True,
                             in_process=True)
    """Claims with fencing, commits, paged history, artifacts, prune, thread deletion, waiting
    runs, the runtime's fast saves (:meth:`adopt_fields`, :meth:`step_sink`) and answers at
    once (:meth:`claim_now`, :meth:`kept_latest`); no durable events."""

    def __init__(self, *, claim_ttl: float = rules.DEFAULT_CLAIM_TTL) -> None:
        self._by_id: dict[str, Checkpoint | _Draft | _Step] = {}
        self._orders: dict[str, int] = {}
        """Each checkpoint's place in the order of saves (an int apart, not a tuple with the
        checkpoint: one object fewer a checkpoint for the garbage collector)."""
        self._by_run: dict[str, dict[str, None]] = {}
        self._by_thread: dict[str, dict[str, None]] = {}
        self._latest: dict[str, str] = {}
        self._thread_latest: dict[str, str] = {}
        self._order = 0
        self.claim_ttl: float = claim_ttl if claim_ttl is rules.DEFAULT_CLAIM_TTL \
            else rules.check_ttl(claim_ttl, "InMemoryCheckpointStore")
        self._events: dict[str, dict[int, dict[str, Any]]] = {}
        self._earliest_seq: dict[str, int] = {}
        self._runs: dict[str, dict[str, Any]] = {}
        self._artifacts: dict[str, dict[str, tuple[bytes, str]]] = {}
        self._claims: dict[str, rules.Claim] = {}
        self._claim_tokens: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"InMemoryCheckpointStore({len(self._by_id)} checkpoint(s))"

    def _rank(self, checkpoint_id: str) -> tuple[Any, int]:
        return (self._by_id[checkpoint_id].timestamp, self._orders[checkpoint_id])

    supports_fencing = True
    """``save`` takes ``fence=(thread_id, token)`` and the store has ``commit``."""

    async def save(self, checkpoint: Checkpoint, *, fence: Fence | None = None) -> None:
        """Persist a copy of ``checkpoint``; one with the same id is overwritten.

        With ``fence=(thread_id, token)`` the save is made under that claim: it is refused
        (nothing written) unless ``token`` is the thread's current claim.

        Raises:
            InvalidArgument: not a Checkpoint, a bad id, or a value with no JSON form (as the
                stores that serialise checkpoints refuse it).
            StaleClaim: the fence's token is not the current claim.
        """
        check_nesting(checkpoint, checkpoint_json(self._checked(checkpoint, "save"), _WHERE),
                      "save")
        if fence is not None:
            self._fenced(fence, checkpoint.thread_id, checkpoint.id)
            self._lineage(checkpoint.thread_id, [checkpoint])
        self._adopt(checkpoint.clone())

    def _fenced(self, fence: Fence, thread_id: str, what: str) -> None:
        thread, token = fence
        claim = self._claims.get(thread_id)
        if claim is not None and thread == thread_id and type(token) is int \
                and claim.token == token:
            return  # the current claim's own fence (every save of a live run): nothing to say
        token = rules.fence_token(fence, thread_id, what)
        rules.current_or_stale(thread_id, token, claim)

    def adopt_fields(self, fields: dict[str, Any], fence: Fence | None = None) -> bool:
        """Store a checkpoint given as its fields (the runtime's fast save, declared by
        ``StoreFeatures.fields_save``; see :meth:`_adopt`). Returns
        ``True``: it always takes them (a ``FaultyStore``'s may not)."""
        draft = _Draft(fields)
        node_ids = draft["node_ids"]
        if type(node_ids) is list:
            draft["node_ids"] = tuple(node_ids)
        interrupts = draft["interrupts"]
        if type(interrupts) is list:
            draft["interrupts"] = tuple(interrupts) if interrupts else ()
        tasks = draft["tasks"]
        if type(tasks) is list:
            if len(tasks) == 1:  # the common case, without a loop
                task = tasks[0].__dict__
                if task["failure"] is None and task["item"] is None and not task["has_item"] \
                        and task["checkpoint_id_before"] is None:
                    draft["tasks"] = ((task["task_id"], task["node"]),)
            else:
                draft["tasks"] = _pairs(tasks)
        visited = draft["visited"]
        kind = type(visited)
        if kind is tuple or kind is list:
            draft._visited_n = -1
        else:  # the runtime's snapshot of its log: the log and a length
            draft["visited"], draft._visited_n = visited.snapshot()
        if fence is not None:
            thread = draft["thread_id"]
            claims = self._claims  # (``in`` and a subscript, not get(): no call)
            claim = claims[thread] if thread in claims else None  # noqa: SIM401
            holder, token = fence
            if claim is None or holder != thread or type(token) is not int \
                    or claim.token != token:
                self._fenced(fence, thread, draft["id"])
            # Seed 004's lineage (check_lineage), when the parent is not the latest.
            latest_of = self._thread_latest
            latest = latest_of[thread] if thread in latest_of else None  # noqa: SIM401
            parent = draft["parent_id"]
            if parent is not None and latest is not None and parent != latest:
                self._lineage(thread, [draft])
        self._adopt(draft)
        return True

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
        """Write checkpoints, events and the run record of ``run_id`` under the claim
        ``token``, all or nothing (see :class:`~pytest_graphflow._stores._protocol.ClaimingStore`).

        Raises:
            StaleClaim: ``token`` is not the thread's current claim; nothing is written.
            InvalidArgument: a part is not of ``run_id`` on ``thread_id``.
        """
        cps, pairs, record = check_commit(thread_id, run_id, checkpoints, events, run,
                                          normalise=False)
        for cp in cps:
            check_nesting(cp, checkpoint_json(self._checked(cp, "commit"), _WHERE), "commit")
        # The events are accepted and refused exactly as the stores that serialise them do.
        dumped = type(events) is DumpedEvents
        normalised = [parsed_event(run_id, e, seq, dumped=dumped) for seq, e in pairs]
        rules.current_or_stale(thread_id, rules.check_token(token, "commit"),
                               self._claims.get(thread_id))
        self._lineage(thread_id, cps, pairs)
        for cp in cps:
            self._adopt(cp.clone())
        self._put_events(run_id, normalised)
        if record is not None:
            self._put_run(record)

    def step_sink(self, run_id: str, thread_id: str, graph_id: str, revision: str,
                  tenant_id: str | None, fence: Fence | None) -> StepSink | None:
        """The lean step's save (internal; ``_engine/_lean``): a function that stores the
        checkpoint of a plain step of the run given as what varies from step to step::

            sink(cid, node, step, parent_id, timestamp, state, status, tasks, log, n,
                 arrivals, answers, next_seq, cp_counter, task_counter)

        (``node`` ``None`` for a fresh run's first checkpoint, step -1, before any node;
        ``tasks`` as one flat tuple ``(task_id, node, task_id, node...)`` of plain tasks,
        the visited nodes as ``log[:n]``, ``answers`` ``None`` for none), with the checks
        and the indexes
        :meth:`adopt_fields` gives the same checkpoint given as its fields. ``None`` on a
        subclass (it may change how checkpoints are kept: it keeps :meth:`adopt_fields`)
        or a fence not of this thread.
        """
        if type(self) is not InMemoryCheckpointStore or (
                fence is not None and (fence[0] != thread_id or type(fence[1]) is not int)):
            return None
        const = (run_id, thread_id, graph_id, revision, tenant_id)
        token = None if fence is None else fence[1]
        by_id, orders, by_run, by_thread = self._by_id, self._orders, self._by_run, \
            self._by_thread
        claims, run_latest, thread_latest = self._claims, self._latest, self._thread_latest

        def sink(cid: str, node: str, step: int, parent: str | None, timestamp: datetime,
                 state: dict[str, Any], status: str, tasks: tuple[str, ...],
                 log: list[str], n: int, arrivals: dict[str, list[str]],
                 answers: dict[str, Any] | None, next_seq: int, cp_counter: int,
                 task_counter: int) -> None:
            rec = _Step((cid, node, step, parent, timestamp, state, status, tasks, log, n,
                         arrivals, answers, next_seq, cp_counter, task_counter, const))
            if fence is not None:  # what adopt_fields checks, without a call when it holds
                if thread_id not in claims or claims[thread_id].token != token:
                    self._fenced(fence, thread_id, cid)
                if parent is not None and thread_id in thread_latest \
                        and parent != thread_latest[thread_id]:
                    self._lineage(thread_id, [rec])
            if cid in by_id:  # overwritten: the general way
                self._adopt(rec)
                return
            self._order = order = self._order + 1
            by_id[cid] = rec
            orders[cid] = order
            if run_id in by_run:
                by_run[run_id][cid] = None
            else:
                by_run[run_id] = {cid: None}
            if thread_id in by_thread:
                by_thread[thread_id][cid] = None
            else:
                by_thread[thread_id] = {cid: None}
            # The run's and the thread's latest, as _adopt updates them for a new id.
            if run_id not in run_latest:
                run_latest[run_id] = cid
            else:
                current = by_id[run_latest[run_id]]
                if timestamp >= (current[4] if type(current) is _Step else current.timestamp):
                    run_latest[run_id] = cid
            if thread_id not in thread_latest:
                thread_latest[thread_id] = cid
            else:
                current = by_id[thread_latest[thread_id]]
                if timestamp >= (current[4] if type(current) is _Step else current.timestamp):
                    thread_latest[thread_id] = cid

        return sink

    def _adopt(self, checkpoint: Checkpoint | _Draft | _Step) -> None:
        """Store ``checkpoint`` itself, without a copy (internal).

        The runtime hands over checkpoints it never touches again; everyone else goes
        through :meth:`save`, which copies.
        """
        if type(checkpoint) is _Draft:
            cid, run_id = checkpoint["id"], checkpoint["run_id"]
            thread_id, timestamp = checkpoint["thread_id"], checkpoint["timestamp"]
        else:
            cid, run_id = checkpoint.id, checkpoint.run_id
            thread_id, timestamp = checkpoint.thread_id, checkpoint.timestamp
        # Lookups with ``in`` and a subscript, not get(): no call (a save of every halt).
        by_id = self._by_id
        old = by_id[cid] if cid in by_id else None  # noqa: SIM401
        if old is not None and (old.run_id != run_id or old.thread_id != thread_id):
            self._unindex(old)
        self._order += 1
        by_id[cid] = checkpoint
        self._orders[cid] = self._order
        by_run, by_thread = self._by_run, self._by_thread
        if run_id in by_run:
            by_run[run_id][cid] = None
        else:
            by_run[run_id] = {cid: None}
        if thread_id in by_thread:
            by_thread[thread_id][cid] = None
        else:
            by_thread[thread_id] = {cid: None}
        # The run's and the thread's latest (what _newest says, inline: once a step).
        latest = self._latest
        current = latest[run_id] if run_id in latest else None  # noqa: SIM401
        if current is None or (current != cid and timestamp >= by_id[current].timestamp):
            latest[run_id] = cid
        elif current == cid:
            self._newest(latest, by_run, run_id, checkpoint)
        latest = self._thread_latest
        current = latest[thread_id] if thread_id in latest else None  # noqa: SIM401
        if current is None or (current != cid and timestamp >= by_id[current].timestamp):
            latest[thread_id] = cid
        elif current == cid:
            self._newest(latest, by_thread, thread_id, checkpoint)

    def _newest(self, latest: dict[str, str], index: dict[str, dict[str, None]], key: str,
                checkpoint: Checkpoint | _Draft | _Step) -> None:
        """Update ``latest[key]`` (a run's or a thread's latest) for ``checkpoint``, just
        stored."""
        cid = checkpoint.id
        current = latest.get(key)
        if current is None:
            latest[key] = cid
        elif current == cid:  # overwritten in place: it may no longer be the latest
            latest[key] = max(index[key], key=self._rank)
        elif checkpoint.timestamp >= self._by_id[current].timestamp:
            # Saved last, so of equal timestamps it wins; a later timestamp wins outright.
            latest[key] = cid

    def _max(self, run_id: str) -> str:
        return max(self._by_run[run_id], key=self._rank)

    def _lineage(self, thread_id: str, checkpoints: Sequence[Any],
                 events: Sequence[tuple[int, Any]] = ()) -> None:
        """Seed 004's commit checks against the thread's latest
        (:func:`~._claims.check_lineage`)."""
        rules.check_lineage(thread_id, self._thread_latest.get(thread_id), checkpoints, events)

    def _unindex(self, cp: Checkpoint | _Draft | _Step) -> None:
        self._by_run.get(cp.run_id, {}).pop(cp.id, None)
        self._by_thread.get(cp.thread_id, {}).pop(cp.id, None)
        if self._latest.get(cp.run_id) == cp.id:
            if self._by_run.get(cp.run_id):
                self._latest[cp.run_id] = self._max(cp.run_id)
            else:
                self._latest.pop(cp.run_id, None)
                self._by_run.pop(cp.run_id, None)
        if self._thread_latest.get(cp.thread_id) == cp.id:
            ids = self._by_thread.get(cp.thread_id)
            if ids:
                self._thread_latest[cp.thread_id] = max(ids, key=self._rank)
            else:
                self._thread_latest.pop(cp.thread_id, None)

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """A copy of the checkpoint with this id, or ``None``."""
        check_id(checkpoint_id, "checkpoint_id", "get")
        found = self._by_id.get(checkpoint_id)
        return None if found is None else found.clone()

    async def latest(self, run_id: str) -> Checkpoint | None:
        """A copy of the run's most recent checkpoint, or ``None``."""
        check_id(run_id, "run_id", "latest")
        cid = self._latest.get(run_id)
        return None if cid is None else self._by_id[cid].clone()

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """The run's most recent checkpoint, or the most recent one for ``node_id``."""
        check_id(run_id, "run_id", "load")
        if node_id is None:
            return await self.latest(run_id)
        check_id(node_id, "node_id", "load")
        ids = [cid for cid in self._by_run.get(run_id, ())
               if node_id == self._by_id[cid].node_id or node_id in self._by_id[cid].node_ids]
        return self._by_id[max(ids, key=self._rank)].clone() if ids else None

    async def list(
        self,
        run_id: str | None = None,
        *,
        thread_id: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[Checkpoint]:
        """Checkpoints of a run, a thread or the whole store, oldest first.

        ``limit`` keeps the newest ``limit`` of them (a page); ``before`` only those older than
        the checkpoint with that id (the next page back: ``before=page[0].id``).

        Raises:
            CheckpointNotFound: ``before`` names no checkpoint.
        """
        check_list(run_id, thread_id, limit, before)
        if before is not None and before not in self._by_id:
            raise CheckpointNotFound(f"list(before={before!r}): the store has no such "
                                     "checkpoint; pass the id of a checkpoint of a page")
        if run_id is not None:
            ids: Any = self._by_run.get(run_id, {})
            if thread_id is not None:
                ids = [i for i in ids if self._by_id[i].thread_id == thread_id]
        elif thread_id is not None:
            ids = self._by_thread.get(thread_id, {})
        else:
            ids = self._by_id
        ordered = sorted(ids, key=self._rank)
        if before is not None:
            bound = self._rank(before)
            ordered = [i for i in ordered if self._rank(i) < bound]
        if limit is not None:
            ordered = ordered[-limit:]
        return [self._by_id[i].clone() for i in ordered]

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete one checkpoint; ``True`` if it existed."""
        check_id(checkpoint_id, "checkpoint_id", "delete")
        found = self._by_id.pop(checkpoint_id, None)
        if found is None:
            return False
        del self._orders[checkpoint_id]
        self._unindex(found)
        return True

    async def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
    ) -> str:
        """Clone a checkpoint into a new run and thread; return the new run id.

        Raises:
            CheckpointNotFound: when ``checkpoint_id`` does not exist.
            ForkTargetExists: when ``thread_id`` is given and the store holds a checkpoint of
                it (a fork only ever creates a new thread); nothing was changed.
            InvalidArgument: a bad id, or a ``patch_state`` with no JSON form (it is applied
                as given: ``GraphRuntime.afork`` checks it against the graph's state schema);
                nothing was changed.
        """
        check_fork(checkpoint_id, patch_state, thread_id)
        found = self._by_id.get(checkpoint_id)
        if found is None:
            raise CheckpointNotFound(
                f"cannot fork checkpoint {checkpoint_id!r}: the store has no such checkpoint"
            )
        if thread_id is not None and self._by_thread.get(thread_id):
            raise rules.fork_target_exists(checkpoint_id, thread_id)
        if thread_id is not None and thread_id in self._claims:
            raise ThreadBusy(thread_id, None)  # a run is starting on it: not a new thread
        source = found
        if isinstance(source, (_Draft, _Step)):
            source = source.checkpoint()
        n = 0
        while True:
            token = derived_hex("fork", checkpoint_id, n)
            run_id, cid = f"run-{token}", f"cp-{token}-f"
            target = thread_id or f"thread-{token}"
            if run_id not in self._by_run and cid not in self._by_id and (
                    thread_id is not None or (target not in self._by_thread
                                              and target not in self._claims)):
                break
            n += 1
            if n > 1000:  # pragma: no cover - defensive
                raise ForkTargetExists(f"no free run id for a fork of {checkpoint_id!r}")
        state = dict(source.state)
        if patch_state:
            state.update(rules.fork_patch(checkpoint_id, patch_state))
        forked = source.clone(
            id=cid, run_id=run_id, thread_id=thread_id or f"thread-{token}",
            parent_id=source.id, state=state,
            metadata={**source.metadata, "forked_from": source.id},
        )
        await self.save(forked)
        return run_id

    # -- extras: events, run records, artifacts, claims, retention (SPEC §5, seeds 002/004) --

    async def record_events(self, run_id: str, events: _Records) -> None:
        """Record events of ``run_id`` in wire form; an event with a recorded seq overwrites it.

        Events before the run's compaction point are dropped: that part of the log is gone.

        Raises:
            InvalidArgument: when an event is not a JSON dict with an int ``seq``.
        """
        check_events(run_id, events)
        self._put_events(run_id, [parsed_event(run_id, e) for e in events])

    def _put_events(self, run_id: str, normalised: _Normalised) -> None:
        earliest = self._earliest_seq.get(run_id, 0)
        log = self._events.setdefault(run_id, {})
        for seq, data in normalised:
            if seq >= earliest:
                log[seq] = data

    async def events(self, run_id: str, after_seq: int | None = None) -> _Records:
        """The run's recorded events with ``seq > after_seq`` (all when ``None``), by seq.

        Raises:
            EventsCompacted: when part of what was asked for was compacted away.
        """
        check_id(run_id, "run_id", "events")
        first = rules.check_after_seq(after_seq)
        earliest = self._earliest_seq.get(run_id, 0)
        if first < earliest:
            raise rules.events_compacted(run_id, earliest)
        log = self._events.get(run_id, {})
        return [jcopy(log[seq]) for seq in sorted(log) if seq >= first]

    async def compact_events(self, run_id: str, before_seq: int) -> int:
        """Remove the run's events with ``seq < before_seq``; return how many were removed."""
        check_id(run_id, "run_id", "compact_events")
        before = rules.check_before_seq(before_seq)
        if before <= self._earliest_seq.get(run_id, 0):
            return 0
        self._earliest_seq[run_id] = before
        log = self._events.get(run_id, {})
        gone = [seq for seq in log if seq < before]
        for seq in gone:
            del log[seq]
        return len(gone)

    async def record_run(self, record: dict[str, Any]) -> None:
        """Insert or update the run record keyed by ``record["run_id"]``.

        Fields of an existing record that ``record`` does not name are kept. Datetimes are
        stored in their ISO form.
        """
        self._put_run(check_run_record(record))

    def _put_run(self, data: dict[str, Any]) -> None:
        old = self._runs.get(data["run_id"])
        self._runs[data["run_id"]] = data if old is None else {**old, **data}

    async def runs(self) -> _Records:
        """Every run record, in the order the runs were first recorded."""
        return [jcopy(r) for r in self._runs.values()]

    async def run(self, run_id: str) -> dict[str, Any] | None:
        """The record of ``run_id``, or ``None``."""
        check_id(run_id, "run_id", "run")
        found = self._runs.get(run_id)
        return None if found is None else jcopy(found)

    async def put_artifact(
        self,
        run_id: str,
        name: str,
        data: bytes | str,
        media_type: str = "application/octet-stream",
    ) -> None:
        """Store an artifact of ``run_id`` (``str`` as UTF-8), replacing one of that name."""
        content = rules.artifact_bytes(run_id, name, data, media_type)
        self._artifacts.setdefault(run_id, {})[name] = (content, media_type)

    async def get_artifact(self, run_id: str, name: str) -> bytes | None:
        """The content of the run's artifact ``name``, or ``None``."""
        check_id(run_id, "run_id", "get_artifact")
        check_id(name, "name", "get_artifact")
        found = self._artifacts.get(run_id, {}).get(name)
        return None if found is None else found[0]

    async def artifacts(self, run_id: str) -> _Records:
        """The run's artifacts (``name``, ``media_type``, ``size``), in the order first stored."""
        check_id(run_id, "run_id", "artifacts")
        return [{"name": name, "media_type": media_type, "size": len(content)}
                for name, (content, media_type) in self._artifacts.get(run_id, {}).items()]

    async def claim(
        self, thread_id: str, run_id: str, *, now: datetime, ttl: float | None = None
    ) -> int:
        """Claim ``thread_id`` for ``run_id`` and return a new, strictly increasing fencing token.

        ``now`` is the claiming runtime's clock; the claim is live until ``now + ttl``
        (``claim_ttl`` by default). While a claim is live every other claim is refused, the
        same run's included: a claim belongs to the holder of its token.

        Raises:
            ThreadBusy: a claim on the thread is live.
        """
        check_id(thread_id, "thread_id", "claim")
        check_id(run_id, "run_id", "claim")
        moment = rules.utc_now(now, "claim")
        seconds = self.claim_ttl if ttl is None else rules.check_ttl(ttl, "claim")
        claim = rules.take_claim(thread_id, run_id, self._claims.get(thread_id),
                                 self._claim_tokens.get(thread_id, 0), moment, seconds)
        self._claims[thread_id] = claim
        self._claim_tokens[thread_id] = claim.token
        return claim.token

    def claim_now(self, thread_id: str, run_id: str, now: datetime, ttl: float) -> int:
        """:meth:`claim` as the runtime calls it (internal): the same claim kept and the same
        token returned, at once, without checking what the runtime checked already (its ids,
        its clock's aware ``now``, a positive ``ttl`` in seconds).

        Raises:
            ThreadBusy: a claim on the thread is live.
        """
        if now.tzinfo is not UTC:
            now = rules.utc_now(now, "claim")
        claims, tokens = self._claims, self._claim_tokens  # (``in``, not get(): no call)
        last = tokens[thread_id] if thread_id in tokens else 0  # noqa: SIM401
        if thread_id in claims:
            claim = rules.take_claim(thread_id, run_id, claims[thread_id], last, now, ttl)
        else:  # take_claim's answer for a thread no claim holds
            claim = rules.fresh_claim(run_id, last + 1, now, ttl)
        claims[thread_id] = claim
        tokens[thread_id] = claim.token
        return claim.token

    def has_run(self, run_id: str) -> bool:
        """Whether the store holds a checkpoint of ``run_id`` (internal: ``latest(run_id)``
        is not ``None``, known without building it)."""
        return run_id in self._latest

    def kept_latest(self, run_id: str) -> Checkpoint | None:
        """The run's most recent checkpoint as the store keeps it, or ``None`` (internal: the
        runtime reads it to resume and never changes it; :meth:`latest` gives a copy)."""
        latest = self._latest
        if run_id not in latest:
            return None
        kept = self._by_id[latest[run_id]]
        kind = type(kept)
        # a draft or a lean step: the checkpoint it builds once (never handed out but here)
        return kept.checkpoint() if kind is _Draft or kind is _Step else kept  # type: ignore[union-attr,return-value]

    def release_now(self, thread_id: str, token: int) -> None:
        """:meth:`release` as the runtime calls it (internal), at once; a token that is no
        longer the thread's claim releases nothing (the thread is someone else's)."""
        claims = self._claims
        if thread_id in claims and claims[thread_id].token == token:
            del claims[thread_id]

    async def renew(self, thread_id: str, token: int, *, now: datetime) -> None:
        """Extend the claim ``token`` by its ttl from ``now``.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """
        check_id(thread_id, "thread_id", "renew")
        moment = rules.utc_now(now, "renew")
        current = rules.current_or_stale(thread_id, rules.check_token(token, "renew"),
                                         self._claims.get(thread_id))
        self._claims[thread_id] = rules.renewed(current, moment)

    async def release(self, thread_id: str, token: int) -> None:
        """Release the claim ``token``; the thread is free at once.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """
        check_id(thread_id, "thread_id", "release")
        rules.current_or_stale(thread_id, rules.check_token(token, "release"),
                               self._claims.get(thread_id))
        del self._claims[thread_id]

    async def current_claim(self, thread_id: str) -> tuple[str, int, datetime] | None:
        """``(run_id, token, expires_at)`` of the thread's claim (live or expired), or ``None``."""
        check_id(thread_id, "thread_id", "current_claim")
        found = self._claims.get(thread_id)
        return None if found is None else found.as_tuple()

    async def prune(self, run_id: str, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` checkpoints of the run; return how many."""
        check_id(run_id, "run_id", "prune")
        keep = rules.check_keep_last(keep_last)
        ids = sorted(self._by_run.get(run_id, ()), key=self._rank)
        doomed = ids[: max(len(ids) - keep, 0)]
        for cid in doomed:
            await self.delete(cid)
        return len(doomed)

    async def delete_thread(
        self, thread_id: str, *, tenant_id: str | None = None, now: datetime | None = None
    ) -> DeletedThread:
        """Delete the thread: its checkpoints, the events, run records and artifacts of its
        runs, and its claim, all at once; a thread the store does not know is a no-op (all
        zeros). Its fencing tokens are never issued again.

        Args:
            tenant_id: the caller's tenant; the thread's is the one on its latest checkpoint.
            now: the caller's clock: a claim expired by then does not hold the thread
                (``None``: every claim not released does).

        Raises:
            TenantMismatch: the thread belongs to another tenant; nothing is deleted.
            ThreadBusy: a claim on the thread is live; nothing is deleted.
        """
        thread_id, tenant, moment = check_delete_args(thread_id, tenant_id, now)
        ids = sorted(self._by_thread.get(thread_id, ()), key=self._rank)
        owner = (self._by_id[ids[-1]].clone().tenant_id,) if ids else None
        check_deletable(thread_id, tenant, owner, self._claims.get(thread_id), moment)
        runs = dict.fromkeys(self._by_id[cid].run_id for cid in ids)
        runs.update(dict.fromkeys(r for r, rec in self._runs.items()
                                  if rec.get("thread_id") == thread_id))
        for cid in ids:
            await self.delete(cid)
        self._by_thread.pop(thread_id, None)
        self._claims.pop(thread_id, None)  # _claim_tokens keeps the last token: never reissued
        events = sum(len(self._events.pop(r, {})) for r in runs)
        artifacts = sum(len(self._artifacts.pop(r, {})) for r in runs)
        records = sum(self._runs.pop(r, None) is not None for r in runs)
        for run in runs:
            self._earliest_seq.pop(run, None)
        return DeletedThread(thread_id, tuple(runs), len(ids), events, records, artifacts)

    async def waiting(
        self, *, tenant_id: str | None = None, limit: int | None = None,
        after: str | None = None, any_tenant: bool = False,
    ) -> WaitingPage:
        """The runs waiting for answers (a thread's latest checkpoint is ``interrupted``),
        with their questions and deadlines, in thread-id order (see :class:`Waiting`).

        Args:
            tenant_id: only threads of this tenant (``None``: threads without one).
            limit: at most this many (a page); ``None``: all.
            after: only threads whose id sorts after this one (the next page:
                ``after=page[-1].thread_id``).
            any_tenant: every tenant's threads (for a worker firing deadlines).

        Raises:
            InvalidArgument: a bad ``limit``, ``tenant_id`` or ``after``.
        """
        tenant, limit, after, anyone = check_waiting("InMemoryCheckpointStore", tenant_id,
                                                     limit, after, any_tenant)
        out: WaitingPage = []
        for thread in sorted(t for t in self._thread_latest if after is None or t > after):
            if limit is not None and len(out) >= limit:
                break
            found = self._by_id[self._thread_latest[thread]]
            cp = found.checkpoint() if isinstance(found, (_Draft, _Step)) else found
            if cp.status == "interrupted" and (anyone or cp.tenant_id == tenant):
                out.append(waiting_row(cp.clone()))
        return out

    def close(self) -> None:
        """Nothing to release; present so that code can close any store."""
