"""The LangGraph bridge's tests need the ``langgraph`` extra (part of ``test``, so CI has it).

Without LangGraph installed they are left out of collection locally; under ``CI`` they are
collected anyway, so a missing LangGraph fails loudly instead of skipping.
"""

from __future__ import annotations

import importlib.util
import os

collect_ignore_glob = (
    ["test_*.py"] if importlib.util.find_spec("langgraph") is None and not os.environ.get("CI")
    else []
)
