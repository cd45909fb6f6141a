"""Whole-run tools: run graphs on deterministic runtimes and judge the runs.

Owns the drivers (``_drive``, ``_crashrun``, ``_compare``, ``_pairs``, ``_deadlock``),
``explore()``, the determinism, equivalence, clock-start and crash-recovery checks, run
recording (``_recording``) and the cross-process checks with their worker pool (``_xprocess``,
``_pool``, ``_worker``). The one room that may import ``checks`` and ``strategies`` (and
``.._progress``), besides the layers below ``_properties``; never ``conformance``.
"""
