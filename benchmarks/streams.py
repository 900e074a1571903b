"""``python -m benchmarks.streams``: a task's output stream, emitted and read (issue 44).

**Emit-to-read latency.** A phase emits a chunk carrying the wall time it was emitted
(``paced``: one every ``--every-ms``, 20 ms by default, a model's tokens at 50 a second);
a caller reads the stream (``Scheduler.read_stream``, woken by the store's news) and
takes, for each chunk, the time it had it less the time it was emitted. ``one process``:
the worker (a :class:`~tasktrail.domain.Worker` in a thread) and the reader share one
scheduler; ``across processes``: the worker is a ``tasktrail worker`` process and the
reader this one, a scheduler that is no worker. Goals: median at most 20 ms in one
process and 50 ms across (Temporal's workflow streams take about 100 ms, its README).

**Cost to running tasks.** 32 ``busy`` tasks (phases of ``--phase-ms``, 10 ms, of sleep
then a checkpoint, in one worker of concurrency 40) run for ``--window-s`` seconds with
and without a ``flood`` task beside them emitting 1,000 chunks a second, rounds
interleaved; the cost is one less the ratio of their phases a second. Goal: at most 10%.

Figures: each round's median and p95 (latency) or rate, then the median over the rounds
with their min-max. ``--quick`` runs a tiny size and gives no verdict.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tasktrail.domain import Scheduler, Worker

from .concurrency import _choice, _met, spread
from .concurrency_runs import _end
from .fleet import POSTGRES, ROOT, Stores, _wait_for_leases
from .report import machine
from .roundtrip import p95
from .streams_registry import BUSY, FLOOD, registry

LATENCY_GOAL_MS = {"one process": 20.0, "across processes": 50.0}
COST_GOAL = 0.10
LINGER: dict[str, float] = {}
"""``--linger-ms``: the stream writer's linger in this process's schedulers, if given."""


def _read_latencies(s: Scheduler, task_id: str) -> list[float]:
    """Each chunk's emit-to-read time (ms), read as it comes."""
    latencies = []
    for _, value in s.read_stream(task_id, timeout=60):
        latencies.append((time.time() - value["t"]) * 1000.0)
    return latencies


def _latency_in_process(location: str, chunks: int, every_ms: float) -> list[float]:
    s = Scheduler.open(location, registry=registry, worker="bench")
    s.stream_linger_s = LINGER.get("s", s.stream_linger_s)
    worker = Worker(s, concurrency=4, poll_ms=20)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        task = s.submit("paced", phase="talk", memos={"count": chunks, "every_ms": every_ms})
        return _read_latencies(s, task)
    finally:
        worker.stop()
        runner.join(30)


def _latency_across(location: str, chunks: int, every_ms: float) -> list[float]:
    command = [sys.executable, "-m", "tasktrail.replay.cli", "worker"]
    command += ["benchmarks.streams_registry:registry", "--store", location, "--worker", "w1"]
    worker = subprocess.Popen(
        [*command, "--poll", "20", "--quiet"], cwd=ROOT, stderr=subprocess.DEVNULL
    )
    try:
        _wait_for_leases(location, 1)
        with Scheduler.open(location, worker="reader") as s:  # no registry: no worker
            task = s.submit("paced", phase="talk", memos={"count": chunks, "every_ms": every_ms})
            return _read_latencies(s, task)
    finally:
        _end([worker])


def _busy_rate(location: str, tasks: int, window_s: float, flood: bool) -> dict[str, float]:
    """The busy tasks' phases a second over ``window_s`` (after a warm-up), with or
    without a flooding task beside them; and the flood's chunks a second."""
    BUSY.stop.clear()
    BUSY.phases = FLOOD.emitted = 0
    s = Scheduler.open(location, registry=registry, worker="bench")
    s.stream_linger_s = LINGER.get("s", s.stream_linger_s)
    worker = Worker(s, concurrency=tasks + 8, poll_ms=20)
    for _ in range(tasks):
        s.submit("busy", phase="a")
    flooding = s.submit("flood", phase="go") if flood else None
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    time.sleep(min(1.0, window_s / 2))  # every task running
    before, started = BUSY.phases, time.monotonic()
    time.sleep(window_s)
    after, took = BUSY.phases, time.monotonic() - started
    BUSY.stop.set()
    if flooding is not None:
        s.result(flooding, timeout=60)
    worker.stop()
    runner.join(60)
    out = {"phases_per_s": (after - before) / took}
    if flooding is not None:
        out["chunks_per_s"] = FLOOD.emitted / (took + min(1.0, window_s / 2))
    return out


def run_all(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Every round asked for; figures by key ``store/measure``."""
    results: dict[str, Any] = {}
    stores = Stores(workdir, args.postgres or None)
    BUSY.phase_s = args.phase_ms / 1000.0
    try:
        for store in args.stores:
            latencies: dict[str, list[list[float]]] = {name: [] for name in LATENCY_GOAL_MS}
            rates: dict[bool, list[dict[str, float]]] = {False: [], True: []}
            for _ in range(args.rounds):
                for name, measure in (
                    ("one process", _latency_in_process),
                    ("across processes", _latency_across),
                ):
                    latencies[name].append(measure(stores.new(store), args.chunks, args.every_ms))
                for flood in (False, True):  # side by side in each round
                    rate = _busy_rate(stores.new(store), args.tasks, args.window_s, flood)
                    rates[flood].append(rate)
                stores.drop()
                stores.schemas.clear()
            for name, rounds in latencies.items():
                results[f"{store}/latency {name}"] = {
                    "count": len(rounds[0]),
                    "median_ms": spread([statistics.median(r) for r in rounds]),
                    "p95_ms": spread([p95(r) for r in rounds]),
                }
            plain = [r["phases_per_s"] for r in rates[False]]
            beside = [r["phases_per_s"] for r in rates[True]]
            results[f"{store}/cost"] = {
                "tasks": args.tasks,
                "phases_per_s_alone": spread(plain),
                "phases_per_s_beside_flood": spread(beside),
                "flood_chunks_per_s": spread([r["chunks_per_s"] for r in rates[True]]),
                "cost": spread([1 - b / a for a, b in zip(plain, beside, strict=True)]),
            }
            for key in [k for k in results if k.startswith(f"{store}/")]:
                print(format_row(key, results[key]), file=sys.stderr, flush=True)
    finally:
        stores.drop()
    return results


def _f(s: dict[str, float], digits: int = 1) -> str:
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def format_row(key: str, f: dict[str, Any]) -> str:
    """One measure as a markdown table row."""
    store, what = key.split("/")
    if what == "cost":
        return (
            f"| {store} | {f['tasks']} busy tasks: phases/s alone {_f(f['phases_per_s_alone'])}, "
            f"beside 1 task emitting {_f(f['flood_chunks_per_s'], 0)} chunks/s "
            f"{_f(f['phases_per_s_beside_flood'])} | cost {_f(f['cost'], 3)} |"
        )
    return (
        f"| {store} | emit-to-read {what}: {f['count']} chunks a round | median "
        f"{_f(f['median_ms'])} ms, p95 {_f(f['p95_ms'])} ms |"
    )


def goals(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The issue's goals the figures can judge, each with its figures and verdict."""
    out = []
    for key, f in results.items():
        store, what = key.split("/")
        if what == "cost":
            cost = f["cost"]["median"]
            goal = f"cost to {f['tasks']} tasks <= {COST_GOAL:.0%} on {store}"
            out.append((goal, f"{cost:.1%}", _met(cost <= COST_GOAL)))
            continue
        name = what.removeprefix("latency ")
        limit, ms = LATENCY_GOAL_MS[name], f["median_ms"]["median"]
        goal = f"median emit-to-read {name} <= {limit:.0f} ms on {store}"
        out.append((goal, f"{ms:.1f} ms", _met(ms <= limit)))
    return out


def format_table(results: dict[str, Any], verdicts: bool = True) -> str:
    """Every measure, then the goals."""
    lines = ["| store | measure | figures (median of rounds, min-max) |", "|---|---|---|"]
    lines += [format_row(key, f) for key, f in results.items()]
    lines += ["", "| goal | figure | verdict |", "|---|---|---|"]
    for goal, figure, verdict in goals(results):
        lines.append(f"| {goal} | {figure} | {verdict if verdicts else '(quick: no verdict)'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.streams", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 3; quick 1)")
    parser.add_argument("--quick", action="store_true", help="a tiny size, no verdicts")
    parser.add_argument("--chunks", type=int, default=None, help="chunks a latency round (200)")
    parser.add_argument("--every-ms", type=float, default=None, help="ms between chunks (20)")
    parser.add_argument("--tasks", type=int, default=None, help="busy tasks (default 32)")
    parser.add_argument("--phase-ms", type=float, default=None, help="a busy phase, ms (10)")
    parser.add_argument("--window-s", type=float, default=None, help="s timed a cost round (5)")
    parser.add_argument(
        "--linger-ms",
        type=float,
        default=None,
        help="Scheduler.stream_linger_s, in ms (its default)",
    )
    parser.add_argument("--stores", default="sqlite,postgresql", help="sqlite,postgresql")
    parser.add_argument("--postgres", default=POSTGRES, help="server URL")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    args.stores = _choice(parser, "--stores", args.stores, {"sqlite", "postgresql"})
    quick = dict(rounds=1, chunks=5, every_ms=5.0, tasks=4, phase_ms=5.0, window_s=0.5)
    full = dict(rounds=3, chunks=200, every_ms=20.0, tasks=32, phase_ms=10.0, window_s=5.0)
    for name, default in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.rounds < 1 or args.chunks < 1 or args.tasks < 1 or args.window_s <= 0:
        parser.error("--rounds, --chunks and --tasks must be >= 1, --window-s > 0")
    if args.linger_ms is not None:
        LINGER["s"] = args.linger_ms / 1000.0
    with tempfile.TemporaryDirectory(prefix="tasktrail-streams-") as tmp:
        results = run_all(args, Path(tmp))
    print(format_table(results, verdicts=not args.quick))
    if args.json:
        sizes = {k: getattr(args, k) for k in full}
        figures = {"machine": machine(), "sizes": sizes, "runs": results}
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
