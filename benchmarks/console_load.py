"""The worker beside the console (``benchmarks.console``'s load check): one worker process
runs for the whole check while the console takes turns being **away** and **beside** it,
in windows of a few seconds (ABBA: the machine's other load drifts over seconds, and
both states see as much of it).

* **away**: the console process is stopped (SIGSTOP: it runs nothing, reads nothing) and
  no client asks anything;
* **beside**: the console runs, an open live page listens to ``/api/stream`` and fetches
  the list's and a task's live parts again at most every 0.4 s on news (as the page's
  script does), and the pages are probed every half second (their times are the
  "beside" figures).

The worker's rate in a window is the tasks it ended in it (it prints a count after each
wave of 20); each pair of windows (one away, one beside) gives a ratio, and the figure is
the median of the pairs' ratios. The console's and the client's CPU in the beside windows
are measured too. A console stopped in the middle of a read would hold a read mark that
keeps SQLite's checkpoints behind it for that window: a cost counted against "away", if
any; its reads last a millisecond or two, twenty a second at most.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
SETTLE_S = 0.5
"""What a window leaves out at its start, after the console changed state."""


class Client:
    """An open live page and the probes, paused while the console is away."""

    def __init__(self, url: str, task: str, timed: Any) -> None:
        self.url, self.task, self.timed = url, task, timed
        self.paused = threading.Event()
        self.paused.set()  # the windows say when to ask
        self.stopped = threading.Event()
        self.news = threading.Event()
        self.refreshes = 0
        self.pages: dict[str, list[float]] = {}
        for target in (self._listen, self._refresh, self._probe):
            threading.Thread(target=target, daemon=True).start()

    def _listen(self) -> None:
        with httpx.stream("GET", self.url + "api/stream", timeout=None) as events:
            for line in events.iter_lines():
                if self.stopped.is_set():
                    return
                if line.startswith("data: "):
                    self.news.set()

    def _refresh(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while not self.stopped.is_set():
                if not self.news.wait(0.5) or self.paused.is_set():
                    continue
                self.news.clear()
                http.get("/", params={"part": "live"})
                http.get(f"/tasks/{self.task}", params={"part": "live"})
                self.refreshes += 1
                time.sleep(0.4)

    def _probe(self) -> None:
        while not self.stopped.is_set():
            if self.paused.is_set():
                time.sleep(0.05)
                continue
            timed = self.timed(self.url, self.task)
            if self.paused.is_set():
                continue  # the console may have been stopped under it: not a page's time
            for name, ms in timed.items():
                self.pages.setdefault(name, []).extend(ms)
            time.sleep(0.5)


class Worker:
    """``benchmarks.console_worker`` in a process of its own; :attr:`latest` is its
    last ``(tasks ended, monotonic time)``."""

    def __init__(self, location: str, seconds: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.console_worker", location, str(seconds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"
        self.latest = (0, time.monotonic())
        self.result: dict[str, Any] = {}
        threading.Thread(target=self._read, daemon=True).start()
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("done "):
                _, count, at = line.split()
                self.latest = (int(count), float(at))
            elif line.startswith("{"):
                import json

                self.result = json.loads(line)

    def end(self) -> None:
        self.process.wait(120)


def cpu_of(pid: int) -> float:
    """A process's CPU seconds so far (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def windows(
    location: str, console_pid: int, url: str, task: str, pairs: int, window_s: float, timed: Any
) -> dict[str, Any]:
    """Run the worker through ``pairs`` pairs of windows, away and beside (see the module)."""
    away: list[float] = []
    beside: list[float] = []
    console_cpu: list[float] = []
    client_cpu: list[float] = []
    client = Client(url, task, timed)
    worker = Worker(location, 2 * pairs * window_s + 2.0)
    try:
        for number in range(2 * pairs):
            # A B B A, A B B A, ...: away first in even pairs, beside first in odd ones
            here = (number % 4) in (1, 2)
            if here:
                os.kill(console_pid, signal.SIGCONT)
                client.paused.clear()
            else:
                client.paused.set()
                os.kill(console_pid, signal.SIGSTOP)
            time.sleep(SETTLE_S)
            count, at = worker.latest
            cpu, mine = cpu_of(console_pid), time.process_time()
            began = time.monotonic()
            time.sleep(window_s - SETTLE_S)
            ended, until = worker.latest
            took = time.monotonic() - began
            rate = (ended - count) / (until - at) if until > at else 0.0
            if here:
                beside.append(rate)
                console_cpu.append((cpu_of(console_pid) - cpu) / took)
                client_cpu.append((time.process_time() - mine) / took)
            else:
                away.append(rate)
    finally:
        os.kill(console_pid, signal.SIGCONT)
        client.paused.clear()
        client.stopped.set()
        worker.end()
    ratios = [b / a for a, b in zip(away, beside, strict=True) if a > 0]
    return {
        "worker": {
            "alone_per_s": away,
            "beside_per_s": beside,
            "ratio": statistics.median(ratios) if ratios else 0.0,
            "ratios": ratios,
            "live_refreshes": client.refreshes,
            "server_cpu": console_cpu,
            "client_cpu": client_cpu,
            "window_s": window_s,
        },
        "beside_pages": client.pages,
    }
