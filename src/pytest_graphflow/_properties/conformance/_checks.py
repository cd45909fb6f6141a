"""The contract checks of the store conformance machine: the model of what the store must
hold (ids, save order, runs' threads), the expectations a read must meet, and the store calls
whose results every rule checks the same way (``save`` and read back, ``latest``, a fork of a
missing id). Each failure names the store method and the rule of the contract it broke.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any, ClassVar, NoReturn

from anyio.from_thread import BlockingPortal

from ..._records._checkpoint import Checkpoint
from ..._records._json import jcopy
from ..._stores._protocol import CheckpointStore
from ...errors import CheckpointNotFound
from ._calls import CallLog, ThreadLoop
from ._draws import BASE_TIME, LATEST_RULE, _dump, _mutate, shape

__all__ = ["ConformanceChecks"]


class ConformanceChecks:
    """The model and the contract checks of :class:`~._conformance.StoreConformance` (its
    base; the machine holds the store's lifecycle and the rules)."""

    portal: BlockingPortal | ThreadLoop
    store: CheckpointStore
    api: Any
    log: CallLog
    call_timeout: ClassVar[float]
    model: dict[str, Checkpoint]
    saved_at: dict[str, int]
    thread_of_run: dict[str, str]
    _seq: int
    _next_id: int
    _built: int = 0

    # ------------------------------------------------------------------ helpers
    # Each rule runs all its store calls and checks in one coroutine on the machine's loop:
    # one thread hop per step instead of one per store call.

    def _run(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        try:
            return self.portal.call(partial(fn, *args))
        except AssertionError:
            raise
        except Exception as exc:  # the store raised where the contract has it answer
            last = self.log.calls[-1] if self.log.calls else "make_store()"
            raise AssertionError(
                f"{self._name}.{last} broke the store contract: it raised "
                f"{type(exc).__name__}: {exc}, where the contract has it answer.\n"
                f"{self.log.report()}"
            ) from exc

    def _hanging(self, call: str) -> AssertionError:
        return AssertionError(
            f"{self._name}.{call} broke the store contract: a store call returns (it was still "
            f"waiting after {self.call_timeout:g} s of virtual time).\n{self.log.report()}"
        )

    @property
    def _name(self) -> str:
        return type(self.store).__name__

    def _broke(self, call: str, rule_text: str, detail: str) -> NoReturn:
        raise AssertionError(
            f"{self._name}.{call} broke the store contract: {rule_text}.\n{detail}\n"
            f"{self.log.report()}"
        )

    def _rank(self, cid: str) -> tuple[datetime, int]:
        return (self.model[cid].timestamp, self.saved_at[cid])

    def _ordered(self, ids: Any) -> list[str]:
        return sorted(ids, key=self._rank)

    def _ids_of_run(self, run_id: str) -> list[str]:
        return [cid for cid, cp in self.model.items() if cp.run_id == run_id]

    def _fresh_id(self) -> str:
        # Fresh ids count down (cp-9999, cp-9998, ...): ids that sorted in save order would
        # hide a store breaking ties by id instead of save order until an overwrite or a
        # fork reordered them; counting down, two saves that tie show it.
        while True:
            self._next_id += 1
            cid = f"cp-{10_000 - self._next_id:04d}"
            if cid not in self.model:
                return cid

    def _record(self, cp: Checkpoint) -> None:
        self._seq += 1
        self.model[cp.id] = cp.model_copy(deep=True)
        self.saved_at[cp.id] = self._seq

    def _describe(self, ids: list[str]) -> str:
        return ", ".join(
            f"{cid} (t+{(self.model[cid].timestamp - BASE_TIME).total_seconds():g}s, "
            f"save #{self.saved_at[cid]})" for cid in ids
        ) or "none"

    def _expect_same(self, call: str, rule_text: str, expected_id: str, got: Any) -> None:
        if not isinstance(got, Checkpoint):
            self._broke(call, rule_text, f"expected checkpoint {expected_id}, got {got!r}")
        if got.id != expected_id:
            self._broke(call, rule_text, f"expected checkpoint {expected_id}, got {got.id}")
        want, have = _dump(self.model[expected_id]), _dump(got)
        if want != have:
            diff = {k: (want.get(k), have.get(k)) for k in sorted(want.keys() | have.keys())
                    if want.get(k) != have.get(k)}
            self._broke(
                call, rule_text,
                f"checkpoint {expected_id} is not as it was saved last: it differs in "
                f"{sorted(diff)}; (saved, returned): {diff}",
            )

    def _expect_latest(self, call: str, ids: list[str], got: Any, rule_text: str) -> None:
        if not ids:
            if got is not None:
                self._broke(call, f"{rule_text} (None when nothing matches)",
                            f"nothing matches, yet it returned {getattr(got, 'id', got)!r}")
            return
        expected = max(ids, key=self._rank)
        if getattr(got, "id", None) != expected:
            self._broke(
                call, rule_text,
                f"expected {expected}, got {getattr(got, 'id', got)!r}; candidates (timestamp "
                f"offset, save order): {self._describe(self._ordered(ids))}",
            )
        self._expect_same(call, rule_text, expected, got)

    async def _check_latest(self, run_id: str) -> None:
        got = await self.api.latest(run_id)
        self._expect_latest(f"latest({run_id!r})", self._ids_of_run(run_id), got, LATEST_RULE)

    async def _check_load(self, run_id: str, node_id: str) -> None:
        got = await self.api.load(run_id, node_id)
        ids = [cid for cid in self._ids_of_run(run_id)
               if self.model[cid].node_id == node_id or node_id in self.model[cid].node_ids]
        self._expect_latest(
            f"load({run_id!r}, {node_id!r})", ids, got,
            "load(run, node) is the latest of the run's checkpoints whose node_id or node_ids "
            f"name the node ({LATEST_RULE})",
        )

    def _build(
        self, cid: str, run_id: str, tick: int, node_id: str | None, node_ids: list[str],
        step: int, state: dict[str, Any],
    ) -> Checkpoint:
        self._built += 1
        extras = shape(self._built - 1)
        cp = Checkpoint(
            id=cid, run_id=run_id, thread_id=self.thread_of_run[run_id], graph_id="conformance",
            revision="rev-1", node_id=node_id, node_ids=list(node_ids), step=step,
            # Our own copy: rules mutate it later, and Hypothesis' drawn values stay intact.
            timestamp=BASE_TIME + timedelta(seconds=tick), state=jcopy(state),
            visited=list(node_ids), metadata={"origin": "conformance"},
        )
        if extras:
            cp = Checkpoint.model_validate({**cp.model_dump(), **extras})
            cp = cp.clone()  # nothing shared with the drawn values
        return cp

    async def _save(self, cp: Checkpoint, what: str) -> None:
        old = self.model.get(cp.id)
        result = await self.api.save(cp)
        if result is not None:
            self._broke(f"save({cp.id!r})", "save returns None", f"it returned {result!r}")
        self._record(cp)
        # The caller keeps its object: changing it must not change what the store holds.
        _mutate(cp)
        got = await self.api.get(cp.id)
        self._expect_same(f"get({cp.id!r})", f"a {what} checkpoint can be read back by id",
                          cp.id, got)
        # Nor may changing what a read returned.
        assert got is not None
        _mutate(got)
        self._expect_same(
            f"get({cp.id!r})", "get returns copies: mutating a checkpoint it returned changes "
            "nothing in the store", cp.id, await self.api.get(cp.id),
        )
        # Every save can change its run's latest (and, for an overwrite, the old run's), and
        # what load(run, node) finds for a node only its node_ids name.
        await self._check_latest(cp.run_id)
        saved = self.model[cp.id]  # ``cp`` itself was mutated above
        for node in saved.node_ids:
            if node != saved.node_id:
                await self._check_load(saved.run_id, node)
        if old is not None and old.run_id != cp.run_id:
            await self._check_latest(old.run_id)

    async def _fork_missing(self, cid: str) -> None:
        call, rule_text = f"fork({cid!r})", "fork of a missing id raises CheckpointNotFound"
        try:
            result = await self.api.fork(cid)
        except CheckpointNotFound:
            return
        except Exception as exc:
            self._broke(call, rule_text, f"it raised {exc!r}")
        self._broke(call, rule_text, f"it returned {result!r}")
