"""What a store supports beyond the ``CheckpointStore`` protocol: one frozen value.

``features_of`` is the only place that looks at a store to find out; the engine reads the
:class:`StoreFeatures` it returns and never the store's attributes.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidArgument
from ._protocol import checks_fencing

__all__ = ["StoreFeatures", "check_store", "features_of"]


@dataclass(frozen=True)
class StoreFeatures:
    """The optional capabilities of a checkpoint store, each ``False`` by default.

    A store declares them as ``features: StoreFeatures = StoreFeatures(...)`` (a class
    attribute, or a property when they depend on the instance); the runtime reads them once
    per leg and uses a capability only when it is declared.

    Attributes:
        claims: ``claim``/``renew``/``release``/``current_claim`` keep thread claims with
            fencing tokens (:class:`ClaimingStore`); without it the runtime keeps the claims
            of its own store in memory.
        fencing: ``save(checkpoint, fence=(thread_id, token))`` refuses a stale token.
        commit: ``commit(thread_id, token, run_id=, checkpoints=, events=, run=)`` writes a
            piece of a run atomically (used with ``events``).
        events: the store is durable: it records a run's events (``record_events``,
            ``events``) and run records (``record_run``), written with each piece.
        run_records: ``run(run_id)`` reads a run record back (the runtime then holds only a
            few records itself).
        history_pages: ``list(..., limit=, before=)`` returns one page of history.
        artifacts: ``put_artifact``/``artifacts`` keep a run's artifacts.
        prune: ``prune(run_id, keep_last)`` drops a run's oldest checkpoints.
        delete_thread: ``delete_thread`` removes a whole thread (:class:`DeletingStore`).
        queue: ``enqueue``/``take_job``/``finish_job`` keep a queue of runs for workers.
        waiting: ``waiting(*, limit=, after=)`` lists the runs waiting for answers
            (``GraphRuntime.waiting``, ``expire_due``).
        tenants: the store keeps tenants apart itself: ``waiting`` takes ``tenant_id=`` and
            ``any_tenant=`` and ``delete_thread`` takes ``tenant_id=`` (refusing another
            tenant's thread in its own transaction). Without it the runtime calls them
            without tenants and keeps tenants apart itself: it filters ``waiting``'s rows
            by tenant and pages them, and checks a thread's tenant before deleting it.
        clock_binding: ``bind_clock(clock)`` takes the runtime's clock.
        call_log: ``call_count`` and ``calls_since(start)`` log the calls made to the store
            (traces show them).
        fields_save: ``adopt_fields(fields, fence)`` stores a checkpoint given as its fields
            without building it (the in-memory store's fast save); it returns ``False`` when
            the checkpoint must go through ``save`` instead.
        visited_snapshots: ``save``/``commit`` take a checkpoint whose ``visited`` is still
            the run's lazy snapshot (SQLite and PostgreSQL write the path from it); only
            a store that never reads ``visited`` as a tuple may declare it.
        step_sink: ``step_sink(...)`` gives the lean step's save of a run's plain steps
            (the in-memory store's own, declared by that class alone, and passed on, each
            save logged, by a ``FaultyStore`` over it); a sink may answer
            ``NotImplemented`` (nothing stored): that save and the run's next go the
            general way.
        in_process: the store keeps everything in this process and answers the runtime at
            once, without a coroutine: ``claim_now``/``release_now`` (a claim),
            ``has_run`` (a free run id) and ``kept_latest`` (a run's latest checkpoint as
            kept, not copied: the runtime only reads it); each may answer
            ``NotImplemented`` (declined, nothing done): the runtime then awaits ``claim``,
            ``release`` or ``latest``. The in-memory store's, and a ``FaultyStore``'s over
            it (logging each answer as the call it stands for, declining while a rule
            watches that call); it counts only for the class that defines those methods
            itself.
        folded_claims: a new run's claim and a leg's release ride on calls the runtime
            makes anyway (a round trip each fewer on a server): ``claim_fresh(thread_id,
            run_id, *, now, ttl=None)`` is ``claim`` for a run id no checkpoint has yet,
            answering ``None`` (nothing written) when the store holds a checkpoint of
            ``run_id`` (the runtime then tries another id); and ``commit(..., release=True)``
            also releases the claim ``token``, in the same transaction, when it writes (a
            commit that raises releases nothing). Needs ``claims`` and ``commit``; it counts
            only when the store's class has ``claim_fresh`` and a ``commit`` taking
            ``release`` (a wrapper forwarding to such a store does not).
        sent_commits: ``commit_sent(thread_id, token, *, run_id, checkpoints, events)``
            sends a run's plain step (one checkpoint, its events) without waiting for the
            answer and returns an object whose ``await settled()`` finishes it as
            ``commit`` would (raising what it raises), or ``None`` (nothing sent:
            ``commit`` it). The runtime runs the next step's ``pure`` node meanwhile and
            settles before anything else (its events, any other node, the run's end); a
            save that fails undoes that node's step. An object that also has
            ``send_behind(before)`` (``True``: sent while ``before``, the run's last commit
            sent, is unanswered; its own write must depend on ``before``'s) and
            ``await dropped()`` (read the answer of one sent behind a commit that failed,
            nothing more) lets the runtime keep two of a run's commits on the wire when the
            first is a ``pure`` node's step. The PostgreSQL store's; it counts only for the
            class that defines ``commit_sent`` (a wrapper does not pass it on).
    """

    claims: bool = False
    fencing: bool = False
    commit: bool = False
    events: bool = False
    run_records: bool = False
    history_pages: bool = False
    artifacts: bool = False
    prune: bool = False
    delete_thread: bool = False
    queue: bool = False
    waiting: bool = False
    tenants: bool = False
    clock_binding: bool = False
    call_log: bool = False
    fields_save: bool = False
    visited_snapshots: bool = False
    step_sink: bool = False
    in_process: bool = False
    folded_claims: bool = False
    sent_commits: bool = False


_NEEDS: dict[str, tuple[str, ...]] = {
    "claims": ("claim", "renew", "release"),
    "commit": ("commit",),
    "events": ("record_events", "record_run"),
    "run_records": ("run",),
    "artifacts": ("put_artifact", "artifacts"),
    "prune": ("prune",),
    "delete_thread": ("delete_thread",),
    "queue": ("enqueue", "take_job", "finish_job"),
    "waiting": ("waiting",),
    "clock_binding": ("bind_clock",),
    "call_log": ("calls_since",),
    "fields_save": ("adopt_fields",),
    "step_sink": ("step_sink",),
    "in_process": ("claim_now", "release_now", "has_run", "kept_latest"),
    "folded_claims": ("claim_fresh", "commit"),
}
"""The methods each declared feature needs (``fencing`` and ``history_pages`` are arguments of
``save`` and ``list``)."""


def _has(store: Any, *names: str) -> bool:
    return all(callable(getattr(store, name, None)) for name in names)


def _takes_tenants(store: Any) -> bool:
    """Whether the store's ``waiting`` and ``delete_thread`` (those it has) take
    ``tenant_id=``, as a store written before :class:`StoreFeatures` shows it keeps tenants."""
    found = [getattr(store, name) for name in ("waiting", "delete_thread") if _has(store, name)]
    try:
        return bool(found) and all(
            "tenant_id" in inspect.signature(method).parameters for method in found)
    except (TypeError, ValueError):  # pragma: no cover - a callable without a signature
        return False


def derived_features(store: Any) -> StoreFeatures:
    """The features of a store that declares none, from the methods it has (a store written
    before :class:`StoreFeatures` keeps working). ``fields_save`` and ``visited_snapshots``
    are never derived: a store must declare them."""
    claims = _has(store, "claim", "release")
    inner = getattr(store, "inner", store)  # a wrapper commits through the store it wraps
    events = bool(getattr(store, "records_events", False))
    return StoreFeatures(
        claims=claims,
        fencing=claims and checks_fencing(store),
        commit=_has(store, "commit") and _has(inner, "commit"),
        events=events,
        run_records=events and _has(store, "run"),
        history_pages=bool(getattr(store, "pages_history", False)),
        artifacts=_has(store, "put_artifact", "artifacts"),
        prune=_has(store, "prune"),
        delete_thread=_has(store, "delete_thread"),
        queue=_has(store, "enqueue", "take_job", "finish_job"),
        waiting=_has(store, "waiting"),
        tenants=_takes_tenants(store),
        clock_binding=_has(store, "bind_clock"),
        call_log=_has(store, "calls_since"),
    )


def features_of(store: Any) -> StoreFeatures:
    """What ``store`` supports: the :class:`StoreFeatures` its own class declares
    (``features``), else what its methods show.

    Only the store's own class counts: a subclass of a built-in store that does not declare
    ``features`` again may have removed or changed a method, so its features are derived.
    """
    cls = type(store)
    declared = cls.__dict__.get("features")
    if isinstance(declared, property):
        declared = store.features
    if not isinstance(declared, StoreFeatures):
        return derived_features(store)
    if declared.in_process and not cls.__dict__.keys() >= _IN_PROCESS:
        # a wrapper, or a subclass, passing the in-memory store's declaration on
        declared = _not_in_process(declared)
    if declared.folded_claims and not _folds(cls):
        declared = replace(declared, folded_claims=False)
    if declared.sent_commits and not _has(cls, "commit_sent"):
        declared = replace(declared, sent_commits=False)
    if declared.fencing and not checks_fencing(store):
        # an instance that says it does not fence, or carries a save without ``fence=``
        return replace(declared, fencing=False)
    return declared


_FOLDS: dict[type, bool] = {}


def _folds(cls: type) -> bool:
    """Whether ``cls`` has ``claim_fresh`` and a ``commit`` taking ``release``
    (``StoreFeatures.folded_claims``; decided once per class)."""
    found = _FOLDS.get(cls)
    if found is None:
        commit = getattr(cls, "commit", None)
        try:
            takes = callable(commit) and "release" in inspect.signature(commit).parameters
        except (TypeError, ValueError):  # pragma: no cover - a builtin commit
            takes = False
        found = _FOLDS[cls] = takes and callable(getattr(cls, "claim_fresh", None))
    return found


_IN_PROCESS = frozenset(_NEEDS["in_process"])
_NOT_IN_PROCESS: dict[StoreFeatures, StoreFeatures] = {}


def _not_in_process(declared: StoreFeatures) -> StoreFeatures:
    found = _NOT_IN_PROCESS.get(declared)
    if found is None:
        found = _NOT_IN_PROCESS[declared] = replace(declared, in_process=False)
    return found


def check_store(store: Any, where: str) -> None:
    """Refuse what is not a checkpoint store (the methods every run reads and writes).

    Raises:
        InvalidArgument: ``store`` lacks one of ``save``/``get``/``latest``/``list``, or a
            method a feature it declares needs.
    """
    key = _check_key(store)
    if key is not None and key in _CHECKED:
        return
    for name in ("save", "get", "latest", "list"):
        if not callable(getattr(store, name, None)):
            raise InvalidArgument(f"{where}(store={store!r}): the store has no "
                                  f"{name}(); pass a CheckpointStore")
    features = features_of(store)
    for field, names in _NEEDS.items():
        if getattr(features, field):
            for name in names:
                if not callable(getattr(store, name, None)):
                    raise InvalidArgument(
                        f"{where}(store={store!r}): the store declares "
                        f"StoreFeatures({field}=True) but has no {name}(); implement it or "
                        f"declare {field}=False")
    if key is not None:
        _CHECKED.add(key)


_CHECKED: set[tuple[Any, ...]] = set()
"""Keys of stores found complete (see :func:`_check_key`)."""

_CHECKED_NAMES: frozenset[str] = frozenset(
    {"save", "get", "latest", "list"}.union(*_NEEDS.values()))


def _check_key(store: Any) -> tuple[Any, ...] | None:
    """What decides :func:`check_store`'s verdict on a wrapper store (one with a
    ``_check_key`` method, like ``FaultyStore``: every test makes one, and looking up the
    methods it forwards builds each forwarder), or ``None``: checked every time."""
    method = getattr(type(store), "_check_key", None)
    if method is None:
        return None
    key: tuple[Any, ...] | None = method(store, _CHECKED_NAMES)
    return key
