"""Fault injection: ``FaultyStore`` (``_store``), a wrapper that injects failures into any
store, its fault values (``_faults``), rules API (``_rules``) and call machinery (``_calls``).
May import the top of ``_stores`` (protocol, features, the in-memory store),
``_records``, ``_time`` and :mod:`pytest_graphflow.errors`.
"""
