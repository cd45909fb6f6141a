"""Deterministic time and scheduling.

Owns the clocks (``RealClock``, ``VirtualClock``), the wall-clock patch that makes
``datetime.now()``/``time.time()`` virtual in node code, the owned virtual event loop, the
seeded baton scheduler of parallel tasks and the seeded RNG. May import ``_records`` and
:mod:`pytest_graphflow.errors`.
"""
