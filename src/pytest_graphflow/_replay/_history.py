"""A recorded run as a readable, versioned JSON file: the input of replays and upgrade checks.

A :class:`History` holds everything needed to re-run one run against other code and to ask
whether its checkpoints can resume under another graph: the events of every leg, the
checkpoints, the seed, the virtual clock's start, the state the run started from, the answers
given at each resume, and the contract of the graph it ran under (node effect classes, joins,
state types). Files are JSON with ``"format": "graphflow-history"`` and a ``format_version``;
a file of another version is refused with a clear :class:`UnsupportedFormat`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._engine._results import RunLeg
from .._engine._upgrade import GraphContract
from .._graph._builder import CompiledGraph
from .._records._checkpoint import FORMAT_VERSION, Checkpoint
from .._records._events import EventBase, parse_event
from .._records._json import MAX_DEPTH, nests_deeper
from ..errors import InvalidHistory, UnsupportedFormat

__all__ = ["HISTORY_FORMAT_VERSION", "History", "load_history"]

HISTORY_FORMAT_VERSION = 1
"""The history file format this build writes and reads."""

_MAX_HISTORY_DEPTH = MAX_DEPTH + 10
"""The deepest nesting a history file may have: its values' :data:`MAX_DEPTH` levels a few
levels down (a run whose state nests that deep records a history 103 levels deep)."""

SUFFIX = ".history.json"
"""What history files' names end with (``--graphflow-replay`` collects these)."""


class History(BaseModel):
    """One recorded run: what a replay re-runs and what ``check_upgrade`` checks.

    Build one with :meth:`from_legs` (the plugin's ``--graphflow-record`` does), from a
    store with :func:`export_history` (``graphflow export``), or read a file with
    :func:`load_history`.

    Attributes:
        format: always ``"graphflow-history"``.
        format_version: the file format's version (:data:`HISTORY_FORMAT_VERSION`).
        graph_id: the graph's name.
        revision: the graph's revision when the run was recorded.
        graph_ref: where to import the graph from (``"module:attr"``, a graph or a factory),
            when known.
        graph: the recorded graph's contract (effect classes, joins, state types), or ``None``.
        run_id: the run.
        thread_id: its thread.
        seed: the runtime's seed, or ``None``.
        clock_start: the virtual time the run started at; ``None`` when it ran on the real
            clock (a replay then compares everything but times).
        checkpoint_policy: the policy the run ran under, when a runtime overrode the graph's.
        initial_state: the state the run started from (JSON form), or ``None`` if unknown.
        resumes: the answers given at each resume, in order (one entry per leg after the
            first; ``{}`` for a resume without answers).
        source: where it was recorded (a test's node id, a store file).
        events: every event of every leg, in order (wire form).
        checkpoints: every checkpoint of the run, oldest first (wire form).
    """

    model_config = ConfigDict(extra="forbid")

    format: Literal["graphflow-history"] = "graphflow-history"
    format_version: int = HISTORY_FORMAT_VERSION
    graph_id: str
    revision: str
    graph_ref: str | None = None
    graph: dict[str, Any] | None = None
    run_id: str
    thread_id: str
    seed: int | None = None
    clock_start: datetime | None = None
    checkpoint_policy: Literal["every_step", "on_halt", "never"] | None = None
    initial_state: dict[str, Any] | None = None
    resumes: list[dict[str, Any]] = Field(default_factory=list)
    source: str | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)
    checkpoints: list[dict[str, Any]] = Field(default_factory=list)

    # ------------------------------------------------------------------ reading

    def parsed_events(self) -> list[EventBase]:
        """The events as event models.

        Raises:
            InvalidHistory: naming the first event that does not parse.
        """
        out: list[EventBase] = []
        for n, data in enumerate(self.events):
            try:
                out.append(parse_event(data))
            except ValidationError as exc:
                raise InvalidHistory(
                    f"history of run {self.run_id}: event {n} is not a graphflow event "
                    f"({_first_error(exc)})") from None
        return out

    def parsed_checkpoints(self) -> list[Checkpoint]:
        """The checkpoints as :class:`Checkpoint` models, oldest first.

        Raises:
            UnsupportedFormat: a checkpoint of another checkpoint format version.
            InvalidHistory: a checkpoint that does not parse.
        """
        out: list[Checkpoint] = []
        for n, data in enumerate(self.checkpoints):
            version = data.get("format_version", FORMAT_VERSION)
            if version != FORMAT_VERSION:
                raise UnsupportedFormat(
                    f"history of run {self.run_id}: checkpoint {data.get('id', n)!r} has "
                    f"format_version {version}; this build reads {FORMAT_VERSION}")
            try:
                out.append(Checkpoint.model_validate(data))
            except ValidationError as exc:
                raise InvalidHistory(
                    f"history of run {self.run_id}: checkpoint {n} is not a graphflow "
                    f"checkpoint ({_first_error(exc)})") from None
        return out

    def contract(self) -> GraphContract | None:
        """The recorded graph's contract, if the history has it."""
        return None if self.graph is None else GraphContract.from_dict(self.graph)

    def last_checkpoint(self) -> Checkpoint | None:
        """The run's last checkpoint (where a resume by run id would start), or ``None``."""
        found = self.parsed_checkpoints()
        return found[-1] if found else None

    @property
    def status(self) -> str:
        """The status of the recorded run's last ``run_end`` (``"running"`` without one)."""
        for data in reversed(self.events):
            if data.get("type") == "run_end":
                return str(data.get("status"))
        return "running"

    # ------------------------------------------------------------------ writing

    def dumps(self) -> str:
        """The file's text: indented JSON, keys in a fixed order, one trailing newline."""
        return json.dumps(self.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n"

    def save(self, path: str | Path) -> Path:
        """Write the history to ``path`` (folders are created); return the path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.dumps(), encoding="utf-8")
        return target

    # ------------------------------------------------------------------ building

    @classmethod
    def from_legs(
        cls,
        legs: Iterable[RunLeg],
        checkpoints: Iterable[Checkpoint],
        *,
        clock_start: datetime | None = None,
        checkpoint_policy: str | None = None,
        graph_ref: str | None = None,
        source: str | None = None,
    ) -> History:
        """A history from the legs of one run, as a runtime's ``on_leg`` observer saw them.

        Args:
            legs: the run's legs, in order (the first one fresh).
            checkpoints: the run's checkpoints, oldest first.
            clock_start: the virtual clock's time at the start; default: the first event's.
            checkpoint_policy: the policy a runtime imposed, if any.
            graph_ref: ``"module:attr"`` of the graph, if known.
            source: where it was recorded.

        Raises:
            InvalidArgument: no legs, or legs of several runs.
        """
        from ..errors import InvalidArgument

        legs = list(legs)
        if not legs or legs[0].resumed or len({leg.run_id for leg in legs}) != 1:
            raise InvalidArgument("History.from_legs() needs the legs of one run, starting "
                                  "with its fresh first leg")
        events = [e.model_dump(mode="json") for leg in legs for e in leg.events]
        first = legs[0]
        start = next((e for e in first.events if e.type == "run_start"),  # type: ignore[attr-defined]
                     None)
        graph = first.graph
        resumes: list[dict[str, Any]] = []
        before: dict[str, Any] = {}
        for leg in legs[1:]:
            resumes.append({k: v for k, v in leg.answers.items() if k not in before})
            before = dict(leg.answers)
        return cls(
            graph_id=graph.graph_id, revision=graph.revision, graph_ref=graph_ref,
            graph=GraphContract.of(graph).as_dict(), run_id=first.run_id,
            thread_id=getattr(start, "thread_id", f"thread-{first.run_id[4:]}"),
            seed=first.seed,
            clock_start=clock_start if clock_start is not None else (
                start.time if start is not None else None),
            checkpoint_policy=checkpoint_policy,
            initial_state=first.initial_state, resumes=resumes, source=source,
            events=events, checkpoints=[c.model_dump(mode="json") for c in checkpoints],
        )


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    err = errors[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    return f"{where}: {err.get('msg')}" if where else str(err.get("msg"))


def load_history(source: str | Path | dict[str, Any]) -> History:
    """Read a history file (or its parsed JSON).

    Raises:
        UnsupportedFormat: the file is of another ``format_version`` (older or newer): it
            names both versions and what to do.
        InvalidHistory: the file is not a graphflow history (not UTF-8, not JSON, nested too
            deeply, fields missing or malformed).
    """
    name = "<dict>"
    if isinstance(source, dict):
        data: Any = source
    else:
        path = Path(source)
        name = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidHistory(f"history file {name}: cannot read it ({exc})") from None
        except UnicodeDecodeError as exc:
            raise InvalidHistory(
                f"history file {name} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
                f"offset {exc.start}); history files are UTF-8 JSON: record it again with "
                "--graphflow-record or graphflow export") from None
        too_deep = InvalidHistory(
            f"history file {name} nests too deeply to be a history (lists and objects "
            "inside each other beyond what JSON readers follow; a history's values nest "
            f"at most {MAX_DEPTH} levels)")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidHistory(f"history file {name} is not JSON ({exc})") from None
        except RecursionError:
            raise too_deep from None
        # Whatever recursion limit this process runs with (a raised one parses far deeper).
        if text.count("[") + text.count("{") > _MAX_HISTORY_DEPTH \
                and nests_deeper(data, _MAX_HISTORY_DEPTH):
            raise too_deep
    if not isinstance(data, dict) or data.get("format") != "graphflow-history":
        raise InvalidHistory(
            f"history file {name} is not a graphflow history (it needs \"format\": "
            "\"graphflow-history\"); record one with --graphflow-record or graphflow export")
    version = data.get("format_version")
    if version != HISTORY_FORMAT_VERSION:
        if isinstance(version, int) and not isinstance(version, bool) \
                and version > HISTORY_FORMAT_VERSION:
            hint = "it was written by a newer pytest-graphflow: upgrade to read it"
        else:
            hint = ("it was written by an older pytest-graphflow: record it again (or export "
                    "it again from the store) with this version")
        raise UnsupportedFormat(
            f"history file {name} has format_version {version!r}; this build reads "
            f"{HISTORY_FORMAT_VERSION}: {hint}")
    try:
        history = History.model_validate(data)
    except ValidationError as exc:
        raise InvalidHistory(f"history file {name} is malformed: {_first_error(exc)}") from None
    try:  # everything is read now, so a bad event or checkpoint names the file
        history.parsed_events()
        history.parsed_checkpoints()
    except (InvalidHistory, UnsupportedFormat) as exc:
        raise type(exc)(f"history file {name}: {exc}") from None
    return history


def contract_of(graph: CompiledGraph) -> dict[str, Any]:
    """The JSON contract of ``graph`` (what :attr:`History.graph` holds)."""
    return GraphContract.of(graph).as_dict()
