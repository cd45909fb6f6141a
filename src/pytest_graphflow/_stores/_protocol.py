"""The ``CheckpointStore`` protocol every backend implements (seed 003)."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from .._records._checkpoint import Checkpoint
from ._deletion import DeletedThread

__all__ = ["CheckpointStore", "ClaimingStore", "DeletingStore", "Fence", "checks_fencing"]

Fence = tuple[str, int]
"""``(thread_id, token)``: the claim a write is made under (see :class:`ClaimingStore`)."""


@runtime_checkable
class CheckpointStore(Protocol):
    """An async store of checkpoints.

    "Latest" means the latest ``timestamp``; of checkpoints with the same timestamp, the one
    saved last. Implementations return copies: mutating what ``get`` returned changes nothing
    in the store.
    """

    async def save(self, checkpoint: Checkpoint) -> None:
        """Persist ``checkpoint``; one with the same id is overwritten."""

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``."""

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """The most recent checkpoint of ``run_id`` (for ``node_id`` when given), or ``None``."""

    async def latest(self, run_id: str) -> Checkpoint | None:
        """The most recent checkpoint of ``run_id``, or ``None``."""

    async def list(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> list[Checkpoint]:
        """Checkpoints of a run (or thread, or all), oldest first (timestamp, then save order)."""

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete one checkpoint; ``True`` if it existed."""

    async def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
    ) -> str:
        """Clone a checkpoint into a new run (fresh run, thread and checkpoint ids, state
        patched by ``patch_state``), persist it and return the new run id.

        ``thread_id`` names the new thread (default: a fresh id); it must not exist yet.

        Raises:
            CheckpointNotFound: when ``checkpoint_id`` does not exist.
            ForkTargetExists: when the store already holds a checkpoint of ``thread_id``.
        """


@runtime_checkable
class ClaimingStore(CheckpointStore, Protocol):
    """A store that keeps thread claims with fencing tokens (seed 004, SPEC §5).

    The runtime uses these methods when a store has them; the in-memory and SQLite stores do,
    and a new backend gets the same guarantees by implementing them with the shared rules of
    :mod:`pytest_graphflow._stores._claims`, each method one transaction:

    - ``claim`` reads the thread's claim row, asks ``take_claim`` and writes its answer: while
      a claim is live every other claim is refused with ``ThreadBusy`` (the same run id
      included: a claim belongs to the runtime instance holding the token).
    - ``renew``/``release`` check the token with ``current_or_stale`` (``StaleClaim``).
    - ``commit`` checks the token with ``current_or_stale``, the parts with
      ``check_commit`` and, against the thread's latest checkpoint read in the same
      transaction, their lineage with ``check_lineage`` (``ParentNotLatest``,
      ``MalformedCommit``), then writes the checkpoints, the events and the run record
      together, or nothing at all.
    - ``save(checkpoint, fence=(thread_id, token))`` is a commit of one checkpoint.

    A durable store (``records_events = True``) gets one ``commit`` per piece of a run (the
    piece's checkpoints, its events and the run record); the in-memory store gets fenced saves.
    """

    async def claim(
        self, thread_id: str, run_id: str, *, now: datetime, ttl: float | None = None
    ) -> int:
        """Claim the thread for ``run_id``; return a new, strictly larger fencing token.

        Raises:
            ThreadBusy: a claim on the thread is live.
        """

    async def renew(self, thread_id: str, token: int, *, now: datetime) -> None:
        """Extend the claim ``token`` by its ttl from ``now``.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """

    async def release(self, thread_id: str, token: int) -> None:
        """Release the claim ``token``.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """

    async def current_claim(self, thread_id: str) -> tuple[str, int, datetime] | None:
        """``(run_id, token, expires_at)`` of the thread's claim, or ``None``."""

    async def commit(
        self,
        thread_id: str,
        token: int,
        *,
        run_id: str,
        checkpoints: Sequence[Any] = (),
        events: Sequence[dict[str, Any]] = (),
        run: dict[str, Any] | None = None,
    ) -> None:
        """Write ``checkpoints`` (in order), ``events`` and the run record ``run`` of
        ``run_id`` atomically under the claim ``token`` on ``thread_id``.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim; nothing is written.
            InvalidArgument: a part is not of ``run_id`` on ``thread_id``; nothing is written.
        """


@runtime_checkable
class DeletingStore(CheckpointStore, Protocol):
    """A store that can delete a whole thread (seed 004's ``deleteThread``), an optional
    capability: the in-memory, SQLite and PostgreSQL stores have it, and
    ``GraphRuntime.delete_thread`` needs it.

    A new backend decides with the shared rules of
    :mod:`pytest_graphflow._stores._deletion` inside one transaction: read the tenant on the
    thread's latest checkpoint and the thread's claim, ask ``check_deletable``, then remove
    everything of the thread and its runs, and its claim (keeping its last fencing token as
    the floor of new threads' tokens).
    """

    async def delete_thread(
        self, thread_id: str, *, tenant_id: str | None = None, now: datetime | None = None
    ) -> DeletedThread:
        """Delete the thread's checkpoints, the events, run records and artifacts of its
        runs, and its claim, all or nothing; a thread the store does not know is a no-op
        (all zeros).

        Raises:
            TenantMismatch: ``tenant_id`` is not the tenant on the thread's latest
                checkpoint; nothing is deleted.
            ThreadBusy: a claim on the thread is live at ``now`` (any claim not released,
                when ``now`` is ``None``); nothing is deleted.
        """


_FENCING: weakref.WeakKeyDictionary[type, tuple[bool | None, bool]] = (
    weakref.WeakKeyDictionary())


def _save_takes_fence(store: Any) -> bool:
    try:
        params = inspect.signature(store.save).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin save
        return False
    return "fence" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _class_flag(cls: type) -> bool | None:
    """The class's ``supports_fencing`` (``None`` when it is a property, asked per store)."""
    found = inspect.getattr_static(cls, "supports_fencing", False)
    return None if isinstance(found, property) else bool(found)


def checks_fencing(store: Any) -> bool:
    """Whether ``store`` checks fencing tokens: its class says so (``supports_fencing``,
    looked up without ``__getattr__``; a property is asked) and its ``save`` takes ``fence=``.

    A proxy that forwards attributes to another store, or a subclass overriding ``save``
    without ``fence``, keeps unfenced saves: its own ``save`` is what the runtime calls. What
    the class decides is read once per class (the runtime asks at every claim), unless the
    instance carries a ``save`` or ``supports_fencing`` of its own.
    """
    cls = type(store)
    own = getattr(store, "__dict__", None)
    if own is not None and ("save" in own or "supports_fencing" in own):
        flag = bool(own["supports_fencing"]) if "supports_fencing" in own else _class_flag(cls)
        if flag is None:
            flag = bool(store.supports_fencing)
        return flag and _save_takes_fence(store)
    try:
        flag, takes = _FENCING[cls]
    except KeyError:
        flag, takes = _FENCING[cls] = (_class_flag(cls), _save_takes_fence(store))
    except TypeError:  # pragma: no cover - a class that cannot be weakly referenced
        flag, takes = _class_flag(cls), _save_takes_fence(store)
    if flag is None:
        flag = bool(store.supports_fencing)
    return flag and takes
