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
  tasks, three events each, a transaction a command) for ``--seconds``, alone (no console
  process) and beside a console serving an open live page (an ``/api/stream`` reader that
  fetches the list's and a task's live parts again at most every 0.4 s on news, as the
  page's script does) and the probes every half second; each round runs both, in turn
  first (ABBA: the machine's other load drifts), the ratio is the median of the rounds'
  own ratios; the console's and the client's CPU beside it are said too;
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

from . import console_store
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


class Prober:
    """The pages timed every half second while a worker runs."""

    def __init__(self, url: str, task: str) -> None:
        self.timed: dict[str, list[float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url, task), daemon=True)
        self._thread.start()

    def _run(self, url: str, task: str) -> None:
        while not self._stop.is_set():
            for name, ms in pages(url, task, 1, pause_s=0.5).items():
                self.timed.setdefault(name, []).extend(ms)

    def done(self) -> dict[str, list[float]]:
        self._stop.set()
        self._thread.join(60)
        return self.timed


class LivePage:
    """What an open live page asks of the console: the stream, and the list's and a
    task's live parts again on news, at most every 0.4 s."""

    def __init__(self, url: str, task: str) -> None:
        self.url = url
        self.task = task
        self.stop = threading.Event()
        self.news = threading.Event()
        self.refreshes = 0
        threading.Thread(target=self._listen, daemon=True).start()
        threading.Thread(target=self._refresh, daemon=True).start()

    def _listen(self) -> None:
        with httpx.stream("GET", self.url + "api/stream", timeout=None) as events:
            for line in events.iter_lines():
                if self.stop.is_set():
                    return
                if line.startswith("data: "):
                    self.news.set()

    def _refresh(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while not self.stop.is_set():
                if not self.news.wait(0.5):
                    continue
                self.news.clear()
                http.get("/", params={"part": "live"})
                http.get(f"/tasks/{self.task}", params={"part": "live"})
                self.refreshes += 1
                time.sleep(0.4)


def worker(location: str, seconds: float) -> float:
    """Tasks a second of one worker process on the store."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.console_worker", location, str(seconds)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    process.stdin.write("go\n")
    process.stdin.flush()
    result = json.loads(process.stdout.readline())
    process.wait(60)
    return float(result["tasks"]) / float(result["seconds"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.console")
    parser.add_argument("--quick", action="store_true", help="a small store, short rounds")
    parser.add_argument("--tasks", type=int, help="the store's tasks (default 100,000)")
    parser.add_argument("--rounds", type=int, help="worker rounds, alone and beside (6)")
    parser.add_argument("--seconds", type=float, help="a worker run's length (8 s)")
    parser.add_argument("--probes", type=int, help="page probes a measure (20)")
    parser.add_argument("--dir", type=Path, help="where the store is built and kept")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    tasks = args.tasks or (2_000 if args.quick else 100_000)
    rounds = args.rounds or (1 if args.quick else 6)
    seconds = args.seconds or (2.0 if args.quick else 8.0)
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
    finally:
        figures["stop_s"] = served.stop()
    figures.update(worker_rounds(location, task, rounds, seconds))
    figures["goals"] = goals(figures)
    print(format_figures(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def worker_rounds(location: str, task: str, rounds: int, seconds: float) -> dict[str, Any]:
    """The worker alone (no console process at all) and beside a console that serves an
    open live page and the probes, in rounds of both, their order alternating (ABBA: the
    machine's other load drifts); each beside round starts a console and waits for its
    first fold, then times the worker."""
    alone: list[float] = []
    beside: list[float] = []
    busy: dict[str, list[float]] = {"list": [], "task": [], "api_list": []}
    refreshes = 0
    server_cpu: list[float] = []
    client_cpu: list[float] = []
    for number in range(rounds):
        order = ("alone", "beside") if number % 2 == 0 else ("beside", "alone")
        for which in order:
            if which == "alone":
                alone.append(worker(location, seconds))
                continue
            served = Served(location)
            try:
                page = LivePage(served.url, task)
                prober = Prober(served.url, task)
                cpu, client, began = _cpu(served.process.pid), time.process_time(), time.monotonic()
                beside.append(worker(location, seconds))
                took = time.monotonic() - began
                server_cpu.append((_cpu(served.process.pid) - cpu) / took)
                client_cpu.append((time.process_time() - client) / took)
                page.stop.set()
                refreshes += page.refreshes
                for name, ms in prober.done().items():
                    busy[name] += ms
            finally:
                served.stop()
        print(f"round {number + 1}: alone {alone[-1]:.0f}/s, beside {beside[-1]:.0f}/s", flush=True)
    ratios = [b / a for a, b in zip(alone, beside, strict=True)]
    return {
        "worker": {
            "alone_per_s": alone,
            "beside_per_s": beside,
            "ratio": statistics.median(ratios),
            "ratios": ratios,
            "live_refreshes": refreshes,
            "server_cpu": server_cpu,
            "client_cpu": client_cpu,
        },
        "beside": {name: summary(ms) for name, ms in busy.items() if ms},
    }


def _cpu(pid: int) -> float:
    """A process's CPU seconds so far (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
