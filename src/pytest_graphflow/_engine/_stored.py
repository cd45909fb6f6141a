"""The events of a lean step a durable store commits, in the form the store is given them
(issue 29).

On a store that commits each step's checkpoint with its events (``LegSpec.store_only``:
``invoke`` on SQLite or PostgreSQL, nobody else reading the events), the lean step commits
its step itself and goes on to the next (``LeanSteps.run_from``). The store gets the step's
events as :class:`~.._records._json.DumpedEvents`: what ``model_dump(mode="json")`` of each
built event gives, dict for dict and key for key. Built that way, a step made its events
twice (a model per event from :class:`~._results.LazyEvent`, then its dump); here the dumps
are written out at once for the four events of a plain step — ``node_start``, ``node_end``,
an ``edge_transition`` per target, ``checkpoint_saved`` — in the key order of the built
event's ``__dict__`` (the order its dump follows). What is not plain goes the long way: a
``node_end`` whose patch holds anything but strings, ints, booleans and ``None`` (a dump
converts the rest), and the ``run_end`` (once a run). ``tests/runtime/test_stored_events.py``
holds each dump to the long way's.

A plain step's events also come as the JSON text the store keeps (``DumpedEvents.text``,
one event a line), written from the same values as the dicts: ``to_json`` of the four
dicts and its cut into lines, in the store, was ~46 k of a SQLite step's ~410 k
instructions; their text here is ~23 k. Each string goes in between quotes as it is, which
is ``to_json``'s text when JSON escapes nothing in it: printable ASCII but ``"`` and
``\\``. The step's strings are checked at once (the times need no check: pydantic writes a
``datetime`` in digits and ``-:.+TZ``); when one needs escaping, the ``node_end`` is
serialised by ``to_json`` if only its patch's strings do, and the step has no text
otherwise. An int is written as ``str`` writes it, as ``to_json`` does (``str`` refuses
ints of more digits than ``sys.get_int_max_str_digits()``: no text).
``tests/properties/test_stored_text.py`` holds the text to ``to_json``'s.
"""

from __future__ import annotations

from datetime import datetime
from json.encoder import encode_basestring_ascii
from typing import Any

from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from .._records._events import NodeEnd, RunEnd
from .._records._json import DumpedEvents, jcopy
from ._lazy import _entry

__all__ = ["StepTimes", "stored_step_events"]

class StepTimes:
    """The JSON form of the events' time (what a dump makes of a ``datetime``), the last one
    kept: a virtual clock gives a step's times, and the next step's, as one object
    (:func:`stored_step_events` reads and fills it inline)."""

    __slots__ = ("moment", "text")

    def __init__(self) -> None:
        self.moment: object = None
        self.text: Any = None


def _dumped(cls: type[Any], fields: dict[str, Any]) -> dict[str, Any]:
    """The long way: the event built from ``fields`` (as the recording builds it), dumped."""
    dumped: dict[str, Any] = _entry(cls, fields).build().model_dump(mode="json")
    return dumped


def stored_step_events(
    times: StepTimes, run_id: str, now: datetime, seq: int, step: int, node: str,
    task_id: str, patch: dict[str, Any] | None, started_at: datetime, finished_at: datetime,
    targets: Any, checkpoint_id: str | None, finished: bool, state: dict[str, Any] | None,
) -> DumpedEvents:
    """The dumped events of one committed lean step, numbered from ``seq`` and stamped
    ``now`` (the events :func:`~._lazy.lean_step_events` leaves unbuilt, built and dumped),
    with their JSON text when the step is plain (see the module); ``state``: the run's
    state, when the step ended the run."""
    # The times' cache, looked at and filled inline (under a virtual clock the three are
    # one object; under a real one, a durable step's end is its events' time).
    if now is times.moment:
        time = times.text
    else:
        times.text = time = to_jsonable_python(now)
        times.moment = now
    # (``out += (event,)``, not ``append``: one call fewer an event)
    out = DumpedEvents()
    out += ({"node": node, "task_id": task_id, "type": "node_start", "attempt": 1,
             "time": time, "seq": seq, "run_id": run_id, "step": step},)
    # The texts' parts: what each event of the step starts with, its run and step; the
    # patch's text and its strings (keys and values); ``sure``: every value is one whose
    # text here is to_json's (see the module).
    head = f'{{"node":"{node}","task_id":"{task_id}","type":"'
    of = f'"run_id":"{run_id}","step":{step}'
    sure = type(node) is str and type(task_id) is str and type(run_id) is str
    body = "null" if patch is None else "{}"
    words = ""
    plain = True
    if patch:
        body = ""
        for key in patch:  # (not items(): one call fewer)
            value = patch[key]
            kind = type(value)
            if kind is str:
                body = f'{body},"{key}":"{value}"'
                words = f"{words}{key}{value}"
            elif kind is int:
                try:
                    body = f'{body},"{key}":{value}'
                except ValueError:  # more digits than str() writes (to_json has no limit)
                    sure = False
                words = f"{words}{key}"
            elif kind is bool or value is None:
                body = f'{body},"{key}":{_WORDS[value]}'
                words = f"{words}{key}"
            else:
                plain = False
                break
            sure = sure and type(key) is str
        body = f"{{{body[1:]}}}"
    if plain:
        begun = time if started_at is now else to_jsonable_python(started_at)
        ended = time if finished_at is now else to_jsonable_python(finished_at)
        out += ({"node": node, "task_id": task_id, "type": "node_end",
                 "patch": dict(patch) if patch else patch, "replayed": False,
                 "attempt": 1, "goto": None, "time": time, "seq": seq + 1,
                 "run_id": run_id, "step": step, "started_at": begun, "finished_at": ended},)
    else:
        out += (_dumped(NodeEnd, {
            "node": node, "task_id": task_id, "patch": jcopy(patch), "replayed": False,
            "attempt": 1, "started_at": started_at, "finished_at": finished_at, "goto": None,
            "seq": seq + 1, "run_id": run_id, "step": step, "time": now}),)
    first = seq
    seq += 2
    rest = names = ""  # the events after node_end: their text, and their strings
    for target in targets:
        out += ({"node": node, "task_id": task_id, "type": "edge_transition",
                 "time": time, "seq": seq, "run_id": run_id, "step": step,
                 "source": node, "target": target},)
        rest = (f'{rest}\n{head}edge_transition","time":"{time}","seq":{seq},{of},'
                f'"source":"{node}","target":"{target}"}}')
        names = f"{names}{target}"
        sure = sure and type(target) is str
        seq += 1
    if checkpoint_id is not None:
        out += ({"node": None, "task_id": None, "type": "checkpoint_saved", "time": time,
                 "seq": seq, "run_id": run_id, "step": step,
                 "checkpoint_id": checkpoint_id},)
        rest = (f'{rest}\n{{"node":null,"task_id":null,"type":"checkpoint_saved",'
                f'"time":"{time}","seq":{seq},{of},"checkpoint_id":"{checkpoint_id}"}}')
        names = f"{names}{checkpoint_id}"
        sure = sure and type(checkpoint_id) is str
        seq += 1
    if finished:
        out += (_dumped(RunEnd, {"status": "completed", "state": jcopy(state), "seq": seq,
                                 "run_id": run_id, "step": step, "time": now}),)
    elif plain and sure:
        strings = f"{run_id}{node}{task_id}{names}{words}"
        if _quoted(strings) == f'"{strings}"':  # none needs escaping
            second = (f'{head}node_end","patch":{body},"replayed":false,"attempt":1,'
                      f'"goto":null,"time":"{time}","seq":{first + 1},{of},'
                      f'"started_at":"{begun}","finished_at":"{ended}"}}')
        elif words and _quoted(strings := f"{run_id}{node}{task_id}{names}") \
                == f'"{strings}"':  # only the patch's do: its node_end serialised alone
            try:
                second = to_json(out[1], inf_nan_mode="constants").decode()  # (as
                # dumped_row writes it; it holds no float, so no NaN)
            except PydanticSerializationError:  # a lone surrogate: the store refuses it
                return out
        else:
            return out
        out.text = (f'{head}node_start","attempt":1,"time":"{time}","seq":{first},{of}}}\n'
                    f"{second}{rest}")
    return out


_quoted = encode_basestring_ascii
"""A string as a JSON string of ASCII: exactly the string between quotes when it holds only
printable ASCII characters other than ``"`` and ``\\`` (which ``to_json`` writes as they
are)."""

_WORDS = {True: "true", False: "false", None: "null"}
"""The JSON of ``True``, ``False`` and ``None``."""
