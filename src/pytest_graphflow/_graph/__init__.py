"""Graph definitions: what a user builds before anything runs.

Owns ``Graph``/``CompiledGraph`` (building, validation, revision), node specs and the node and
edge contexts (``interrupt``, ``emit``, ``Resume``), state schemas and their codecs, and the
Mermaid rendering of a graph. May import ``_records``, ``_time`` and
:mod:`pytest_graphflow.errors`.
"""
