"""The runtime's plain step, committed with what the store knows already (issue 29).

A step of a run over a SQLite store commits one checkpoint and the events that report it
(:class:`~..._records._json.DumpedEvents`) under the claim its previous commit checked. When
this connection's facts about the file (:mod:`._known`) are of that thread, run and token,
the commit's checks come down to comparing with them: the checkpoint is of the run and
thread whose ids were checked, the events are the runtime's own (each only serialised, as
:func:`~.._wire.dumped_row` does, or written already: ``DumpedEvents.text``), and seed
004's lineage checks (:func:`~.._claims.check_lineage`) hold against the facts' latest
checkpoint. Anything else — a NaN or an infinity in an event, a parent that is not the
latest, events out of order, a run record, compacted events, a rewritten id — is left to the
general commit, which reads and checks it all and raises what it raises.
"""

from __future__ import annotations

import json

from pydantic_core import to_json

from ..._records._checkpoint import Checkpoint
from ..._records._json import DumpedEvents
from ._known import Known
from ._tail import Piece

__all__ = ["plain_rows"]

def plain_rows(facts: Known | None, thread_id: object, token: object, run_id: object,
               checkpoints: object, events: object) -> tuple[Checkpoint, Piece] | None:
    """The checkpoint and the events (as the log keeps them) of a commit that is the
    runtime's plain step under what ``facts`` know (see the module); ``None`` when it is
    not, or when the general commit must decide."""
    if (facts is None or type(events) is not DumpedEvents or type(checkpoints) is not list
            or len(checkpoints) != 1 or type(token) is not int or token != facts.token
            or type(thread_id) is not str or thread_id != facts.thread_id
            or type(run_id) is not str or run_id != facts.run_id or facts.earliest):
        return None
    cp = checkpoints[0]
    if type(cp) is not Checkpoint or cp.run_id != run_id or cp.thread_id != thread_id \
            or cp.id in facts.live:
        return None
    latest = facts.latest
    parent = cp.parent_id
    if parent is not None and latest is not None and parent != latest \
            and cp.id != latest and not cp.metadata.get("branch"):
        return None  # the general commit raises ParentNotLatest
    # The events as the log keeps them (:class:`~._tail.Piece`), each serialised as
    # :func:`~.._wire.dumped_row` does and the keys as ``json.dumps`` writes them; none when
    # one holds a NaN or an infinity, or they break seed 004's order or name another
    # checkpoint.
    cid = cp.id
    keys = ""  # ", [seq, type]" an event (one string grown, not a list joined: ~3 k
    previous = -1  # instructions fewer a step with the Piece made below)
    for event in events:
        seq, kind = event["seq"], event["type"]
        if type(seq) is not int or seq <= previous or type(kind) is not str or (
                kind == "checkpoint_saved" and event.get("checkpoint_id") not in (cid, latest)):
            return None
        previous = seq
        try:
            quoted = _QUOTED[kind]
        except KeyError:
            quoted = json.dumps(kind)
            if len(_QUOTED) < 64:
                _QUOTED[kind] = quoted
        keys = f"{keys}, [{seq}, {quoted}]"
    if not keys:
        return None
    # The events' texts as the runtime wrote them (``DumpedEvents.text``: each as
    # dumped_row serialises it, one a line), or all the events in one serialisation (one
    # call, not one an event), then cut where one ends and the next begins: each is an
    # object, so the list's text is ``[`` the objects joined by ``,`` ``]``, and there are
    # exactly ``len(events) - 1`` places where ``},{`` occurs at its top level. When it
    # occurs anywhere else too (a nested list of objects, a string), the count is higher,
    # and each event is serialised alone. The same bytes either way
    # (tests/stores/test_sqlite_plain_commit.py).
    text = events.text
    if text is None:
        data = to_json(events[:], inf_nan_mode="constants")  # (a list: not the subclass)
        # A NaN or an infinity: the bytes "N" (78) and "I" (73) are looked for first, as
        # neither is in a plain step's events. An int is found with one memchr; ``bytes in
        # bytes`` first tries its argument as an int and formats the TypeError it then
        # drops (~1.7 k instructions each).
        if (78 in data and b"NaN" in data) or (73 in data and b"Infinity" in data):
            return None
        if data.count(b"},{") == len(events) - 1:
            data = data[1:-1].replace(b"},{", b"}\n{")
        else:
            data = b"\n".join([to_json(event) for event in events])
        text = data.decode()
    # (the NamedTuple made by tuple.__new__: its generated __new__ is a Python frame)
    return cp, _tuple_new(Piece, (f"[{keys[2:]}]", text, previous))


_QUOTED: dict[str, str] = {}
"""Event types as JSON strings (the runtime's few)."""

_tuple_new = tuple.__new__
