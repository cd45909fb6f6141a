"""Rules every store shares for its extras: claims with fencing tokens (seed 004), event
logs and their compaction, run records, artifacts and retention arguments.

The in-memory and the SQLite store keep their data differently but decide everything here,
so the two agree on every answer and every error. A new backend reuses them: it reads the
thread's claim row inside its write transaction, asks :func:`take_claim` /
:func:`current_or_stale` / :func:`renewed` what to do, checks a commit with
:func:`check_commit`, and writes the answer in the same transaction (see
:class:`~pytest_graphflow._stores._protocol.ClaimingStore`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .._records._checkpoint import FORMAT_VERSION, Checkpoint
from .._records._checks import check_id
from .._records._json import DumpedEvents, NotJSONError, to_json_value
from ..errors import (
    EventsCompacted,
    ForkTargetExists,
    InvalidArgument,
    MalformedCommit,
    ParentNotLatest,
    StaleClaim,
    ThreadBusy,
    UnsupportedFormat,
)

__all__ = [
    "DEFAULT_CLAIM_TTL",
    "Claim",
    "artifact_bytes",
    "check_after_seq",
    "check_before_seq",
    "check_commit",
    "check_keep_last",
    "check_lineage",
    "check_token",
    "check_ttl",
    "checked_patch",
    "current_or_stale",
    "events_compacted",
    "fence_token",
    "fork_patch",
    "fork_target_exists",
    "fresh_claim",
    "from_micros",
    "lineage_free",
    "normalise_event",
    "normalise_run_record",
    "renewed",
    "store_claim_ttl",
    "take_claim",
    "to_micros",
    "unsupported_format",
    "utc_now",
]

DEFAULT_CLAIM_TTL = 30.0
"""Seconds a claim stays live unless renewed (on the claiming runtime's clock)."""

_INF = float("inf")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class Claim:
    """A run's claim on a thread.

    Attributes:
        run_id: the run holding the thread.
        token: the fencing token; strictly increasing per thread.
        expires_at: when the claim stops being live (UTC), unless renewed.
        ttl: the claim's time to live in seconds; a renewal extends it by as much.
    """

    run_id: str
    token: int
    expires_at: datetime
    ttl: float

    def live(self, now: datetime) -> bool:
        """Whether the claim still holds the thread at ``now``."""
        return now < self.expires_at

    def as_tuple(self) -> tuple[str, int, datetime]:
        """``(run_id, token, expires_at)``, the form ``current_claim`` returns."""
        return (self.run_id, self.token, self.expires_at)


_new_claim = object.__new__
_DELTAS: dict[float, timedelta] = {}
"""``timedelta(seconds=ttl)`` by ttl: a runtime's claims share one ttl (bounded, see
:func:`fresh_claim`)."""


def fresh_claim(run_id: str, token: int, now: datetime, ttl: float) -> Claim:
    """``Claim(run_id, token, now + timedelta(seconds=ttl), ttl)`` made at less cost
    (internal; every leg on a store that claims takes one): the ttl's ``timedelta`` kept
    from the last claim with that ttl, and the frozen dataclass's fields set in its
    ``__dict__`` instead of through ``object.__setattr__`` one at a time (~11,000 -> ~4,000
    instructions). ``ttl``: a positive number of seconds, checked by the caller."""
    deltas = _DELTAS
    if ttl in deltas:  # (``in`` and a subscript, not get(): no call)
        delta = deltas[ttl]
    else:
        if len(deltas) >= 64:
            deltas.clear()
        delta = deltas[ttl] = timedelta(seconds=ttl)
    claim = _new_claim(Claim)
    fields = claim.__dict__
    fields["run_id"] = run_id
    fields["token"] = token
    fields["expires_at"] = now + delta
    fields["ttl"] = ttl
    return claim


def utc_now(now: object, where: str) -> datetime:
    """``now`` as an aware UTC datetime.

    Raises:
        InvalidArgument: when ``now`` is not a timezone-aware datetime.
    """
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidArgument(
            f"{where}(now={now!r}): now must be a timezone-aware datetime from the claiming "
            "runtime's clock (e.g. clock.now())"
        )
    return now.astimezone(UTC)


def check_ttl(ttl: object, where: str) -> float:
    """A claim ttl, checked: a positive finite number of seconds.

    Raises:
        InvalidArgument: for anything else.
    """
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, (int, float))
        or not 0 < ttl < float("inf")
    ):
        raise InvalidArgument(f"{where}(ttl={ttl!r}): ttl must be a positive number of seconds")
    return float(ttl)


def store_claim_ttl(store: object) -> float:
    """The claim ttl ``store`` sets (its ``claim_ttl``), or :data:`DEFAULT_CLAIM_TTL` for a
    store that sets none: what a runtime given no ``claim_ttl`` of its own uses."""
    try:  # (not getattr(): no call)
        ttl = store.claim_ttl  # type: ignore[attr-defined]
    except AttributeError:
        ttl = None
    if type(ttl) is float and 0 < ttl < _INF:  # the usual store's
        return ttl
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < float("inf"):
        return DEFAULT_CLAIM_TTL
    return float(ttl)


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch (naive datetimes are read as UTC): a sortable key."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """The aware UTC datetime of :func:`to_micros`' key."""
    return _EPOCH + timedelta(microseconds=micros)


def take_claim(
    thread_id: str,
    run_id: str,
    current: Claim | None,
    last_token: int,
    now: datetime,
    ttl: float,
) -> Claim:
    """The claim ``run_id`` gets on ``thread_id`` at ``now``.

    A claim belongs to whoever holds its token (one runtime instance), not to a run id: while
    a claim is live, *every* other claim on the thread is refused, the same run's included
    (another process resuming or recovering that run must wait). The holder keeps its claim
    with :func:`renewed`; once the claim expired or was released anyone may take the thread,
    with a new, larger token, and the old token goes stale.

    Raises:
        ThreadBusy: a claim on the thread is live (``holder`` names its run,
            ``expires_at`` when it expires, ``expires_in`` how long that is from ``now``).
    """
    if current is not None and current.live(now):
        raise ThreadBusy(thread_id, holder=current.run_id, expires_at=current.expires_at,
                         now=now)
    return fresh_claim(run_id, last_token + 1, now, ttl)


def current_or_stale(thread_id: str, token: int, current: Claim | None) -> Claim:
    """The thread's current claim, when ``token`` is its token.

    Raises:
        StaleClaim: when ``token`` is not the current claim's (taken over, released, never
            issued). ``current`` is the current token, or ``None``.
    """
    if current is None or current.token != token:
        raise StaleClaim(thread_id, token, None if current is None else current.token)
    return current


def renewed(claim: Claim, now: datetime) -> Claim:
    """``claim`` extended by its ttl from ``now``."""
    return Claim(claim.run_id, claim.token, now + timedelta(seconds=claim.ttl), claim.ttl)


def check_commit(
    thread_id: object,
    run_id: object,
    checkpoints: object,
    events: object,
    run: object,
    *,
    normalise: bool = True,
) -> tuple[list[Any], list[tuple[int, Any]], dict[str, Any] | None]:
    """A fenced commit's parts, checked: every checkpoint is of ``run_id`` on ``thread_id``,
    every event is a JSON dict of ``run_id`` with an int ``seq``, the run record is of
    ``run_id``.

    Args:
        normalise: give the events in JSON form (a copy); ``False`` for a store that
            serialises them itself (and refuses what is not JSON), so they are converted once.

    Returns:
        The checkpoints, the events ``(seq, data)`` and the run record's JSON form.

    Raises:
        InvalidArgument: for any part that does not fit; nothing is written.
    """
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidArgument(f"commit(thread_id={thread_id!r}): a thread id is a non-empty str")
    if not isinstance(run_id, str) or not run_id:
        raise InvalidArgument(f"commit(run_id={run_id!r}): a run id is a non-empty str")
    cps = list(checkpoints) if isinstance(checkpoints, (list, tuple)) else None
    if cps is None or not all(isinstance(cp, Checkpoint) for cp in cps):
        raise InvalidArgument(f"commit(checkpoints={checkpoints!r}): pass a list of Checkpoint")
    for cp in cps:
        if cp.run_id != run_id or cp.thread_id != thread_id:
            raise InvalidArgument(
                f"commit: checkpoint {cp.id} is of run {cp.run_id} on thread {cp.thread_id!r}; "
                f"a commit under the claim on thread {thread_id!r} writes run {run_id} only"
            )
    if not isinstance(events, (list, tuple)):
        raise InvalidArgument(f"commit(events={events!r}): pass a list of events in wire form")
    normalised: list[tuple[int, Any]]
    if not normalise and type(events) is DumpedEvents:  # the runtime's, checked already
        normalised = [(e["seq"], e) for e in events]
    else:
        normalised = ([normalise_event(e) for e in events] if normalise
                      else [(event_seq(e), e) for e in events])
        for seq, data in normalised:
            if data.get("run_id", run_id) != run_id:
                raise InvalidArgument(f"commit: event seq={seq} is of run "
                                      f"{data.get('run_id')}, not {run_id}")
    record = None if run is None else normalise_run_record(run)
    if record is not None and record["run_id"] != run_id:
        raise InvalidArgument(f"commit: the run record is of run {record['run_id']}, not "
                              f"{run_id}")
    return cps, normalised, record


def check_lineage(
    thread_id: str,
    latest: str | None,
    checkpoints: Sequence[Any],
    events: Sequence[tuple[int, Mapping[str, Any]]] = (),
) -> None:
    """Seed 004's commit checks, against ``latest`` (the id of the thread's latest checkpoint,
    read in the write's own transaction): a write under a claim (``commit``, a fenced
    ``save``) goes on from the thread's latest checkpoint.

    - each new checkpoint (one that is not the latest itself, rewritten) that names a parent
      names the thread's latest, the checkpoint before it in the commit included; a
      checkpoint with no parent, the first of a thread, or one marked
      ``metadata["branch"]`` (time travel: it goes on from an earlier checkpoint on purpose)
      is not checked;
    - the events' ``seq`` strictly increase, and a ``checkpoint_saved`` event names a
      checkpoint of the commit or the thread's latest.

    Raises:
        ParentNotLatest: a checkpoint's parent is not the thread's latest.
        MalformedCommit: events out of order, or one naming another checkpoint.
    """
    before = latest
    written: set[str] = set()
    for cp in checkpoints:
        parent = cp.parent_id
        if (parent is not None and latest is not None and parent != latest
                and cp.id != latest and not cp.metadata.get("branch")):
            raise ParentNotLatest(thread_id, cp.id, parent, latest)
        latest = cp.id
        written.add(cp.id)
    previous: int | None = None
    for seq, data in events:
        if previous is not None and seq <= previous:
            raise MalformedCommit(thread_id, f"event seq={seq} follows seq={previous}; a "
                                  "commit's events are in strictly increasing seq order")
        previous = seq
        named = data.get("checkpoint_id") if data.get("type") == "checkpoint_saved" else None
        if named is not None and named not in written and named != before:
            raise MalformedCommit(
                thread_id, f"event seq={seq} says checkpoint {named!r} was saved, but the "
                f"commit writes {sorted(written)} and the thread's latest is {before!r}; "
                "commit the checkpoint with the event that names it")


def lineage_free(checkpoints: Sequence[Any],
                 events: Sequence[tuple[int, Mapping[str, Any]]] = ()) -> bool:
    """Whether :func:`check_lineage`'s answer does not depend on the thread's latest: no
    checkpoint names a parent (unmarked) and no event names a checkpoint the commit does not
    write (a store may then skip reading the latest)."""
    if any(cp.parent_id is not None and not cp.metadata.get("branch") for cp in checkpoints):
        return False
    written = {cp.id for cp in checkpoints}
    return not any(data.get("type") == "checkpoint_saved"
                   and data.get("checkpoint_id") not in written for _, data in events)


def check_token(token: object, where: str) -> int:
    """A fencing token argument, checked.

    Raises:
        InvalidArgument: when ``token`` is not an int.
    """
    if isinstance(token, bool) or not isinstance(token, int):
        raise InvalidArgument(f"{where}(token={token!r}): a fencing token is the int claim() "
                              "returned")
    return token


def fence_token(fence: tuple[str, int], thread_id: str, what: str) -> int:
    """The token of a save's ``fence=(thread_id, token)``, for a checkpoint on ``thread_id``.

    Raises:
        InvalidArgument: the fence is for another thread, or its token is not an int.
    """
    thread, token = fence
    if thread != thread_id:
        raise InvalidArgument(f"save({what}): the fence is for thread {thread!r}, the "
                              f"checkpoint is on thread {thread_id!r}")
    return check_token(token, "save")


def event_seq(event: object) -> int:
    """The ``seq`` of an event given in wire form (every store checks events this way).

    Raises:
        InvalidArgument: when the event is not a dict with an int ``seq`` >= 0.
    """
    if not isinstance(event, Mapping):
        raise InvalidArgument(f"record_events: event {event!r:.80} must be a dict in wire "
                              "form (event.model_dump(mode='json'))")
    seq = event.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise InvalidArgument(f"record_events: event has seq={seq!r}; every event needs an "
                              "int seq >= 0")
    return seq


def normalise_event(event: object) -> tuple[int, dict[str, Any]]:
    """An event's ``seq`` and its JSON form (a fresh copy).

    Raises:
        InvalidArgument: when the event is not a dict with an int ``seq``, or not JSON.
    """
    seq = event_seq(event)
    assert isinstance(event, Mapping)
    try:
        data = to_json_value(dict(event))
    except NotJSONError as exc:
        raise InvalidArgument(f"record_events: event seq={seq} is not JSON: {exc}") from None
    return seq, data


def check_after_seq(after_seq: object) -> int:
    """The first seq a reader of ``events(run_id, after_seq)`` wants.

    Raises:
        InvalidArgument: when ``after_seq`` is neither ``None`` nor an int.
    """
    if after_seq is None:
        return 0
    if isinstance(after_seq, bool) or not isinstance(after_seq, int):
        raise InvalidArgument(f"events(after_seq={after_seq!r}): after_seq must be an int or "
                              "None")
    return after_seq + 1


def check_before_seq(before_seq: object) -> int:
    """A ``compact_events`` bound, checked.

    Raises:
        InvalidArgument: when ``before_seq`` is not an int >= 0.
    """
    if isinstance(before_seq, bool) or not isinstance(before_seq, int) or before_seq < 0:
        raise InvalidArgument(f"compact_events(before_seq={before_seq!r}): before_seq must be "
                              "an int >= 0")
    return before_seq


def fork_target_exists(checkpoint_id: str, thread_id: str) -> ForkTargetExists:
    """The error for a fork of ``checkpoint_id`` into ``thread_id``, which already exists."""
    exc = ForkTargetExists(
        f"cannot fork checkpoint {checkpoint_id!r} into thread {thread_id!r}: the thread "
        "already exists and a fork only ever creates a new thread; pick another thread_id "
        "(or none, for a fresh one). Nothing was changed."
    )
    exc.thread_id = thread_id  # type: ignore[attr-defined]
    return exc


def events_compacted(run_id: str, earliest_seq: int) -> EventsCompacted:
    """The error for a read of run ``run_id``'s events before ``earliest_seq``."""
    exc = EventsCompacted(
        f"events of run {run_id} before seq {earliest_seq} were compacted away and cannot be "
        f"replayed; read from after_seq={earliest_seq - 1} (the earliest kept event) or later"
    )
    exc.earliest_seq = earliest_seq  # type: ignore[attr-defined]
    exc.run_id = run_id  # type: ignore[attr-defined]
    return exc


def normalise_run_record(record: object) -> dict[str, Any]:
    """A run record's JSON form (datetimes become ISO strings), a fresh copy.

    Raises:
        InvalidArgument: when the record is not a dict with a str ``run_id``, or not JSON.
    """
    if not isinstance(record, Mapping):
        raise InvalidArgument(f"record_run(record={record!r}): a run record is a dict")
    run_id = record.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise InvalidArgument(f"record_run: the record has run_id={run_id!r}; it needs a "
                              "non-empty str run_id")
    try:
        data: dict[str, Any] = to_json_value(dict(record))
    except NotJSONError as exc:
        raise InvalidArgument(f"record_run: the record of run {run_id} is not JSON: "
                              f"{exc}") from None
    return data


def artifact_bytes(run_id: str, name: str, data: object, media_type: object, *,
                   where: str = "put_artifact") -> bytes:
    """An artifact's content as bytes (``str`` is encoded as UTF-8), its ids checked as every
    id is (:func:`check_id`); ``where`` names the call in errors.

    Raises:
        InvalidArgument: for a bad run id, name, content or media type.
    """
    check_id(run_id, "run_id", where)
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"{where}({run_id!r}, name={name!r}): name must be a "
                              "non-empty str")
    if not isinstance(media_type, str) or not media_type:
        raise InvalidArgument(f"{where}({run_id!r}, {name!r}, media_type={media_type!r}): "
                              "media_type must be a non-empty str")
    check_id(name, "name", where)
    check_id(media_type, "media_type", where)
    if isinstance(data, str):
        try:
            return data.encode()
        except UnicodeEncodeError as exc:
            raise InvalidArgument(
                f"{where}({run_id!r}, {name!r}): the text contains a lone surrogate "
                f"({data[exc.start]!a} at index {exc.start}) and has no UTF-8 form; pass "
                "bytes, or text without lone surrogates") from None
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise InvalidArgument(f"{where}({run_id!r}, {name!r}): data must be bytes or str, "
                          f"got {type(data).__name__}")


def check_keep_last(keep_last: object) -> int:
    """A ``prune`` argument, checked.

    Raises:
        InvalidArgument: when ``keep_last`` is not an int >= 0.
    """
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
        raise InvalidArgument(f"prune(keep_last={keep_last!r}): keep_last must be an int >= 0")
    return keep_last


def unsupported_format(checkpoint_id: str, found: int) -> UnsupportedFormat:
    """The error for a checkpoint stored in format ``found``."""
    exc = UnsupportedFormat(
        f"checkpoint {checkpoint_id!r} was written in format version {found}; this build of "
        f"pytest-graphflow reads format version {FORMAT_VERSION} only. Read it with the "
        "pytest-graphflow version that wrote it."
    )
    exc.checkpoint_id = checkpoint_id  # type: ignore[attr-defined]
    exc.found = found  # type: ignore[attr-defined]
    exc.supported = FORMAT_VERSION  # type: ignore[attr-defined]
    return exc


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    kinds: dict[type, str] = {str: "str", list: "list", dict: "dict"}
    return kinds.get(type(value), type(value).__name__)


def fork_patch(checkpoint_id: str, patch: Mapping[str, Any] | None) -> dict[str, Any]:
    """A fork's ``patch_state`` in the JSON form a store writes, applied after cloning.

    Whether the patch fits the state is not a store's question: ``GraphRuntime.afork``
    checks it against the graph's state schema before any store sees the call.

    Raises:
        InvalidArgument: a key that is not a str, or a value with no JSON form.
    """
    out: dict[str, Any] = {}
    for key, value in (patch or {}).items():
        if not isinstance(key, str):
            raise InvalidArgument(f"fork({checkpoint_id!r}, patch_state=...): key {key!r} is "
                                  "not a str; state keys are str")
        out[key] = _patch_value(checkpoint_id, key, value)
    return out


def _patch_value(checkpoint_id: str, key: str, value: Any) -> Any:
    """One ``patch_state`` value in JSON form, or ``InvalidArgument`` naming the key."""
    try:
        return to_json_value(value)
    except NotJSONError as exc:
        raise InvalidArgument(f"fork({checkpoint_id!r}, patch_state=...): the value of "
                              f"{key!r} is not JSON: {exc}; pass a value with a JSON "
                              "form") from None


def checked_patch(
    checkpoint_id: str, state: Mapping[str, Any], patch: Mapping[str, Any]
) -> dict[str, Any]:
    """A fork's ``patch_state`` in JSON form, checked against the source state (what
    ``GraphRuntime.afork`` checks when it knows no graph of the checkpoint).

    Each key must be a key of ``state``; its value a JSON value of the kind the key holds
    (``None`` where it holds ``None``, anything JSON where it holds ``None``).

    Raises:
        InvalidArgument: naming the key and the fix.
    """
    out: dict[str, Any] = {}
    for key, value in patch.items():
        if not isinstance(key, str) or key not in state:
            raise InvalidArgument(
                f"fork({checkpoint_id!r}, patch_state=...): key {key!r} is not a state key of "
                f"the checkpoint; its keys are {sorted(state)}"
            )
        new = _patch_value(checkpoint_id, key, value)
        old = state[key]
        if old is not None and new is not None and _kind(old) != _kind(new):
            raise InvalidArgument(
                f"fork({checkpoint_id!r}, patch_state=...): {key!r} holds a {_kind(old)}, "
                f"not a {_kind(new)}; patch it with a value of the same kind"
            )
        out[key] = new
    return out
