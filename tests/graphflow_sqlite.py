"""What a SQLite store's file holds, for tests that compare two paths' stored bytes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def sqlite_rows(path: Path) -> dict[str, list[Any]]:
    """Every table of the file at ``path``, by name, its rows ordered by their first two
    columns."""
    db = sqlite3.connect(path)
    try:
        tables = [t for (t,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}
    finally:
        db.close()
