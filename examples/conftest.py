"""The LangGraph example needs the ``langgraph`` extra (part of ``test``, so CI has it);
without LangGraph installed it is left out locally, never under ``CI``."""

from __future__ import annotations

import importlib.util
import os

collect_ignore = (
    ["test_langgraph_agent.py", "test_langgraph_booking.py"]
    if importlib.util.find_spec("langgraph") is None and not os.environ.get("CI") else []
)
