"""Preparing the legs of a run: a fresh run or a resume, up to a ``Runner`` (SPEC §2).

A leg starts by reading the thread or checkpoint it continues, claiming the thread, reading
again under the claim (a run that advanced the thread meanwhile must not run twice), and
building the ``RunState`` the ``Runner`` loops over. ``Legs`` is the collaborator a
``GraphRuntime`` owns for this: it reads the runtime's public settings (a
:class:`~._host.LegHost`) and keeps the runtime's :class:`~._host.RunBook` (ids, graphs, run
records, live legs), never the runtime's private attributes.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .._graph._builder import CompiledGraph
from .._graph._deadlines import is_expired_marker
from .._graph._node import Resume
from .._records._checkpoint import FORMAT_VERSION, Checkpoint
from .._records._json import jcopy
from .._time import _wallclock
from .._time._clock import VirtualClock
from .._time._hooks import install_hooks
from ..errors import (
    CheckpointNotFound,
    ExecutionMismatch,
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
    UnsupportedFormat,
)
from ._claim import ThreadClaim, released_on_error, take, take_fresh
from ._expiry import ExpiryResume, check_deadlines, expiry_answers
from ._fault import unexpected
from ._hooks import hook_table
from ._host import LegHost, RunBook
from ._merge import merge_patches, validate_state
from ._options import breakpoints, state_from_input
from ._results import RunLeg, RunRecord
from ._run_state import STEPPING, Expired, LegSpec, RunState, SubgraphRunner
from ._runner import Runner
from ._update import apply_update
from ._upgrade import upgrade_problems

if TYPE_CHECKING:
    from .._stores._features import StoreFeatures
    from .._stores._protocol import CheckpointStore

__all__ = ["Legs", "check_recoverable", "check_resumable"]

_NO_STOPS: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
"""A leg's own breakpoints when the call sets none."""


def input_base(graph: CompiledGraph, patch: dict[str, Any]) -> dict[str, Any]:
    """A new thread's first state: the schema's defaults with the run's input (``patch``)
    validated into them (key by key where :meth:`StateCodec.started` can, else the whole
    model validated and dumped)."""
    codec = graph.codec
    return (codec.started(patch) if patch else codec.defaults()) \
        or codec.dump(validate_state(graph, patch))


class Legs:
    """Prepares the legs of a runtime's runs (owned by the runtime, one per runtime).

    ``host`` is the runtime's public settings; ``book`` its books on its runs;
    ``subgraphs`` runs a subgraph node's child run (``LegSpec.subgraph_runner``).
    """

    def __init__(self, host: LegHost, book: RunBook, subgraphs: SubgraphRunner,
                 store: CheckpointStore, features: StoreFeatures) -> None:
        self.host = host
        self.book = book
        self.subgraphs = subgraphs
        self.store = store
        self.features = features
        self.quick = features.in_process
        """The store answers a leg's claim, a free run id and the checkpoint a resume reads
        at once (``StoreFeatures.in_process``: ``claim_now``, ``has_run``,
        ``kept_latest``)."""

    def use_store(self, store: CheckpointStore, features: StoreFeatures) -> None:
        """The runtime's store (and what it supports) from now on."""
        self.store = store
        self.features = features
        self.quick = features.in_process

    async def claim(self, thread_id: str, run_id: str, tenant: str | None,
                    at: datetime | None = None) -> ThreadClaim:
        """Claim the thread for one leg of ``run_id`` (one claim per runtime instance);
        ``at``: the claim's instant when it is not the clock's now (see :func:`take`).

        Raises:
            ThreadBusy: another run holds the thread (in this runtime, or a live claim in the
                store); the holder is named only to a caller of the thread's tenant. A store's
                claim names when it expires, on this runtime's clock.
            TenantMismatch: the thread is busy and belongs to another tenant.
        """
        if self.book.live:  # (no call when no leg of this runtime is live)
            holder = self.live_holder(thread_id, run_id)
            if holder is not None:
                raise await self.busy(thread_id, holder.run_id, tenant)
        host = self.host
        try:
            return await take(self.store, self.features, host.clock,
                              thread_id, run_id, host.claim_ttl, at)
        except ThreadBusy as exc:
            raise await self.busy(thread_id, exc.holder, tenant, exc) from None

    def live_holder(self, thread_id: str, run_id: str) -> Runner | None:
        """The live leg of this runtime that holds ``thread_id`` or runs ``run_id``, if any
        (a claim of either is refused before the store is asked)."""
        for runner in self.book.live.values():
            if runner.run.outcome is None and (runner.run.thread_id == thread_id
                                               or runner.run.run_id == run_id):
                return runner
        return None

    async def busy(self, thread_id: str, holder: str | None, tenant: str | None,
                   refused: ThreadBusy | None = None) -> GraphflowError:
        """The error a caller of ``tenant`` may see for a busy thread (seed 004): the holder
        is never named for a thread without a checkpoint, nor to another tenant. A claim the
        store ``refused`` is reported with its expiry on this runtime's clock (and how to
        reach it on a virtual clock)."""
        last = await self.thread_latest(thread_id)
        if last is None:
            holder = None
        elif last.tenant_id != tenant:
            return TenantMismatch(thread_id, tenant)
        if refused is None or refused.expires_at is None:
            return ThreadBusy(thread_id, holder)
        clock = self.host.clock
        return refused.seen_by(clock.now(), virtual=bool(getattr(clock, "virtual", False)),
                               holder=holder)

    async def thread_latest(self, thread_id: str) -> Checkpoint | None:
        """The thread's latest checkpoint, or ``None``; a one-row read on stores that page."""
        store: Any = self.store
        if self.features.history_pages:
            found: list[Checkpoint] = list(await store.list(thread_id=thread_id, limit=1))
        else:
            found = await store.list(thread_id=thread_id)
        return found[-1] if found else None

    async def find_record(self, run_id: str) -> RunRecord | None:
        """The record of ``run_id``: the one the runtime holds, else the store's (over a
        store that keeps run records), or ``None``."""
        held = self.book.records.get(run_id)
        if held is not None:
            return held
        if not self.features.run_records:
            return None
        found = await self.store.run(run_id)  # type: ignore[attr-defined]
        return None if found is None else RunRecord.from_dict(found)

    def wall(self) -> tuple[bool, Callable[[], None] | None]:
        clock = self.host.clock
        if (type(clock) is VirtualClock or isinstance(clock, VirtualClock)) \
                and clock.patch_wall_clock:
            return True, functools.partial(_wallclock.deactivate, _wallclock.activate())
        return False, None

    async def new_run_id(self) -> tuple[str, str]:
        """A run id no run of this runtime or its store has, and its token."""
        ids, records = self.book.ids, self.book.records
        store: Any = self.store
        quick = self.quick
        for _ in range(1000):
            token = ids.run_hex()
            run_id = f"run-{token}"
            if run_id in records:
                continue
            # A store answering at once may decline (NotImplemented: a FaultyStore whose
            # rules watch ``latest``): the general read then.
            found = store.has_run(run_id) if quick else NotImplemented
            if found is NotImplemented:
                found = await store.latest(run_id) is not None
            if not found:
                return run_id, token
        raise GraphExecutionError("could not find a free run id")  # pragma: no cover

    async def prepare_new(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None,
        thread_id: str | None,
        opts: dict[str, Any],
    ) -> Runner:
        """A new run's first leg, read and claimed; a clock that throws meanwhile refuses it
        at admission (:class:`UnexpectedError`, seed 004)."""
        try:
            return await self._prepare_new(graph, input, thread_id, opts)
        except Exception as exc:
            fault = unexpected(exc, self.host.clock, None, thread_id, admitted=False)
            if fault is None:
                raise
            raise fault from exc

    async def _prepare_new(
        self,
        graph: CompiledGraph,
        input: Mapping[str, Any] | BaseModel | None,
        thread_id: str | None,
        opts: dict[str, Any],
    ) -> Runner:
        if "trio" in sys.modules:
            install_hooks()  # trio's, once a run meets trio (the runtime installed the rest)
        compiled = graph
        if self.host.checkpoint_policy is not None:
            graph = self.policy(graph)
        patch = {} if input is None or (type(input) is dict and not input) \
            else state_from_input(graph, input)
        # checked before a claim or a patch is taken
        stops = breakpoints(graph, opts) if opts["interrupt_before"] \
            or opts["interrupt_after"] else _NO_STOPS  # (run_options() sets both)
        tenant = opts["tenant_id"]
        explicit = thread_id is not None
        if self.features.folded_claims:  # the free run id and the claim: one store call
            run_id, thread_id, base, claim = await self.claim_fresh(
                compiled, graph, patch, thread_id, tenant)
            if explicit:
                try:
                    base = await self.thread_base(graph, thread_id, tenant, patch)
                except BaseException:
                    await released_on_error(claim)
                    raise
            return await self.started(graph, run_id, thread_id, tenant, base, opts, stops,
                                      claim, explicit)
        run_id, token = await self.new_run_id()
        self.book.graphs.ran(run_id, compiled)  # a resume by id alone uses this very graph
        if thread_id is None:
            thread_id = f"thread-{token}"
            base = input_base(graph, patch)
            claim = await self.claim(thread_id, run_id, tenant)
        else:
            # A live run holding the thread is ThreadBusy, whatever the thread's checkpoints
            # say; the thread is read after the claim, so no other run can advance it between.
            claim = await self.claim(thread_id, run_id, tenant)
            try:
                base = await self.thread_base(graph, thread_id, tenant, patch)
            except BaseException:
                await released_on_error(claim)
                raise
        return await self.started(graph, run_id, thread_id, tenant, base, opts, stops, claim,
                                  explicit)

    async def started(self, graph: CompiledGraph, run_id: str, thread_id: str,
                      tenant: str | None, base: Any, opts: dict[str, Any],
                      stops: tuple[frozenset[str], frozenset[str]], claim: ThreadClaim,
                      explicit: bool) -> Runner:
        """A new run's first leg, its thread claimed and its base state read."""
        wall, on_done = self.wall()
        try:
            runner = self.start(graph, run_id, thread_id, tenant, base, opts, stops, wall,
                                claim, on_done, thread_explicit=explicit)
        except BaseException:  # refused at admission (a clock that threw): nothing kept
            if on_done is not None:
                on_done()
            await released_on_error(claim)
            raise
        return runner

    async def claim_fresh(
        self,
        compiled: CompiledGraph,
        graph: CompiledGraph,
        patch: dict[str, Any],
        thread_id: str | None,
        tenant: str | None,
    ) -> tuple[str, str, Any, ThreadClaim]:
        """A new run's id, thread, base state (of a new thread; ``None`` for a thread the
        caller named: read once claimed) and claim, on a store that claims a thread for a
        free run id in one call (``StoreFeatures.folded_claims``): :meth:`new_run_id`, then
        :meth:`claim`, with a store call fewer. The same ids are drawn, and the same errors
        raised in the same cases: a new thread's input is checked before it is claimed (a
        refused input draws ids until a free one, as :meth:`new_run_id` did); a thread a
        live leg of this runtime holds is not claimed (the run id is read as before)."""
        ids, records = self.book.ids, self.book.records
        store: Any = self.store
        ran = self.book.graphs.ran
        explicit = thread_id is not None
        base: Any = None
        checked = explicit  # a named thread's base is read once it is claimed
        for _ in range(1000):
            token = ids.run_hex()
            run_id = f"run-{token}"
            if run_id in records:
                continue
            thread = thread_id if thread_id is not None else f"thread-{token}"
            if not checked:
                try:
                    base = input_base(graph, patch)
                except BaseException:
                    if await store.latest(run_id) is not None:
                        run_id = (await self.new_run_id())[0]
                    ran(run_id, compiled)
                    raise
                checked = True
            holder = self.live_holder(thread, run_id)  # Legs.claim's check, this id's
            if holder is not None:
                if await store.latest(run_id) is not None:
                    continue  # a taken id: the next one (new_run_id's order)
                ran(run_id, compiled)
                raise await self.busy(thread, holder.run_id, tenant)
            host = self.host
            try:
                claim = await take_fresh(store, self.features, host.clock, thread,
                                         run_id, host.claim_ttl)
            except ThreadBusy as exc:
                ran(run_id, compiled)
                raise await self.busy(thread, exc.holder, tenant, exc) from None
            if claim is not None:
                ran(run_id, compiled)  # a resume by id alone uses this very graph
                return run_id, thread, base, claim
        raise GraphExecutionError("could not find a free run id")  # pragma: no cover

    async def thread_base(
        self,
        graph: CompiledGraph,
        thread_id: str,
        tenant: str | None,
        patch: dict[str, Any],
    ) -> dict[str, Any]:
        """The starting state of a new run on ``thread_id``: its last state plus the input."""
        last = await self.thread_latest(thread_id)
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
                base = graph.codec.dump(validate_state(graph, base))
            else:  # the thread's state was validated as it was written: only the input is
                base = graph.codec.validate(base, [("<input>", patch)])[0]
        else:
            base = input_base(graph, patch)
        return base

    async def resolve(self, ref: str, tenant: str | None, *, kept: bool = False
                      ) -> Checkpoint:
        """The checkpoint ``ref`` names: a run's latest, or a checkpoint by id. ``kept``: the
        caller only reads it, so a store that keeps it in this process may hand over its own
        (``StoreFeatures.in_process``) instead of a copy."""
        if type(ref) is not str and not isinstance(ref, str):
            raise InvalidArgument(f"expected a run id or checkpoint id, got {ref!r}")
        store: Any = self.store
        cp: Checkpoint | None = store.kept_latest(ref) if kept and self.quick \
            else NotImplemented
        if cp is NotImplemented:  # not kept in this process, or the store declined
            cp = await store.latest(ref)
        if cp is None:
            cp = await self.store.get(ref)
        if cp is None:
            raise CheckpointNotFound(
                f"no checkpoint for run or checkpoint id {ref!r}: the store has none (never "
                "written, retracted by a guardrail Block, or removed by prune or "
                "delete_thread). Pass the "
                "run_id of run_start (or GraphResult.run_id) or a checkpoint id"
            )
        f = cp.__dict__  # (a model's fields read from its dict: see _prepare_resume)
        if f["tenant_id"] != tenant:
            # Named by what the caller passed: no id of the other tenant's thread.
            raise TenantMismatch(ref, tenant, what="run or checkpoint")
        if f["format_version"] != FORMAT_VERSION:
            raise UnsupportedFormat(
                f"checkpoint {cp.id} has format_version {cp.format_version}; this build reads "
                f"{FORMAT_VERSION}"
            )
        return cp

    def held(self, cp: Checkpoint) -> Runner | None:
        """This runtime's last leg of ``cp``'s run, when that leg ended at ``cp`` (the
        checkpoint it saved last) holding a claim of the store's: what the runtime already
        knows of ``cp`` (see :meth:`unchanged`)."""
        f = cp.__dict__
        runner = self.book.live.get(f["run_id"])
        if runner is None:
            return None
        run = runner.run
        if run.outcome is None:  # not runner.done
            return None
        claim = run.spec.claim
        if run.numbers.checkpoint_id != f["id"] or claim is None or claim.token is None:
            return None
        return runner

    @staticmethod
    def unchanged(held: Runner | None, claim: ThreadClaim) -> bool:
        """Whether ``claim`` is the thread's next claim after ``held``'s leg released its
        own (tokens go up by one per claim of a thread): no run, resume or update took the
        thread in between, so its checkpoint is still the one that leg saved last."""
        if held is None or claim.token is None:
            return False
        last = held.run.spec.claim
        assert last is not None
        assert last.token is not None
        return last.released and last.lost is None and claim.token == last.token + 1

    def graph_for(self, cp: Checkpoint, graph: CompiledGraph | None,
                  held: Runner | None = None) -> CompiledGraph:
        if graph is None:
            graph = self.book.graphs.for_checkpoint(cp)  # the run's own compile, or refused
        if held is not None and (graph if self.host.checkpoint_policy is None
                                 else self.policy(graph)) is held.run.spec.graph:
            # ``cp`` is the checkpoint this runtime's last leg saved under this very graph.
            self.book.graphs.ran(cp.run_id, graph)
            return graph
        problems = upgrade_problems(cp, graph)
        if graph.graph_id != cp.graph_id:  # seed 004: another graph's execution
            raise ExecutionMismatch(cp.run_id, cp.id, cp.graph_id, graph.graph_id, problems)
        if problems:
            revision = ("" if cp.revision == graph.revision else
                        f" (checkpoint {cp.id} was written under revision {cp.revision}; the "
                        f"graph is {graph.revision})")
            raise SnapshotMismatch(
                f"checkpoint {cp.id} cannot resume under graph {graph.graph_id!r}{revision}: "
                + "; ".join(p.message for p in problems), problems)
        self.book.graphs.ran(cp.run_id, graph)
        return graph

    async def prepare_resume(
        self,
        ref: str,
        resume: Resume | None,
        graph: CompiledGraph | None,
        opts: dict[str, Any],
    ) -> Runner:
        """A resumed (or recovered) leg, read and claimed; a clock that throws meanwhile
        refuses it at admission (:class:`UnexpectedError`, seed 004)."""
        try:
            return await self._prepare_resume(ref, resume, graph, opts)
        except Exception as exc:
            fault = unexpected(exc, self.host.clock, None, opts.get("recover"), admitted=False)
            if fault is None:
                raise
            raise fault from exc

    async def _prepare_resume(
        self,
        ref: str,
        resume: Resume | None,
        graph: CompiledGraph | None,
        opts: dict[str, Any],
    ) -> Runner:
        if "trio" in sys.modules:
            install_hooks()
        tenant = opts["tenant_id"]
        recover: str | None = opts["recover"]  # (run_options() sets it, and the next)
        expired: tuple[dict[str, Any], list[Expired]] | None = None
        # Read only (a leg copies what it changes): the store's own checkpoint will do.
        cp = await self.resolve(ref, tenant, kept=True)
        # The checkpoint's fields read from its dict: a pydantic model's class has a
        # ``__getattr__``, so each ``cp.field`` takes the interpreter's slow attribute path
        # (a few hundred machine instructions each, ~30 a resume).
        f = cp.__dict__
        held = self.held(cp) if recover is None and ref == f["run_id"] else None
        given = graph
        graph = self.graph_for(cp, given, held)
        if self.host.checkpoint_policy is not None:
            graph = self.policy(graph)
        answered: dict[str, Any] | None = None
        if recover is not None:
            check_recoverable(recover, cp)  # the run may have ended since it was read
        else:
            answered = check_resumable(cp, resume, claimed=False)
            self.deadlines(cp, resume)
        seen = f["id"] if recover is None and ref == f["run_id"] \
            else await self.view(cp, recover)
        clock = self.host.clock
        vclock = clock if type(clock) is VirtualClock or isinstance(clock, VirtualClock) \
            else None
        virtual = vclock is not None
        # A fresh virtual clock continues from the checkpoint, so time never goes back within
        # a run's log (C10), and the claim is taken at that time; the clock moves there only
        # once the leg is admitted (a refused call changes nothing, the clock included).
        read_at = f["timestamp"]
        behind = virtual and clock.now() < read_at
        claim = await self.claim(f["thread_id"], f["run_id"], tenant,
                                 read_at if behind else None)
        try:
            # Read again under the claim: a run that advanced the thread between this call
            # reading it and claiming it must not be run a second time (seed 004). Unless
            # the claim is the next one after this runtime's own last leg of the run, which
            # left the checkpoint read: then nothing took the thread in between.
            unchanged = self.unchanged(held, claim)
            if not unchanged:
                cp = await self.resolve(ref, tenant, kept=True)
                f = cp.__dict__
                if held is not None:  # its check against the graph was left to this read
                    graph = self.policy(self.graph_for(cp, given))
            latest = cp if ref == f["run_id"] else await self.store.latest(f["run_id"])
            latest_id = None if latest is None else f["id"] if latest is cp else latest.id
            if recover is not None:
                last = await self.thread_latest(recover)
                if last is not None and last.id != seen:
                    raise ThreadBusy(recover, last.run_id)
                check_recoverable(recover, last)
            else:
                if latest is not None and latest_id != seen:
                    raise ThreadBusy(f["thread_id"], latest.run_id)
                # The same checkpoint, answers and (virtual) time as checked above give the
                # same answer: only a claimed checkpoint that is not waiting is judged anew.
                if not unchanged or f["status"] != "interrupted":
                    answered = check_resumable(cp, resume)
                if not (unchanged and virtual):
                    self.deadlines(cp, resume)
                if type(resume) is not Resume and isinstance(resume, ExpiryResume):
                    expired = expiry_answers(cp, resume, graph, self.now(cp))
            # Resumed from a checkpoint that is not the thread's latest (time travel): the
            # leg's first checkpoint branches on purpose (seed 004's ParentNotLatest).
            branch, since = False, f["timestamp"]
            if recover is None and ref != f["run_id"]:
                top = await self.thread_latest(cp.thread_id)
                if top is not None and top.id != cp.id:
                    # ... and a virtual clock goes on from the thread's latest, so the
                    # branch's checkpoints are the thread's latest from then on.
                    branch, since = True, max(since, top.timestamp)
        except BaseException:
            await released_on_error(claim)
            raise
        answers = dict(f["answers"])
        status = f["status"]
        if expired is not None:
            answers.update(expired[0])
        elif status == "interrupted" and f["interrupts"]:
            assert resume is not None
            answers.update(resume.resolve(f["interrupts"]) if answered is None else answered)
        elif status == "failed":  # an unrouted expiry failed it: recovering asks again
            answers = {k: v for k, v in answers.items() if not is_expired_marker(v)}
        metadata = f["metadata"]
        cp_counter = int(metadata.get("cp_counter", 0))
        task_counter = int(metadata.get("task_counter", 0))
        seq = f["next_seq"]
        if latest is not None and latest_id != f["id"]:
            # Time travel: the run's log goes on after everything it already holds, so no
            # event number (and no id) of the original continuation is used twice (C10).
            cp_counter = max(cp_counter, int(latest.metadata.get("cp_counter", 0)))
            task_counter = max(task_counter, int(latest.metadata.get("task_counter", 0)))
            seq = max(seq, latest.next_seq)
        state = f["state"]
        try:
            if resume is not None and resume.update is not None:
                state = apply_update(graph, state, resume.update)[0]
            # checked before the wall-clock patch is taken
            stops = breakpoints(graph, opts) if opts["interrupt_before"] \
                or opts["interrupt_after"] else _NO_STOPS  # (run_options() sets both)
            records = self.book.records
            if f["run_id"] not in records:  # a run this runtime let go of, or never ran
                found = await self.find_record(f["run_id"])
                if found is not None:
                    records[f["run_id"]] = found
        except BaseException:
            await released_on_error(claim)
            raise
        on_done = None
        try:
            if vclock is not None and (behind or since != read_at):
                catch_up(vclock, since)  # (else the clock is at or past ``since`` already)
            wall, on_done = self.wall()
            travelled = bool(metadata.get("time_travel")) or (
                latest is not None and latest_id != f["id"])
            runner = self.start(
                graph, f["run_id"], f["thread_id"], f["tenant_id"], state, opts, stops, wall, claim,
                on_done, resumed=cp, answers=answers, seq=seq, cp_counter=cp_counter,
                task_counter=task_counter, expired=() if expired is None else tuple(expired[1]),
                time_travel=travelled, branch=branch)
        except BaseException:  # refused at admission (a clock that threw): nothing kept
            if on_done is not None:
                on_done()
            await released_on_error(claim)
            raise
        return runner

    def deadlines(self, cp: Checkpoint, resume: Resume | None) -> None:
        """Refuse answers to questions of ``cp`` whose deadline passed (``check_deadlines``
        at :meth:`now`; a checkpoint with no deadline is not asked the time)."""
        for question in cp.interrupts:
            if question.deadline is not None:
                check_deadlines(cp, resume, self.now(cp))
                return

    def now(self, cp: Checkpoint) -> datetime:
        """The runtime clock's time for deadlines of ``cp``: a fresh virtual clock behind the
        checkpoint counts from it (as the leg would, see :func:`catch_up`)."""
        clock = self.host.clock
        now = clock.now()
        return max(now, cp.timestamp) if isinstance(clock, VirtualClock) else now

    async def view(self, cp: Checkpoint, recover: str | None) -> str | None:
        """What this call saw before claiming: the id of the thread's latest checkpoint (a
        recovery) or of the run's latest checkpoint (a resume)."""
        if recover is not None:
            last = await self.thread_latest(recover)
        else:
            last = await self.store.latest(cp.run_id)
        return None if last is None else last.id

    def policy(self, graph: CompiledGraph) -> CompiledGraph:
        """``graph`` under the runtime's checkpoint policy, if it sets one."""
        policy = self.host.checkpoint_policy
        if policy is None or graph.checkpoint_policy == policy:
            return graph
        cache = self.book.policy_graphs
        cached = cache.get(id(graph))
        if cached is None or cached[0] is not graph:
            cached = cache[id(graph)] = (graph, graph.with_policy(policy))
        return cached[1]

    def start(
        self,
        graph: CompiledGraph,
        run_id: str,
        thread_id: str,
        tenant: str | None,
        state: dict[str, Any],
        opts: dict[str, Any],
        stops: tuple[frozenset[str], frozenset[str]],
        wall: bool,
        claim: ThreadClaim,
        on_done: Callable[[], None] | None,
        *,
        thread_explicit: bool = False,
        resumed: Checkpoint | None = None,
        answers: dict[str, Any] | None = None,
        seq: int = 0,
        cp_counter: int = 0,
        task_counter: int = 0,
        expired: tuple[Expired, ...] = (),
        time_travel: bool = False,
        branch: bool = False,
    ) -> Runner:
        """Make the leg (its :class:`LegSpec`, ``RunState`` and ``Runner``), enter it in the
        runtime's books, and show it to the runtime's ``on_leg`` observer."""
        host, book = self.host, self.book
        records = book.records
        record = records[run_id] if run_id in records else None  # noqa: SIM401 (no call)
        if record is None:
            # run_id, thread_id, graph_id, revision, status, started_at, updated_at,
            # tenant_id (positional: keywords to a class go through a dict both ways)
            record = records[run_id] = RunRecord(
                run_id, thread_id, graph.graph_id, graph.revision, "running",
                host.clock.now(), None, tenant)
        else:
            record.status = "running"
            record.legs += 1
        leg: RunLeg | None = None
        on_leg = host.on_leg
        if on_leg is not None:  # an observer sees every leg's events
            leg = RunLeg._started(
                graph, run_id, resumed is not None, host.seed,
                None if resumed is not None else jcopy(state),
                jcopy(answers) if resumed is not None and answers else {}, self.store,
                not opts["record_events"])  # lazy: only the leg reads its events
        middleware, guardrails = host.middleware, host.guardrails
        features = self.features
        cancel_at = opts["cancel_at"]  # (run_options() sets every option read here)
        deadlines: dict[str, datetime] = {}  # of the questions the leg resumed with
        if resumed is not None:
            for question in resumed.__dict__["interrupts"]:  # (see _prepare_resume)
                if question.deadline is not None:
                    deadlines[question.key] = question.deadline
        before, after = stops
        # LegSpec's arguments, positional in its order (see LegSpec.__init__)
        spec = LegSpec(
            graph, self.store, features, host.clock, host.seed, run_id, thread_id, tenant,
            opts["max_supersteps"], opts["timeout"], opts["on_interrupt"], wall,
            # record_events
            opts["record_events"] or leg is not None or cancel_at is not None,
            # break_before, break_after: the graph's own when the call sets none (no new set)
            graph.interrupt_before | before if before else graph.interrupt_before,
            graph.interrupt_after | after if after else graph.interrupt_after,
            # hooks
            hook_table(graph, middleware, guardrails) if middleware or guardrails
            or graph.middleware or graph.guardrails else None,
            claim, self.subgraphs, record, leg, thread_explicit,
            None if resumed is None else resumed.__dict__["id"],  # resumed_from
            time_travel, branch, expired, deadlines, STEPPING.get(), opts["cancel_after"],
            cancel_at,
        )
        # (positional: keywords to a class go through a dict both ways)
        run = RunState(spec, state, resumed, answers, seq, cp_counter, task_counter)
        runner = Runner(run, claim.release, on_done)
        live = book.live
        if live and not (run_id in live and len(live) == 1):  # (that one is replaced)
            for done in [r for r, other in live.items() if other.run.outcome is not None]:
                del live[done]
        live[run_id] = runner
        if features.run_records:
            book.forget_ended()
        if leg is not None:
            assert on_leg is not None
            on_leg(leg)
        return runner


def catch_up(clock: VirtualClock, moment: datetime) -> None:
    """Move ``clock`` to ``moment`` if it is behind it (to the nanosecond: never short)."""
    gap = moment - clock.start
    clock.advance_to_ns((gap.days * 86_400 + gap.seconds) * 1_000_000_000
                        + gap.microseconds * 1_000)


def check_recoverable(thread_id: str, last: Checkpoint | None) -> None:
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


def check_resumable(cp: Checkpoint, resume: Resume | None, *, claimed: bool = True
                    ) -> dict[str, Any] | None:
    """Refuse a resume of ``cp`` that cannot go on. Before the claim, only what no other
    run can change is checked: a ``Resume`` for a checkpoint that is not waiting may be a
    race with a resume that is still running (``ThreadBusy`` then, from the claim).

    Returns:
        the answers ``resume`` gives ``cp``'s questions (``Resume.resolve``) when it waits
        for answers, else ``None``.
    """
    status = cp.__dict__["status"]  # (a model's field read from its dict)
    if status == "completed":
        raise NotSuspended(f"run {cp.run_id} completed (checkpoint {cp.id}); there is "
                           "nothing to resume. Start a new run on its thread instead")
    # Resume.has_answers (read without a call for a Resume itself)
    answering = resume is not None and (
        (resume._has_value or resume.answers is not None) if type(resume) is Resume
        else resume.has_answers)
    if status == "interrupted" and not cp.interrupts:
        if answering:  # paused for a breakpoint: nothing to answer
            raise ResumeError(f"run {cp.run_id} paused for a breakpoint (checkpoint "
                              f"{cp.id}); it has no interrupts to answer, resume it "
                              "without a Resume")
    elif status == "interrupted":
        if resume is None or not answering:
            keys = [i.key for i in cp.interrupts]
            raise ResumeError(f"run {cp.run_id} is paused at interrupts {keys}; resume it "
                              "with Resume(value) or Resume(answers={key: ...})")
        return resume.resolve(cp.interrupts)  # refuses answers that do not fit
    elif answering and claimed:
        raise NotSuspended(f"run {cp.run_id} has no pending interrupts (status "
                           f"{cp.status!r}, checkpoint {cp.id}): another resume may have "
                           "answered them. Read its state with history(); resume it "
                           "without a Resume only to continue a failed, cancelled or "
                           "timed-out run")
    return None
