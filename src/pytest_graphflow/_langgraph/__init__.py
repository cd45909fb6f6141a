"""The LangGraph bridge: a user's own LangGraph graph under our deterministic machinery.

Owns ``LangGraphHarness`` (runs a compiled graph with LangGraph itself on a seeded
virtual-time loop and maps what it reports to our events), ``FaultySaver`` (``FaultyStore``'s
rules over a LangGraph checkpoint saver), the id/randomness seam, and the properties and
reducer laws for LangGraph graphs. May import ``_properties``, ``_assert``, ``_engine``,
``_graph``, ``_stores``, ``_time``, ``_records`` and :mod:`pytest_graphflow.errors`, and
LangGraph (the ``langgraph`` extra); only the public front
:mod:`pytest_graphflow.langgraph` and the plugin's ``graph_runtime.langgraph`` import it.
"""
