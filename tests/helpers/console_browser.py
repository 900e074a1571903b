"""The report tests' headless Chromium (:mod:`.browser`), taught to open a served page,
wait for what a live page does, type and click, and see a dialog a script opened."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .browser import TIMEOUT, Browser, chromium_or_skip


def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBrowser]:
    """A browser for a module's tests (skipped, saying why, only where Chromium cannot
    be installed; under CI=true that fails instead)."""
    binary = chromium_or_skip("console")
    opened = ConsoleBrowser(binary, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield opened
    finally:
        opened.close()


class ConsoleBrowser(Browser):
    """One page of a headless Chromium, on a served console."""

    def goto(self, url: str) -> None:
        """Load ``url`` and wait for its load event (its deferred script has run)."""
        seen = len(self.events)
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", seen)

    def wait_ready(self) -> None:
        """Wait until the page's own script has run (its forms are the script's then)."""
        self.wait_for("document.readyState === 'complete' && document.body.dataset.ready")

    def wait_event(self, method: str, seen: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for event in self.events[seen:]:
                if event.get("method") == method:
                    return event
            time.sleep(0.02)
        raise TimeoutError(f"no {method} in {TIMEOUT} s")

    def wait_for(self, expression: str, timeout: float = TIMEOUT) -> Any:
        """Wait until a JavaScript expression is truthy in the page; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression} stayed falsy for {timeout} s")
            time.sleep(0.05)

    def fill(self, selector: str, value: str) -> None:
        """Type ``value`` into the field ``selector`` names (as the input event says)."""
        self.evaluate(
            f"(() => {{ const f = document.querySelector({json.dumps(selector)});"
            f" f.value = {json.dumps(value)}; f.dispatchEvent(new Event('input')); }})()"
        )

    def click(self, selector: str) -> None:
        """Click the middle of the element ``selector`` names, as a person would."""
        x, y = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def dialogs(self) -> list[str]:
        """Every alert, confirm or prompt a script of the page opened."""
        return [
            e["params"].get("message", "")
            for e in self.events
            if e.get("method") == "Page.javascriptDialogOpening"
        ]

    def open_file(self, path: Path) -> None:
        """A local file, as :meth:`Browser.open` (scripts on)."""
        self.open(path)
