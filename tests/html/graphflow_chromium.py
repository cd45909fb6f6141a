"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``):
no extra Python package, no port. Chromium reads commands from fd 3 and writes replies and
events to fd 4, each a JSON text ending in a NUL byte.

``open_page(path, screenshot)`` loads a local file in a fresh profile, records every network
request the page makes and every console or security message, evaluates a probe in the page
once it has loaded (after its script ran), and writes a screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe", "--hide-scrollbars")
WAIT = 60.0
"""Seconds a reply may take before the test fails (a guard, not a sleep)."""


def chromium() -> str:
    """The chromium binary; without one, skip the test, or fail it under CI."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        reason = "the HTML page tests need Chromium (Debian: apt-get install chromium)"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI must run the browser test, but {reason}", pytrace=False)
        pytest.skip(reason)
    return found


@dataclass
class Loaded:
    """What a page did: its requests (URLs), console and log messages, and the probe's value."""

    requests: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    probe: Any = None


class _Pipe:
    def __init__(self, binary: str, profile: Path) -> None:
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)

        def fds() -> None:  # in the child, before exec: its fd 3 and 4 are the pipes
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, pass_fds=(3, 4))
        for fd in (to_browser_r, from_browser_w, high_r, high_w):
            os.close(fd)
        self.write, self.read = to_browser_w, from_browser_r
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self.write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def receive(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.read], [], [], WAIT)
            if not ready:
                raise AssertionError(f"chromium said nothing for {WAIT:g} s")
            chunk = os.read(self.read, 1 << 20)
            if not chunk:
                raise AssertionError("chromium closed its DevTools pipe")
            self.buffer += chunk
        text, _, self.buffer = self.buffer.partition(b"\0")
        return dict(json.loads(text))

    def wait_for(self, method: str) -> dict[str, Any]:
        for n, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(n)
        while True:
            event = self.receive()
            if event.get("method") == method:
                return event
            self.events.append(event)

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except AssertionError:
            pass
        finally:
            os.close(self.write)
            os.close(self.read)
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def open_page(path: Path, *, probe: str, screenshot: Path | None, profile: Path) -> Loaded:
    """Load ``path`` in headless Chromium, evaluate ``probe`` (a JS expression giving a
    JSON-able value) after the load event, and write a PNG of the whole page (unless
    ``screenshot`` is ``None``: Chromium refuses one of a very long page)."""
    pipe = _Pipe(chromium(), profile)
    try:
        target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.send("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        for domain in ("Network", "Page", "Log", "Runtime"):
            pipe.send(f"{domain}.enable", session=session)
        pipe.send("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session)
        pipe.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        pipe.wait_for("Page.loadEventFired")
        value = pipe.send("Runtime.evaluate", {"expression": probe, "returnByValue": True},
                          session=session)
        if screenshot is not None:
            shot = pipe.send("Page.captureScreenshot", {"format": "png",
                                                        "captureBeyondViewport": True},
                             session=session)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        loaded = Loaded(probe=value.get("result", {}).get("value"))
        for event in pipe.events:
            params = event.get("params", {})
            method = event.get("method")
            if method == "Network.requestWillBeSent":
                loaded.requests.append(params["request"]["url"])
            elif method == "Network.loadingFailed":
                loaded.failed.append(f"{params.get('errorText')} {params.get('blockedReason')}")
            elif method == "Log.entryAdded":
                entry = params["entry"]
                loaded.messages.append(f"{entry.get('source')}: {entry.get('text')}")
            elif method == "Runtime.consoleAPICalled":
                loaded.messages.append(f"console: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                loaded.messages.append(f"exception: {params.get('exceptionDetails')}")
        return loaded
    finally:
        pipe.close()
