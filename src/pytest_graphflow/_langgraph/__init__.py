"""The LangGraph bridge: run a user's own LangGraph graph under our deterministic machinery.

Needs the ``langgraph`` extra; the public front is :mod:`pytest_graphflow.langgraph`.
"""
