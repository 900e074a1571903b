"""The console served for a test: in this process (uvicorn in a thread, for the API
tests) or as ``tasktrail serve`` in a process of its own (the command's own behaviour,
and the browser tests); a store to serve; a reader of ``/api/stream``."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
START = 1_767_603_600_000
TIMEOUT_S = 60.0
"""How long a server may take to start (a bound, not a measure: the machine is shared)."""


def token_file(folder: Path) -> Path:
    """A token file naming alice and bob (readable by its owner only)."""
    path = folder / "tokens"
    path.write_text(f"# who may act\nalice {ALICE}\nbob   {BOB}\n")
    path.chmod(0o600)
    return path


def registry() -> Registry:
    """``job`` (run, then done) and ``tree`` (plan, join): driven by hand."""
    return Registry(
        [
            TaskDefinition("job", 1, {"run": lambda inv: None, "done": lambda inv: None}),
            TaskDefinition("tree", 1, {"plan": lambda inv: None, "join": lambda inv: None}),
        ]
    )


def small_store(location: str) -> dict[str, str]:
    """A store of a few known tasks: a tree that owns two jobs (one failed), a job aborted
    by an operator, a pending job with a memo, and 30 more pending jobs (pages)."""
    clock = ManualClock(START)
    with Scheduler.open(location, clock=clock, registry=registry(), worker="maker") as s:
        tree = s.submit("tree", id="tree-1", phase="plan", actor="carol", reason="nightly")
        s.reserve(tree)
        ok = s.submit_owned(tree, "job", id="job-ok", phase="run")
        bad = s.submit_owned(tree, "job", id="job-bad", phase="run")
        s.wait(tree, on=[ok, bad], policy="all", phase="join")
        for job in (ok, bad):
            clock.advance(1_000)
            s.reserve(job)
            s.checkpoint(job, "done")
        s.finish(ok, "completed", result={"rows": 3})
        s.finish(bad, "failed", {"message": "source returned 503"})
        clock.advance(1_000)
        gone = s.submit("job", id="job-stuck", phase="run")
        s.abort(gone, actor="dave", reason="stuck since the deploy")
        memo = s.submit("job", id="job-memo", phase="run", memos={"note": "hello"})
        clock.advance(86_400_000)  # a day later
        for number in range(30):
            s.submit("job", id=f"later-{number:02d}", phase="run")
    return {"tree": tree, "ok": ok, "bad": bad, "stuck": gone, "memo": memo}


def head(location: str) -> int:
    """The store's last position (to prove an act appended nothing)."""
    from tasktrail.domain import open_store

    with open_store(location, read_only=True) as store:
        return store.head()


@contextlib.contextmanager
def in_process(
    location: str, tokens: Path | None = None, *, archive: Path | None = None
) -> Iterator[str]:
    """The console of ``location`` (read across ``archive``, if given) served by uvicorn
    in a thread; yields its base URL once its first fold is done."""
    import uvicorn

    from tasktrail.replay.console.app import console_for, create_app
    from tasktrail.replay.console.server import bind, url_of

    console = console_for(location, tokens, archive=archive)
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(console),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=0.3,  # type: ignore[arg-type]
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not (server.started and console.follower.ready.is_set()):
            assert time.monotonic() < deadline, "the console did not start"
            assert thread.is_alive(), "the console's server ended"
            time.sleep(0.02)
        yield url_of(sock)
    finally:
        server.should_exit = True
        thread.join(TIMEOUT_S)
        sock.close()


@dataclass
class Served:
    """``tasktrail serve`` running in a process of its own."""

    url: str
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def stop(self) -> int:
        """SIGTERM, then its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(TIMEOUT_S)
            raise


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tasktrail", "serve", *args]


@contextlib.contextmanager
def as_process(location: str, *args: str) -> Iterator[Served]:
    """``tasktrail serve LOCATION --port 0 ARGS`` in a process of its own; yields once
    it said it follows the store, and stops it with SIGTERM after."""
    process = subprocess.Popen(
        serve_command(location, "--port", "0", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    served = Served("", process)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while "following the store" not in " ".join(served.lines):
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, f"tasktrail serve ended: {served.lines}"
            served.lines.append(line)
            if line.startswith("tasktrail console: http"):
                served.url = line.split()[2]
        yield served
    finally:
        served.stop()


class Events:
    """A reader of ``/api/stream`` in a thread of its own: each event's JSON in order."""

    def __init__(self, url: str, **headers: str) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.opened = threading.Event()
        self._stop = threading.Event()
        self.url = url
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()
        assert self.opened.wait(TIMEOUT_S), "the stream did not open"

    def _read(self, url: str, headers: dict[str, str]) -> None:
        timeout = httpx.Timeout(TIMEOUT_S, read=None)
        with (
            contextlib.suppress(httpx.HTTPError),
            httpx.stream("GET", url, headers=headers, timeout=timeout) as response,
        ):
            self.opened.set()
            data = None
            for line in response.iter_lines():
                if self._stop.is_set():
                    return
                if line.startswith("data: "):
                    data = orjson.loads(line[6:])
                elif not line and data is not None:
                    self.events.put(data)
                    data = None

    def next(self, timeout: float = TIMEOUT_S) -> dict[str, Any]:
        return self.events.get(timeout=timeout)

    def until(self, wanted: Any, timeout: float = TIMEOUT_S) -> list[dict[str, Any]]:
        """Events read until one for which ``wanted(event)`` holds (included)."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                status = httpx.get(self.url.replace("api/stream", "api/status")).json()
                raise AssertionError(f"no such event after {seen}; the console: {status}") from None
            seen.append(event)
            if wanted(event):
                return seen

    def close(self) -> None:
        self._stop.set()
