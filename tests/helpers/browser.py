"""A headless Chromium driven over the DevTools protocol, through a pipe (no port, no
extra package): load a page, collect what it logs, evaluate, take screenshots.

Chromium with ``--remote-debugging-pipe`` reads protocol messages from file
descriptor 3 and writes them to 4, each JSON text ended by a NUL byte.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

TIMEOUT = 20.0


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian's ``chromium``), if any."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def install_chromium() -> str:
    """Install Debian's ``chromium`` with apt-get (as root); returns why not, or ''."""
    if os.geteuid() != 0:
        return "not root: cannot apt-get install chromium"
    if shutil.which("apt-get") is None:
        return "no apt-get on this machine to install chromium with"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "chromium"]
    for attempt in range(2):
        if attempt:  # the package lists may be missing or old: refresh them once
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
        if done.returncode == 0 and find_chromium():
            return ""
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return "apt-get install chromium failed: " + " | ".join(tail)


def chromium_or_skip(tests: str) -> str:
    """The Chromium binary, installed first if missing; where it cannot be, ``tests``
    (the report's, the console's) are skipped saying why, and fail under CI=true."""
    import pytest

    binary = find_chromium()
    if binary is None:
        problem = install_chromium()
        binary = find_chromium()
        if binary is None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"CI=true requires Chromium for the {tests} tests: {problem}")
            pytest.skip(f"no Chromium for the {tests} tests: {problem}")
    return binary


class Browser:
    """One headless Chromium process and one page in it."""

    def __init__(self, binary: str, profile: Path, width: int = 1360, height: int = 900) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire() -> None:  # in the child: the protocol's fixed descriptors, 3 and 4
            reading, writing = os.dup(to_chrome_r), os.dup(from_chrome_w)  # above 4 now
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self.process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            preexec_fn=wire,
            pass_fds=(3, 4),  # kept open across exec (others are closed after wire)
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=None)
        attached = self.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, None
        )
        self.session: str | None = attached["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._lock:
                        box = self._replies.get(message["id"])
                    if box is not None:
                        box.put(message)
                else:
                    self.events.append(message)

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: Any = ...
    ) -> dict[str, Any]:
        """Send one protocol command to the page (or the browser, ``session=None``)."""
        with self._lock:
            self._next += 1
            number = self._next
            box: queue.Queue[dict[str, Any]] = queue.Queue()
            self._replies[number] = box
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        chosen = self.session if session is ... else session
        if chosen is not None:
            message["sessionId"] = chosen
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        try:
            reply = box.get(timeout=TIMEOUT)
        except queue.Empty:
            raise TimeoutError(f"Chromium did not answer {method} in {TIMEOUT} s") from None
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def open(self, path: Path, *, scripts: bool = True) -> None:
        """Load a local file and wait for its load event."""
        self.call("Emulation.setScriptExecutionDisabled", {"value": not scripts})
        seen = len(self.events)
        self.call("Page.navigate", {"url": path.resolve().as_uri()})
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if any(e.get("method") == "Page.loadEventFired" for e in self.events[seen:]):
                return
            time.sleep(0.02)
        raise TimeoutError(f"{path} did not load in {TIMEOUT} s")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """What the page reported as errors: uncaught exceptions, console errors and
        warnings, errors the browser logged (a refused script or style, a failed load)."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append(f"uncaught: {details.get('exception', {}).get('description')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "warning",
                "assert",
            ):
                values = [a.get("value", a.get("description")) for a in params.get("args", [])]
                found.append(f"console.{params['type']}: {values}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in (
                "error",
                "warning",
            ):
                found.append(f"log: {params['entry'].get('text')}")
        return found

    def requests(self) -> list[str]:
        """Every URL the page asked for."""
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def screenshot(self, path: Path, *, full: bool = True) -> Path:
        """A PNG of the page (the whole page with ``full``)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full}
        if full:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": size["height"],
                "scale": 1,
            }
        data = self.call("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.call("Browser.close", session=None)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for fd in (self._to_chrome, self._from_chrome):
            with contextlib.suppress(OSError):
                os.close(fd)
