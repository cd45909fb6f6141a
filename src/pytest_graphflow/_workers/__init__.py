"""Workers: processes that take queued runs from a shared store and run them.

Owns ``Worker``. May import ``_engine``, ``_graph``, ``_stores``, ``_time``, ``_records`` and
:mod:`pytest_graphflow.errors`.
"""
