"""``python -m benchmarks.console``: the console on a large store (issue 46).

A SQLite store of ``--tasks`` tasks (100,000 by default, :mod:`.console_store`) is served
by ``tasktrail serve`` in a process of its own. Measured:

* **start**: from the process's start to its first fold done (the whole log read), and
  the server's resident memory then;
* **pages**: the first list page (``/``, whole HTML, newest first) and a task page
  (``/tasks/report-…``, a tree of five: the report's timeline and the history), each
  ``--probes`` times, idle and beside the worker (median and p95);
* **news**: a task submitted through another store object, to its event on
  ``/api/stream`` and to the list's live part showing it;
* **the worker beside it**: ``benchmarks.console_worker`` (a worker running one-phase
  tasks, three events each, a transaction a command) through ``--rounds`` pairs of
  ``--seconds`` windows, the console away (stopped) in one and beside it (an open live
  page and the probes) in the other (:mod:`.console_load` says how); the ratio is the
  median of the pairs' own ratios; the console's and the client's CPU beside it too;
* **stop**: SIGTERM to the process's exit, with a live stream open.

Goals (issue 46): the list page under 300 ms and a task page under 200 ms (medians
beside the worker), the worker beside the console at 0.9x or more of its rate alone.
``--quick`` runs a small store and short rounds and gives no verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tasktrail.domain import Scheduler

from . import console_load, console_store
from .report import machine

ROOT = Path(__file__).resolve().parents[1]
LIST_MS, TASK_MS, RATIO = 300.0, 200.0, 0.9


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "p95": p95(values), "n": len(values)}


class Served:
    """``tasktrail serve STORE --port 0`` in a process of its own."""

    def __init__(self, location: str) -> None:
        began = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tasktrail", "serve", location, "--port", "0"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        self.url = ""
        for line in self.process.stdout:
            if line.startswith("tasktrail console: http"):
                self.url = line.split()[2]
            if "following the store" in line:
                break
        self.start_s = time.monotonic() - began
        self.rss_mb = _rss_mb(self.process.pid)

    def stop(self) -> float:
        """SIGTERM (with a live stream open), and seconds until the process ended."""
        with httpx.stream("GET", self.url + "api/stream", timeout=30) as events:
            assert events.status_code == 200
            asked = time.monotonic()
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(60)
            return time.monotonic() - asked


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def probe(http: httpx.Client, path: str) -> float:
    began = time.perf_counter()
    answer = http.get(path)
    took = (time.perf_counter() - began) * 1000
    assert answer.status_code == 200, (path, answer.status_code)
    return took


def task_of(tasks: int) -> str:
    """A report task in the middle of the store: a tree of five, ended."""
    return f"report-{tasks // console_store.TREE // 2:06d}"


def pages(url: str, task: str, probes: int, pause_s: float = 0.0) -> dict[str, list[float]]:
    """Each page timed ``probes`` times (a fresh connection each, as a browser's first)."""
    found: dict[str, list[float]] = {"list": [], "task": [], "api_list": []}
    for _ in range(probes):
        for name, path in (("list", "/"), ("task", f"/tasks/{task}"), ("api_list", "/api/tasks")):
            with httpx.Client(base_url=url, timeout=60) as http:
                found[name].append(probe(http, path))
        time.sleep(pause_s)
    return found


def news(url: str, location: str, count: int) -> dict[str, list[float]]:
    """A submission through another store object, to its event and to the list showing it."""
    to_event: list[float] = []
    to_page: list[float] = []
    seen = threading.Event()
    opened = threading.Event()
    wanted: list[str] = [""]

    def read() -> None:
        with httpx.stream("GET", url + "api/stream", timeout=None) as events:
            opened.set()  # subscribed: the server answers once it listens
            for line in events.iter_lines():
                if line.startswith("data: ") and wanted[0] and wanted[0] in line:
                    seen.set()

    threading.Thread(target=read, daemon=True).start()
    assert opened.wait(30), "/api/stream did not open"
    with Scheduler.open(location, worker="bench-news") as other, httpx.Client(base_url=url) as http:
        for number in range(count):
            task_id = f"news-{os.getpid()}-{number}"
            wanted[0] = task_id
            seen.clear()
            began = time.perf_counter()
            other.submit("bench", phase="go", id=task_id)
            assert seen.wait(30), "no event on /api/stream"
            to_event.append((time.perf_counter() - began) * 1000)
            while task_id not in http.get("/", params={"part": "live"}).text:
                time.sleep(0.005)
            to_page.append((time.perf_counter() - began) * 1000)
    return {"to_event_ms": to_event, "to_page_ms": to_page}


def _probe_once(url: str, task: str) -> dict[str, list[float]]:
    return pages(url, task, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.console")
    parser.add_argument("--quick", action="store_true", help="a small store, short rounds")
    parser.add_argument("--tasks", type=int, help="the store's tasks (default 100,000)")
    parser.add_argument("--rounds", type=int, help="pairs of worker windows (12)")
    parser.add_argument("--seconds", type=float, help="a window's length (3 s)")
    parser.add_argument("--probes", type=int, help="page probes a measure (20)")
    parser.add_argument("--dir", type=Path, help="where the store is built and kept")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    tasks = args.tasks or (2_000 if args.quick else 100_000)
    rounds = args.rounds or (1 if args.quick else 12)
    seconds = args.seconds or (1.5 if args.quick else 3.0)
    probes = args.probes or (3 if args.quick else 20)
    folder = args.dir or Path(tempfile.gettempdir()) / "tasktrail-console-bench"
    folder.mkdir(parents=True, exist_ok=True)
    built = console_store.build(folder / f"console-{tasks}.db", tasks, log=True)
    location = str(console_store.working_copy(built))
    print(f"store: {location} ({tasks:,} tasks, a copy of {built})", flush=True)

    served = Served(location)
    figures: dict[str, Any] = {
        "machine": machine(),
        "tasks": tasks,
        "quick": args.quick,
        "start_s": served.start_s,
        "rss_mb": served.rss_mb,
    }
    task = task_of(tasks)
    try:
        idle = pages(served.url, task, probes)
        figures["idle"] = {name: summary(ms) for name, ms in idle.items()}
        figures["news"] = {k: summary(v) for k, v in news(served.url, location, probes).items()}
        load = console_load.windows(
            location, served.process.pid, served.url, task, rounds, seconds, _probe_once
        )
        figures["worker"] = load["worker"]
        figures["beside"] = {name: summary(ms) for name, ms in load["beside_pages"].items()}
    finally:
        figures["stop_s"] = served.stop()
    figures["goals"] = goals(figures)
    print(format_figures(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def goals(figures: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each goal, what was measured and the verdict (none for a quick run)."""
    judged = not figures["quick"]
    beside = figures.get("beside", figures["idle"])
    found = [
        (f"first list page < {LIST_MS:.0f} ms", beside["list"]["median"], LIST_MS, "ms"),
        (f"task page < {TASK_MS:.0f} ms", beside["task"]["median"], TASK_MS, "ms"),
    ]
    out = [
        (goal, f"{value:.0f} {unit} median beside the worker", _verdict(value < limit, judged))
        for goal, value, limit, unit in found
    ]
    ratio = figures["worker"]["ratio"]
    out.append(
        (f"worker beside >= {RATIO}x alone", f"{ratio:.2f}x", _verdict(ratio >= RATIO, judged))
    )
    return out


def _verdict(met: bool, judged: bool) -> str:
    if not judged:
        return "quick: no verdict"
    return "met" if met else "missed"


def format_figures(figures: dict[str, Any]) -> str:
    lines = [
        f"tasks {figures['tasks']:,}; start (whole log folded) {figures['start_s']:.1f} s; "
        f"server RSS {figures['rss_mb']:.0f} MB; stop after SIGTERM {figures['stop_s']:.2f} s"
    ]
    for when in ("idle", "beside"):
        for name, got in figures.get(when, {}).items():
            lines.append(
                f"{when:<7} {name:<9} median {got['median']:7.1f} ms  p95 {got['p95']:7.1f} ms"
            )
    for name, got in figures["news"].items():
        lines.append(f"news    {name:<12} median {got['median']:7.1f} ms  p95 {got['p95']:7.1f} ms")
    w = figures["worker"]
    lines.append(
        "worker  alone "
        + ", ".join(f"{v:.0f}" for v in w["alone_per_s"])
        + " tasks/s; beside "
        + ", ".join(f"{v:.0f}" for v in w["beside_per_s"])
        + f" tasks/s; ratio {w['ratio']:.2f}x (rounds "
        + ", ".join(f"{r:.2f}" for r in w["ratios"])
        + f"); {w['live_refreshes']} live refreshes; beside it the console's CPU "
        + ", ".join(f"{c:.2f}" for c in w["server_cpu"])
        + " core, the client's "
        + ", ".join(f"{c:.2f}" for c in w["client_cpu"])
    )
    lines += [f"goal: {goal}: {said}: {verdict}" for goal, said, verdict in figures["goals"]]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
