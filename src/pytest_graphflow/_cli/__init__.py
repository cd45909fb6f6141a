"""The ``graphflow`` command: runs, events and checkpoints of a store; diagrams of a graph.

May import ``_engine``, ``_graph``, ``_stores``, ``_records``, ``_assert`` and
:mod:`pytest_graphflow.errors`; nothing imports it but its console-script entry point.
"""
