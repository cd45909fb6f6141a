"""JSON forms of LangGraph values (state, writes, interrupt payloads) for events."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import date, datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel

__all__ = ["jsonable", "strip_interrupts"]


_PLAIN = frozenset({str, int, float, bool, type(None)})


def jsonable(value: Any) -> Any:
    """A JSON value for ``value``: pydantic models (LangChain messages) by ``model_dump``,
    ``Send``/``Command``/``Interrupt`` and other dataclasses field by field, mappings and
    sequences item by item; anything else as ``"<TypeName>"`` (never a ``repr`` with an
    address, so traces stay byte-stable)."""
    kind = type(value)
    if kind in _PLAIN:  # the common cases first, by exact type
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): jsonable(v) for k, v in value.items()}
    if kind is list:
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(mode="json"))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        items = [jsonable(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return jsonable(value.value)
    name = kind.__name__
    if name == "Send":
        return {"send": value.node, "arg": jsonable(value.arg)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"type": name, **fields}
    return f"<{name}>"


def strip_interrupts(values: Any) -> dict[str, Any]:
    """A ``values`` chunk without LangGraph's ``__interrupt__`` entry."""
    if not isinstance(values, Mapping):
        return {"value": values}
    return {k: v for k, v in values.items() if k != "__interrupt__"}
