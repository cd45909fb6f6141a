"""``GraphRuntime.astep``: one superstep per call, and what cancelling a step means.

Seed 004 (``Cancelled``): "interrupting the thread driving CompiledGraph.step ... Every task
was interrupted and joined. ... A step keeps nothing from the cancelled superstep, and returns
this with the interrupt flag set." In Python:

- the cancellation is the caller's: its cancel scope (anyio, trio) or ``task.cancel()``
  (asyncio) while ``astep`` runs; every task of the superstep is cancelled and joined;
- nothing of that superstep is kept: the run's new checkpoint (status ``cancelled``) lists the
  superstep's tasks and none of them as completed, and no event of the batch is reported, so
  the next step runs the whole superstep again;
- ``astep`` *returns* the result (status ``cancelled``, ``error`` a ``Cancelled``) with the
  cancellation still requested — Python's interrupt flag: under anyio and trio the caller's
  scope stays cancelled (its next ``await`` raises); under plain asyncio the task is cancelled
  again, so its next ``await`` raises ``CancelledError`` (``task.cancelling()`` unchanged);
- the sync ``step`` is interrupted by ``KeyboardInterrupt`` (Ctrl-C in the thread driving it):
  the superstep is cancelled the same way and the ``KeyboardInterrupt`` goes on (a thread has
  no interrupt flag to set in Python; swallowing Ctrl-C would hide it).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import sniffio
from pydantic import BaseModel

from .._graph._builder import CompiledGraph
from .._graph._node import Resume
from ..errors import InvalidArgument
from ._host import LegHost
from ._legs import Legs
from ._options import RunOptions, check_graph, run_options
from ._results import GraphResult
from ._run_state import STEPPING
from ._stream import RunStream, drain

__all__ = ["run_step"]


async def run_step(
    rt: LegHost,
    legs: Legs,
    resume_stream: Callable[..., RunStream],
    graph: CompiledGraph,
    input: Mapping[str, Any] | BaseModel | None,
    run_id: str | None,
    resume: Resume | None,
    options: RunOptions,
) -> GraphResult[Any]:
    """Run one superstep of ``graph`` on ``rt`` (see ``GraphRuntime.astep``): a new leg from
    ``legs``, or the next of ``run_id`` through ``resume_stream``."""
    check_graph(graph)
    options["interrupt_after"] = list(graph.nodes)
    stream: RunStream
    if run_id is None:
        if resume is not None:
            raise InvalidArgument("step(resume=...) needs the run_id of the run to continue")
        opts = run_options(rt, options)
        opts["record_events"] = False
        stream = RunStream(lambda: legs.prepare_new(graph, input, None, opts), "events")
    else:
        if input is not None:
            raise InvalidArgument(f"step(run_id={run_id!r}) continues a run: pass no input "
                                  "(change its state with update_state)")
        stream = resume_stream(run_id, resume, graph=graph, **options)
        stream._record_events = False
    token = STEPPING.set(True)
    try:
        return await drain(stream)
    except anyio.get_cancelled_exc_class():
        runner = stream.runner
        if runner is None or not runner.done or runner.status != "cancelled":
            raise  # cancelled before the run began: nothing to report
        _keep_cancelled()
        return stream.result()
    finally:
        STEPPING.reset(token)


def _keep_cancelled() -> None:
    """Leave the caller's cancellation requested after returning (the "interrupt flag")."""
    if anyio.current_effective_deadline() == -math.inf:
        return  # a cancelled anyio/trio scope: it cancels the caller's next await itself
    if sniffio.current_async_library() == "asyncio":
        task = asyncio.current_task()
        if task is not None:  # plain task.cancel(): deliver it again, counted once
            task.uncancel()
            task.cancel()
