"""The store conformance state machine behind :mod:`pytest_graphflow.conformance`."""

from __future__ import annotations

import asyncio
import inspect
from contextlib import ExitStack
from functools import partial
from typing import Any, ClassVar

from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    multiple,
    precondition,
    rule,
)

from ..._records._checkpoint import Checkpoint
from ..._records._json import jcopy, to_json_value
from ..._stores._claims import checked_patch
from ..._stores._protocol import CheckpointStore
from ..._time._clock import VirtualClock
from ..._time._loops import in_running_loop
from ..._time._vloop import VirtualEventLoop, backend_options
from ...errors import InvalidArgument
from ._calls import CALL_TIMEOUT, CallLog, RecordedStore, ThreadLoop
from ._draws import (
    _FORK_KEEPS,
    LATEST_RULE,
    NODES,
    ORDER_RULE,
    RUNS,
    THREAD_OF_RUN,
    TICKS,
    _dump,
    _mutate,
    _node_ids,
    _states,
    _values,
)
from ._rare import BESIDE, IN_PLACE, RareShapes

__all__ = ["StoreConformance"]


def _fits(cid: str, state: dict[str, Any], patch: dict[str, Any]) -> bool:
    """Whether ``patch`` names only keys of ``state``, each with a value of the kind it holds
    (what the built-in stores accept)."""
    try:
        checked_patch(cid, state, patch)
    except InvalidArgument:
        return False
    return True


def _has_checkpoints(machine: StoreConformance) -> bool:
    # Until something is saved, only save_new runs: reads of an empty store find nothing a
    # later read would not, and no-op steps before the first save are hard to shrink away.
    return bool(machine.model)


class StoreConformance(RareShapes, RuleBasedStateMachine):
    """The checkpoint-store contract as a Hypothesis state machine.

    Subclass it and override :meth:`make_store` (and optionally :attr:`backend`), then expose
    ``MyConformance.TestCase`` to pytest; or use :func:`run_store_conformance`. Each example
    gets a fresh store from :meth:`make_store`, which may be a coroutine function: it runs on
    the machine's event loop, so stores bound to their loop or thread work.

    Rules checked (each failure message names the store method and the rule it broke):

    * ``save`` of a new id, and of an existing id (overwrite; it then counts as saved last);
      targeted draws make the ties that only save order breaks: half the new checkpoints go
      beside an existing one (same run and timestamp), half the overwrites keep their run
      and timestamp (then the run's listing is checked);
    * ``get`` returns the checkpoint saved last under that id, or ``None``;
    * ``latest``/``load(run)``: the latest timestamp, ties broken by save order;
      ``load(run, node)``: the same among checkpoints whose ``node_id`` or ``node_ids`` name it;
    * ``list`` by run, by thread, by both and of the whole store: exactly the matching
      checkpoints, ordered by timestamp then save order;
    * ``delete`` returns whether the id existed, and the checkpoint is gone everywhere;
    * ``fork`` returns a fresh run id; the new run holds one checkpoint with a fresh id and
      thread, a deep clone of the source with ``patch_state`` applied after cloning and
      ``parent_id`` naming the source; the source is unchanged. Checking ``patch_state``
      against the state schema is not the store's job (a resume of the fork refuses a state
      that does not fit the graph); a store may refuse a patch of unknown keys or other kinds
      of value with ``InvalidArgument``, and then nothing changes;
    * isolation: mutating a checkpoint after saving it, or one a read returned, changes nothing
      in the store;
    * missing ids: ``get`` → ``None``, ``delete`` → ``False``, ``fork`` raises
      ``CheckpointNotFound``; unknown runs load nothing and list nothing.

    The model assumes what the runtime guarantees: a run lives on one thread (runs
    ``run-a``/``run-b`` on ``thread-1``, ``run-c`` on ``thread-2``, each fork on its own).
    Until the first save only ``save_new`` runs, so shrunk programs start with it.

    Attributes:
        backend: the anyio backend the store runs on (``"asyncio"`` or ``"trio"``).
        backend_options: options for that backend (see ``anyio.run``); by default the
            loop runs on a virtual clock of its own.
        call_timeout: virtual seconds one store call may take before it is reported as
            hanging (``CALL_TIMEOUT``).
        virtual_time: run the store's loop on a virtual clock (the default). A store doing
            network I/O on the loop (an async database driver) needs ``False``: an idle
            virtual loop jumps to its next timer without waiting for sockets, so its calls
            would time out; ``call_timeout`` is then real seconds.
        log: the store calls of the current example (every failure lists them).
        api: the store as the rules call it (recorded, each call bounded).
        portal: what drives the store's loop (``portal.call(fn, *args)``): the asyncio loop
            in this thread, or a blocking portal (trio, or ``backend_options`` given).
        store: the store under test.
    """

    backend: ClassVar[str] = "asyncio"
    backend_options: ClassVar[dict[str, Any] | None] = None
    call_timeout: ClassVar[float] = CALL_TIMEOUT
    virtual_time: ClassVar[bool] = True

    checkpoints = Bundle("checkpoints")
    runs = Bundle("runs")


    def __init__(self) -> None:
        super().__init__()
        self._exit = ExitStack()
        # The loop runs on a virtual clock of its own: a store call awaiting what never comes
        # fails its per-call deadline at once (see conformance._calls).
        # On asyncio (without options of the user's) the loop turns in this thread: a thread
        # hop per step is most of a portal's cost.
        clock = VirtualClock(patch_wall_clock=False)
        self.portal: BlockingPortal | ThreadLoop
        if self.backend == "asyncio" and not self.backend_options and not in_running_loop():
            loop = VirtualEventLoop(clock) if self.virtual_time else asyncio.new_event_loop()
            here = ThreadLoop(loop)
            self._exit.callback(here.close)
            self.portal = here
        else:
            virtual = backend_options(self.backend, clock) if self.virtual_time else {}
            options = {**virtual, **(self.backend_options or {})}
            self.portal = self._exit.enter_context(start_blocking_portal(self.backend, options))
        try:
            self.store: CheckpointStore = self.portal.call(self._open_store)
        except BaseException:
            self._exit.close()
            raise
        self.log = CallLog()
        self.api: Any = RecordedStore(self.store, self.log, self._hanging, self.call_timeout)
        self.model: dict[str, Checkpoint] = {}
        self.saved_at: dict[str, int] = {}
        self.thread_of_run: dict[str, str] = dict(THREAD_OF_RUN)
        self._seq = 0
        self._next_id = 0

    def make_store(self) -> Any:
        """Return a fresh, empty store (or an awaitable of one). Override this.

        Raises:
            NotImplementedError: always, in the base class.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must override make_store() to return a fresh, empty "
            "CheckpointStore (or use run_store_conformance(factory))"
        )

    async def close_store(self, store: Any) -> None:
        """Close the store after an example: ``aclose()`` or ``close()`` if it has one."""
        for name in ("aclose", "close"):
            closer = getattr(store, name, None)
            if callable(closer):
                result = closer()
                if inspect.isawaitable(result):
                    await result
                return

    def teardown(self) -> None:
        """Close the store and the event loop."""
        try:
            self.portal.call(self.close_store, self.store)
        finally:
            self._exit.close()

    async def _open_store(self) -> CheckpointStore:
        store = self.make_store()
        if inspect.isawaitable(store):
            store = await store
        return store  # type: ignore[no-any-return]

    # -------------------------------------------------------------------- rules

    @initialize(target=runs)
    def known_runs(self) -> Any:
        """Seed the run bundle with the run pool (forks add theirs)."""
        return multiple(*RUNS)

    @rule(
        target=checkpoints, run_id=st.sampled_from(RUNS), tick=st.integers(0, TICKS - 1),
        node_id=st.none() | st.sampled_from(NODES), node_ids=_node_ids,
        step=st.integers(0, 3), state=_states, beside=BESIDE,
    )
    def save_new(
        self, run_id: str, tick: int, node_id: str | None, node_ids: list[str], step: int,
        state: dict[str, Any], beside: int | None = None,
    ) -> str:
        """Save a checkpoint under a new id (its other fields set by ``shape``); with
        ``beside``, in the run and at the timestamp of a checkpoint held (a tie only save
        order breaks)."""
        run_id, tick = self._beside(beside) or (run_id, tick)
        cp = self._build(self._fresh_id(), run_id, tick, node_id, node_ids, step, state)
        self._run(self._save, cp, "new")
        return cp.id

    @rule(
        cid=checkpoints, run_id=st.sampled_from(RUNS), tick=st.integers(0, TICKS - 1),
        node_id=st.none() | st.sampled_from(NODES), node_ids=_node_ids,
        step=st.integers(0, 3), state=_states, in_place=IN_PLACE,
    )
    def overwrite(
        self, cid: str, run_id: str, tick: int, node_id: str | None, node_ids: list[str],
        step: int, state: dict[str, Any], in_place: bool = False,
    ) -> None:
        """Save again under an id that exists (or existed): it replaces the old checkpoint;
        ``in_place`` keeps its run and timestamp, so it now wins every tie it is in."""
        place = self._in_place(cid) if in_place else None
        run_id, tick = place or (run_id, tick)
        cp = self._build(cid, run_id, tick, node_id, node_ids, step, state)
        self._run(self._overwrite, cp, place is not None)

    async def _overwrite(self, cp: Checkpoint, in_place: bool) -> None:
        await self._save(cp, "overwritten")
        if in_place:
            await self._check_listing(cp.run_id)

    @rule(cid=checkpoints)
    def get(self, cid: str) -> None:
        """``get`` returns the checkpoint saved last under the id, or ``None``."""
        got = self._run(self.api.get, cid)
        if cid in self.model:
            self._expect_same(f"get({cid!r})", "get returns the checkpoint with that id", cid,
                              got)
        elif got is not None:
            self._broke(f"get({cid!r})", "get of a missing (deleted) id returns None",
                        f"it returned checkpoint {getattr(got, 'id', got)!r}")

    @precondition(_has_checkpoints)
    @rule(run_id=runs)
    def latest(self, run_id: str) -> None:
        """``latest`` is the latest timestamp, ties broken by save order."""
        self._run(self._check_latest, run_id)

    @precondition(_has_checkpoints)
    @rule(run_id=runs, node_id=st.none() | st.sampled_from(NODES))
    def load(self, run_id: str, node_id: str | None) -> None:
        """``load(run)`` equals ``latest``; ``load(run, node)`` is the latest for that node."""
        if node_id is None:
            got = self._run(self.api.load, run_id)
            self._expect_latest(f"load({run_id!r})", self._ids_of_run(run_id), got,
                                f"load without node_id is latest: {LATEST_RULE}")
            return
        self._run(self._check_load, run_id, node_id)

    @precondition(_has_checkpoints)
    @rule(run_id=runs, scope=st.sampled_from(["run", "thread", "run+thread", "all", "other"]))
    def list_checkpoints(self, run_id: str, scope: str) -> None:
        """``list`` returns exactly the matching checkpoints, by timestamp then save order."""
        thread = self.thread_of_run[run_id]
        if scope == "other":  # a thread the run is not on: nothing matches
            thread = "thread-2" if thread != "thread-2" else "thread-1"
        run_arg = None if scope in ("thread", "all") else run_id
        thread_arg = None if scope in ("run", "all") else thread
        ids = [cid for cid, cp in self.model.items()
               if run_arg in (None, cp.run_id) and thread_arg in (None, cp.thread_id)]
        shown = [repr(run_arg)] if run_arg is not None else []
        shown += [f"thread_id={thread_arg!r}"] if thread_arg is not None else []
        call = f"list({', '.join(shown)})"
        got = self._run(partial(self.api.list, run_arg, thread_id=thread_arg))
        expected = self._ordered(ids)
        got_ids = [getattr(cp, "id", cp) for cp in got]
        if sorted(got_ids, key=str) != sorted(expected):
            self._broke(call, "list returns exactly the matching checkpoints",
                        f"expected {expected}, got {got_ids}")
        if got_ids != expected:
            self._broke(call, ORDER_RULE, f"expected {self._describe(expected)}; got {got_ids}")
        for cid, cp in zip(expected, got, strict=True):
            self._expect_same(call, "list returns the checkpoints as saved", cid, cp)

    @rule(cid=checkpoints)
    def delete(self, cid: str) -> None:
        """``delete`` says whether the id existed; the checkpoint is then gone."""
        self._run(self._delete, cid)

    @precondition(_has_checkpoints)
    @rule(run_id=runs)
    def delete_latest(self, run_id: str) -> None:
        """Delete a run's latest checkpoint: the run's latest falls back to the one before."""
        if ids := self._ids_of_run(run_id):
            self._run(self._delete, max(ids, key=self._rank))

    async def _delete(self, cid: str) -> None:
        existed = cid in self.model
        got = await self.api.delete(cid)
        if got is not existed:
            self._broke(f"delete({cid!r})", "delete returns True if the id existed, else False",
                        f"the id {'existed' if existed else 'did not exist'}; it returned {got!r}")
        gone = self.model.pop(cid, None)
        self.saved_at.pop(cid, None)
        if await self.api.get(cid) is not None:
            self._broke(f"get({cid!r})", "a deleted checkpoint is gone",
                        f"after delete({cid!r}), get still returned it")
        if gone is not None:  # the run's latest falls back to the one before
            await self._check_latest(gone.run_id)

    @rule(
        target=runs, cid=checkpoints,
        patch=st.none() | st.dictionaries(st.sampled_from(["count", "extra"]), _values,
                                          max_size=2),
    )
    def fork(self, cid: str, patch: dict[str, Any] | None) -> Any:
        """``fork`` clones a checkpoint into a fresh run; the source is unchanged."""
        new_run = self._run(self._fork, cid, patch)
        return multiple() if new_run is None else new_run

    async def _fork(self, cid: str, patch: dict[str, Any] | None) -> str | None:
        if cid not in self.model:
            await self._fork_missing(cid)
            return None
        call = f"fork({cid!r}{'' if patch is None else f', patch_state={patch!r}'})"
        # The protocol applies patch_state after cloning; checking it against the state
        # schema is the runtime's and the public API's job (a resume refuses a state that
        # does not fit the graph). A store may still refuse a patch naming a key the source
        # lacks or changing a key's kind, as the built-in stores do: then nothing changes.
        refusable = bool(patch) and not _fits(cid, self.model[cid].state, patch or {})
        before = [_dump(c) for c in await self.api.list()] if refusable else None
        runs_before = {cp.run_id for cp in self.model.values()}
        threads_before = {cp.thread_id for cp in self.model.values()}
        passed = None if patch is None else jcopy(patch)
        try:
            new_run = await self.api.fork(cid, passed)
        except InvalidArgument as exc:
            if before is None:
                self._broke(call, "fork clones the source and applies patch_state",
                            f"it raised {exc!r} for a patch of the source's own keys, each "
                            "with a value of the kind it holds")
            if [_dump(c) for c in await self.api.list()] != before:
                self._broke(call, "a refused fork changes nothing", "the store changed")
            return None
        if not isinstance(new_run, str):
            self._broke(call, "fork returns the new run id (a str)", f"it returned {new_run!r}")
        if new_run in runs_before:
            held = self._ordered(self._ids_of_run(new_run))
            self._broke(call, "fork returns a fresh run id",
                        f"it returned {new_run!r}, a run the store already holds ({held})")
        forked = await self.api.list(new_run)
        if len(forked) != 1:
            self._broke(call, "fork persists exactly one checkpoint, in the new run",
                        f"list({new_run!r}) returned {[getattr(c, 'id', c) for c in forked]}")
        new = forked[0]
        if new.id in self.model:
            self._broke(call, "fork gives the new checkpoint a fresh id",
                        f"it reused {new.id!r}, which the store already holds")
        if new.thread_id in threads_before:
            self._broke(call, "fork puts the new run on a fresh thread",
                        f"it used thread {new.thread_id!r}, which the store already holds")
        want = {**_dump(self.model[cid]), "parent_id": cid}
        want["state"] = {**want["state"],
                         **{k: to_json_value(v) for k, v in (patch or {}).items()}}
        have = _dump(new)
        diff = {k: (want[k], have[k]) for k in (*_FORK_KEEPS, "parent_id")
                if want[k] != have[k]}
        if diff:
            self._broke(call, "fork deep-clones the source, applies patch_state and links "
                        "the clone to its source (parent_id)",
                        f"the fork differs in {sorted(diff)}; (expected, got): {diff}")
        self._record(new)
        self.thread_of_run[new_run] = new.thread_id
        # The clone is deep and owns its data: changing the fork's object, or the patch we
        # passed, changes neither the source nor the stored fork.
        _mutate(new)
        if passed:
            for value in passed.values():
                if isinstance(value, list | dict):
                    value.clear()
            passed["mutated"] = True
        self._expect_same(f"get({cid!r})", "fork leaves the source checkpoint unchanged", cid,
                          await self.api.get(cid))
        self._expect_same(f"get({new.id!r})", "fork persists the new checkpoint", new.id,
                          await self.api.get(new.id))
        await self._check_latest(new_run)
        return new_run

    @rule(cid=checkpoints, via=st.sampled_from(["get", "latest", "load", "list"]))
    def mutate_returned(self, cid: str, via: str) -> None:
        """Mutating a checkpoint any read returned changes nothing in the store."""
        if cid in self.model:
            self._run(self._mutate_returned, cid, via)

    async def _mutate_returned(self, cid: str, via: str) -> None:
        cp = self.model[cid]
        if via == "get":
            got = [await self.api.get(cid)]
        elif via == "latest":
            got = [await self.api.latest(cp.run_id)]
        elif via == "load":
            got = [await self.api.load(cp.run_id, cp.node_id)]
        else:
            got = list(await self.api.list(cp.run_id))
        for returned in got:
            if isinstance(returned, Checkpoint):
                _mutate(returned)
        for other in self._ordered(self._ids_of_run(cp.run_id)):
            self._expect_same(
                f"{via}() (checked with get({other!r}))",
                f"{via} returns copies: mutating a checkpoint it returned changes nothing in "
                "the store", other, await self.api.get(other),
            )

    @precondition(_has_checkpoints)
    @rule(n=st.integers(0, 2))
    def missing_ids(self, n: int) -> None:
        """Missing ids: get → None, delete → False, fork → CheckpointNotFound; unknown runs."""
        self._run(self._missing_ids, f"cp-missing-{n}", f"run-missing-{n}")

    async def _missing_ids(self, cid: str, run_id: str) -> None:
        if cid in self.model:
            return
        if (got := await self.api.get(cid)) is not None:
            self._broke(f"get({cid!r})", "get of a missing id returns None", f"got {got!r}")
        if (deleted := await self.api.delete(cid)) is not False:
            self._broke(f"delete({cid!r})", "delete of a missing id returns False",
                        f"got {deleted!r}")
        await self._fork_missing(cid)
        if (got := await self.api.latest(run_id)) is not None:
            self._broke(f"latest({run_id!r})", "latest of an unknown run returns None",
                        f"got {got!r}")
        for node in (None, "a"):
            if (got := await self.api.load(run_id, node)) is not None:
                self._broke(f"load({run_id!r}, {node!r})", "load of an unknown run returns None",
                            f"got {got!r}")
        if (listed := await self.api.list(run_id)) != []:
            self._broke(f"list({run_id!r})", "list of an unknown run is empty",
                        f"got {listed!r}")
