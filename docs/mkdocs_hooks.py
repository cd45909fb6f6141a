"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``).

The pages are also run by the test suite (tests/docs/test_docs.py): a ```` ```text output ````
block is the output of the Python block above it. On the site it is shown as plain text
under a small "Output" label, not as code in a language called "text output".
"""

from __future__ import annotations

import re
from typing import Any

_OUTPUT = re.compile(r"^(\s*)```text output\s*$", re.MULTILINE)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Turn each ```` ```text output ```` fence into a titled plain-text block."""
    return _OUTPUT.sub(lambda m: f'{m.group(1)}```text title="Output"', markdown)
