"""No merge left its conflict markers in a file of the project.

A merge once left ``<<<<<<<``/``=======``/``>>>>>>>`` lines in docs/testing.md's option table:
the page's code blocks still ran, so nothing else noticed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.MULTILINE)


def test_no_tracked_file_holds_a_merge_conflict_marker() -> None:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    found = []
    for name in listed:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".ambr", ""}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}" for m in MARKER.finditer(text)]
    assert found == [], "resolve the merge conflict left at:\n" + "\n".join(found)
