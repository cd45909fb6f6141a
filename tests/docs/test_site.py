"""The documentation site (issue 28): "the existing pages built with MkDocs (Material theme)
and the API reference from docstrings (mkdocstrings), `mkdocs build --strict` in CI, every
code block still run by the test suite" (test_docs.py runs them; this builds the site).

Skipped without MkDocs (the ``test`` extra installs it), failing under ``CI``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """The site, built once with ``mkdocs build --strict`` (a warning fails the build)."""
    try:
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI must build the docs site, but {exc}", pytrace=False)
        pytest.skip(f"the docs site needs the test extra (pip install -e '.[test]'): {exc}")
    out = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-d", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_site_builds_strict_with_every_page_the_api_and_no_other_host(site: Path) -> None:
    """One test, so that under xdist the site is built once (a build takes seconds)."""
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    built = {p.stem for p in site.glob("*.html")}
    assert pages <= built, sorted(pages - built)
    assert (site / "search" / "search_index.json").is_file()  # the site has search
    # the API reference comes from the docstrings
    api = (site / "api.html").read_text(encoding="utf-8")
    assert 'id="pytest_graphflow.explore"' in api
    assert 'id="pytest_graphflow.PostgresCheckpointStore"' in api
    assert "called after every run" in api  # explore's docstring, its progress argument
    # a ```text output block (run by test_docs.py) is shown as the output it is
    page = (site / "hypothesis.html").read_text(encoding="utf-8")
    assert '<span class="filename">Output</span>' in page
    assert "language-text output" not in page
    # the pages load nothing from another host (no web fonts, no CDN)
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in index
    assert '<script src="http' not in index
    assert '<link rel="stylesheet" href="http' not in index
