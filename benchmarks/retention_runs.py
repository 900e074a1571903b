"""The throughput part of ``benchmarks.retention``: two workers, alive side by side, timed
in alternated windows.

Each worker is a process of its own on its own copy of the store (``python -m
benchmarks.retention_runs STORE [ARCHIVE]``): one alone, one with a retention policy
whose keeper thread acts beside it. Both start together and both wait until the
keeper acts steadily (past its first look at every tree and the pause after it), so
both have run as long before any clock starts. Then the parent times them a window at a
time, alternately, the same number of tasks each: whatever else the machine does moves
both alike, and the spread over the windows is reported with the medians. While one
works the other idles (its keeper, if any, keeps acting on the other core).

Protocol on the child's stdin and stdout, one line each: it says ``ready``; then to
each ``go N`` it ends N quick tasks and says ``done TASKS_PER_S ACTS`` (the history acts
its store gained meanwhile); ``stop`` ends it.
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from tasktrail.domain import Scheduler, Worker, open_store


def acts_of(path: Path) -> int:
    """How many history acts the store holds."""
    from tasktrail.domain.store.gaps import history_acts

    with open_store(str(path), read_only=True) as store:
        return len(history_acts(store))


def _child(path: Path, archive: Path | None, out: IO[str]) -> None:
    from .retention import registry

    s = Scheduler.open(str(path), registry=registry(), snapshot_every=None)
    if archive is not None:
        s.configure_retention(keep_days=1, archive_to=archive)
    worker = Worker(s, concurrency=4, poll_ms=10)
    running = threading.Thread(target=worker.run, daemon=True)
    running.start()
    first = acts_of(path)
    while archive is not None and acts_of(path) < first + 2:
        time.sleep(0.05)
    print("ready", flush=True, file=out)
    for line in sys.stdin:
        word, *rest = line.split()
        if word == "stop":
            break
        tasks = int(rest[0])
        acts = acts_of(path)
        started = time.perf_counter()
        ids: set[str] = set()
        for _ in range(0, tasks, 100):
            with s.batch():
                ids.update(s.submit("quick", phase="start") for _ in range(100))
        while ids & s.world.live:
            time.sleep(0.01)
        rate = len(ids) / (time.perf_counter() - started)
        print(f"done {rate:.3f} {acts_of(path) - acts}", flush=True, file=out)
    worker.stop()
    running.join()
    s.close()


class _Run:
    """One worker process and its protocol."""

    def __init__(self, path: Path, archive: Path | None) -> None:
        argv = [sys.executable, "-m", "benchmarks.retention_runs", str(path)]
        self.process = subprocess.Popen(
            argv + ([str(archive)] if archive is not None else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[1],  # where ``benchmarks`` imports from
        )

    def _line(self) -> list[str]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"a worker process ended early (exit {self.process.wait()})")
        return line.split()

    def ready(self) -> None:
        said = self._line()
        if said != ["ready"]:
            raise RuntimeError(f"a worker process said {said!r}, not ready")

    def window(self, tasks: int) -> tuple[float, int]:
        assert self.process.stdin is not None
        self.process.stdin.write(f"go {tasks}\n")
        self.process.stdin.flush()
        said = self._line()
        if len(said) != 3 or said[0] != "done":
            raise RuntimeError(f"a worker process said {said!r}, not done")
        return float(said[1]), int(said[2])

    def pause(self) -> None:
        """Stop the process where it is (its threads, its keeper) until :meth:`resume`."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Ask the process to end, and wait for it (killed if it does not end in a minute,
        or is gone already: the error that ended the run is the one to see)."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write("stop\n")
            self.process.stdin.flush()
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def alternated(alone: Path, beside: Path, archive: Path, tasks: int, rounds: int) -> dict[str, Any]:
    """Both workers started together, then ``rounds`` windows of ``tasks`` each,
    alternated (the one beside first in odd rounds, second in even): rates, ratios of each
    round's pair, their medians and spread, and the keeper's acts in its windows."""
    runs = {"alone": _Run(alone, None), "beside": _Run(beside, archive)}
    try:
        began = time.perf_counter()
        for run in runs.values():
            run.ready()
        settled = time.perf_counter() - began
        runs["alone"].window(max(tasks // 10, 100))  # warm both alike
        runs["beside"].window(max(tasks // 10, 100))
        rates: dict[str, list[float]] = {"alone": [], "beside": []}
        acts = 0
        for n in range(rounds):
            order = ("beside", "alone") if n % 2 == 0 else ("alone", "beside")
            for name in order:
                other = runs["alone" if name == "beside" else "beside"]
                other.pause()
                try:
                    rate, took = runs[name].window(tasks)
                finally:
                    other.resume()
                rates[name].append(rate)
                acts += took if name == "beside" else 0
    finally:
        for run in runs.values():
            run.stop()
    ratios = [b / a for a, b in zip(rates["alone"], rates["beside"], strict=True)]
    return {
        "settled_s": round(settled, 1),
        "alone": [round(r, 1) for r in rates["alone"]],
        "beside": [round(r, 1) for r in rates["beside"]],
        "ratios": [round(r, 3) for r in ratios],
        "alone_median": statistics.median(rates["alone"]),
        "beside_median": statistics.median(rates["beside"]),
        "ratio_median": statistics.median(ratios),
        "acts": acts,
    }


if __name__ == "__main__":
    _child(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None, sys.stdout)
