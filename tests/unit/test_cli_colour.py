"""Colour in the ``graphflow`` command (issue 28): "the CLI use[s] colour through pytest's
terminal writer (and a TTY check in the CLI), honouring `--color=yes|no|auto` and
`NO_COLOR`."

The command runs as a real process; ``auto`` is checked on a pseudo-terminal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HTML_TESTS = Path(__file__).parents[1] / "html"
ESC = "\x1b["


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A SQLite store with one paused run (its interrupt, and a run_end)."""
    sys.path.insert(0, str(HTML_TESTS))
    try:
        from graphflow_html_graph import record
    finally:
        sys.path.remove(str(HTML_TESTS))
    path = tmp_path_factory.mktemp("colour") / "runs.db"
    history, _ = record(answer=None, store_path=path)
    return str(path), history.run_id


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "PY_COLORS", "FORCE_COLOR", "TERM")}
    return {**env, "TERM": "xterm", **extra}


def _on_a_pipe(*args: str, **env: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pytest_graphflow", *args], env=_env(**env),
                          capture_output=True, text=True, timeout=120, check=False)
    return done.stdout + done.stderr


def _on_a_terminal(*args: str, **env: str) -> str:
    """What the command prints with stdout and stderr on a pseudo-terminal."""
    main, child = os.openpty()
    try:
        subprocess.run([sys.executable, "-m", "pytest_graphflow", *args], env=_env(**env),
                       stdin=subprocess.DEVNULL, stdout=child, stderr=child, timeout=120,
                       check=False)
    finally:
        os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # Linux: EIO once the terminal's other end is closed and drained
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    return out.decode()


def test_color_yes_colours_statuses_and_event_lines(store: tuple[str, str]) -> None:
    path, run_id = store
    runs = _on_a_pipe("runs", path, "--color=yes")
    assert f"{ESC}33m{run_id}" in runs  # an interrupted run's row is yellow
    events = _on_a_pipe("--color=yes", "events", path, run_id)
    assert any(line.startswith(f"{ESC}33m") and " interrupt " in line
               for line in events.splitlines())
    error = _on_a_pipe("events", path, "run-nope", "--color=yes")
    assert error.startswith(f"{ESC}31m{ESC}1mgraphflow: error:{ESC}0m no run")


def test_color_yes_wins_over_no_color(store: tuple[str, str]) -> None:
    assert ESC in _on_a_pipe("runs", store[0], "--color=yes", NO_COLOR="1")


@pytest.mark.parametrize("args", [("--color=no",), ()], ids=["color-no", "auto-on-a-pipe"])
def test_no_escape_code_with_color_no_or_on_a_pipe(store: tuple[str, str],
                                                   args: tuple[str, ...]) -> None:
    path, run_id = store
    assert ESC not in _on_a_pipe("events", path, run_id, *args)
    assert ESC not in _on_a_pipe("events", path, "run-nope", *args)


def test_auto_colours_a_terminal_unless_no_color(store: tuple[str, str]) -> None:
    path, run_id = store
    assert ESC in _on_a_terminal("events", path, run_id)
    plain = _on_a_terminal("events", path, run_id, NO_COLOR="1")
    assert ESC not in plain
    assert " run_end " in plain
    assert ESC not in _on_a_terminal("events", path, run_id, "--color=no")
