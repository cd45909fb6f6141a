"""The runtime's plain step, checked with what the store checked already (issue 29).

A step of a run over a PostgreSQL store commits one checkpoint and the events that report it
(:class:`~..._records._json.DumpedEvents`), no run record, under the claim whose thread and
run ids its previous commit checked. When the ids are those, the commit's checks come down
to comparing with them: the checkpoint is a :class:`Checkpoint` of that run and thread whose
run, thread, graph and tenant ids the store checked (``_checked``'s memo), its own id and node
id pass :func:`~..._records._checks.check_id`'s common case, the events' seqs strictly
increase and a ``checkpoint_saved`` event names the checkpoint or its parent. The events are
serialised together, each as :func:`~.._wire.dumped_row` does (or come written so:
``DumpedEvents.text``), into the row the general commit builds (:func:`~._events.batch`):
the same text. Anything else — a NaN or an infinity in an event, a run record, several
checkpoints, an event naming another checkpoint, an id that is not plainly printable — is
left to the general commit, which checks it all and raises what it raises.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json

from ..._records._checkpoint import Checkpoint
from ..._records._checks import MAX_ID_LENGTH
from ..._records._json import DumpedEvents
from ._events import Batch

__all__ = ["plain_step"]


def plain_step(ids: tuple[str, str] | None, checked_run: tuple[Any, ...], thread_id: object,
               token: object, run_id: object, checkpoints: object, events: object,
               run: object) -> tuple[Checkpoint, Batch, bool] | None:
    """The checkpoint, the events' row and whether the lineage is free of the thread's latest
    (:func:`~.._claims.lineage_free`) of a commit that is the runtime's plain step, when
    ``ids`` are the ``(thread_id, run_id)`` the store's last general commit checked and
    ``checked_run`` the run ids ``_checked`` checked; ``None`` when it is not one (the general
    commit decides)."""
    if (ids is None or run is not None or type(events) is not DumpedEvents
            or type(checkpoints) is not list or len(checkpoints) != 1
            or type(token) is not int or ids[0] != thread_id or ids[1] != run_id
            or type(thread_id) is not str or type(run_id) is not str or not events):
        return None
    cp = checkpoints[0]
    if type(cp) is not Checkpoint or cp.run_id != run_id or cp.thread_id != thread_id \
            or (run_id, thread_id, cp.graph_id, cp.tenant_id) != checked_run:
        return None
    cid, node = cp.id, cp.node_id
    if not (type(cid) is str and 0 < len(cid) <= MAX_ID_LENGTH and cid.isprintable()) or (
            node is not None and not (type(node) is str and 0 < len(node) <= MAX_ID_LENGTH
                                      and node.isprintable())):
        return None  # the general commit's check_id names the problem
    parent = cp.parent_id
    free = parent is None or bool(cp.metadata.get("branch"))
    seqs: list[str] = []
    texts: list[bytes] = []
    written = events.text  # the events' texts, when the runtime wrote them (one a line)
    previous = -1
    for event in events:
        try:
            seq, kind = event["seq"], event["type"]  # every event the runtime dumps has both
        except KeyError:
            return None
        if type(seq) is not int or seq <= previous:
            return None
        previous = seq
        if kind == "checkpoint_saved":
            named = event.get("checkpoint_id")
            if named != cid:
                if named is not None and named != parent:
                    return None  # the general commit judges it against the thread's latest
                free = False
        seqs += (str(seq),)  # no call a seq
        if written is None:
            texts += (to_json(event, inf_nan_mode="constants"),)  # no comprehension's frame
    if written is None:
        text = b"\n".join(texts)
        if b"NaN" in text or b"Infinity" in text:
            return None  # a real NaN is refused, a word in a text is not: the general's
        written = text.decode()
    first = events[0]["seq"]
    return cp, (first, previous, ",".join(seqs), written), free
