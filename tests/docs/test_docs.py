"""Every Python example in ``docs/*.md`` runs, and every documented output is real.

Each page's ```` ```python ```` blocks run in order in one namespace (a later block may use the
names of an earlier one), in a fresh temporary directory. A block whose first line is
``# not run`` is skipped. A ```` ```text output ```` block right after a Python block is that
block's expected standard output: the test compares them (trailing spaces ignored).

A failure names the page, the block's index among the page's Python blocks (from 0) and its
line, and shows the traceback or the output diff.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import re
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(DOCS.glob("*.md"))

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[^`]*)$")


@dataclass
class Block:
    """A fenced block of a page."""

    info: str
    line: int  # the line of the opening fence, from 1
    code: str


@dataclass
class Example:
    """A Python block and the output documented right after it, if any."""

    index: int
    line: int
    code: str
    output: str | None


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block of ``text``, in order.

    Raises:
        AssertionError: when a fence is left open.
    """
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"line {start + 1}: the fence is never closed"
        blocks.append(Block(m.group("info").strip(), start + 1, "\n".join(body) + "\n"))
        i += 1
    return blocks


def examples(page: Path) -> list[Example]:
    """The page's Python blocks (skipped ones included, so indexes match the page)."""
    out: list[Example] = []
    blocks = fenced_blocks(page.read_text(encoding="utf-8"))
    for n, block in enumerate(blocks):
        if block.info != "python":
            continue
        following = blocks[n + 1] if n + 1 < len(blocks) else None
        output = (
            following.code if following is not None and following.info == "text output" else None
        )
        out.append(Example(len(out), block.line, block.code, output))
    return out


def _normalise(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_docs_exist() -> None:
    names = {p.name for p in PAGES}
    expected = {
        "index.md",
        "graphs.md",
        "running.md",
        "events.md",
        "interrupts.md",
        "stores.md",
        "determinism.md",
        "errors.md",
        "performance.md",
    }
    assert expected <= names, f"missing pages: {sorted(expected - names)}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for ex in examples(page):
        if ex.code.lstrip().startswith("# not run"):
            continue
        where = f"docs/{page.name}, python block {ex.index} (line {ex.line})"
        out = io.StringIO()
        try:
            code = compile(ex.code, f"<{where}>", "exec", dont_inherit=True)
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
        except BaseException:
            pytest.fail(
                f"{where} raised:\n{traceback.format_exc()}\n--- printed:\n{out.getvalue()}",
                pytrace=False,
            )
        if ex.output is not None:
            got, want = _normalise(out.getvalue()), _normalise(ex.output)
            if got != want:
                diff = "\n".join(
                    difflib.unified_diff(want, got, "documented", "printed", lineterm="")
                )
                pytest.fail(
                    f"{where}: the output differs from the documented one:\n{diff}", pytrace=False
                )


_SEED_CITATION = re.compile(r"\bseeds? \d{3}\b", re.IGNORECASE)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_pages_state_rules_instead_of_citing_seed_files(page: Path) -> None:
    """A user reads "seed 004" as a random seed: a page states the rule itself (tests and code
    comments may cite the seed files)."""
    text = page.read_text(encoding="utf-8")
    cited = [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
             for m in _SEED_CITATION.finditer(text)]
    assert cited == []


def test_fence_parser() -> None:
    text = "intro\n```python\nx = 1\n```\n```text output\n1\n```\n```bash\nls\n```\n"
    blocks = fenced_blocks(text)
    assert [(b.info, b.line, b.code) for b in blocks] == [
        ("python", 2, "x = 1\n"),
        ("text output", 5, "1\n"),
        ("bash", 8, "ls\n"),
    ]
