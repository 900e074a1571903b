"""``python -m benchmarks.fleet [--quick] [--json PATH] [--postgres URL] [--only WHAT]
[--seconds S] [--rounds N]``: a fleet on one store.

Three measurements, each in rounds, on SQLite and on PostgreSQL:

1. **Throughput**: tasks completed per second by 1, 2 and 4 ``tasktrail worker``
   processes sharing one store (trees of a task and three owned leaves, waits of
   policy ``all``), with the conflicts the workers met per completed task.
2. **Recovery**: the time from a SIGKILL of a worker mid-phase to the moment
   another worker recorded the recovery of its task (lease 2 s; the goal is
   lease + one heartbeat, a third of the lease).
3. **Where one store stops**: the commands per second one store takes from 1 to 16
   writer processes (``benchmarks/fleet_writer.py``), each submitting, reserving and
   finishing its own tasks one command (one transaction) at a time, started behind a
   ready barrier (the clock starts once every writer has opened its store); with the
   appends the store refused per command and the errors that reached the writers
   (their stderr is kept and shown).

Figures are medians over the rounds with their min-max spread. Run from the
repository root; the PostgreSQL rows need a server (default
``postgresql://postgres@127.0.0.1:5432/test``), each round in a schema of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tasktrail.domain import Scheduler, open_store
from tasktrail.domain.tasks.events import TaskEnded, TaskRecovered

from .fleet_registry import TASKS_PER_TREE
from .report import machine, machine_line

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ("throughput", "recovery", "appends")
POSTGRES = os.environ.get("TASKTRAIL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


class Stores:
    """Fresh stores for each round: a SQLite file, or a PostgreSQL schema."""

    def __init__(self, workdir: Path, postgres: str | None) -> None:
        self.workdir = workdir
        self.postgres = postgres
        self.schemas: list[str] = []

    def new(self, kind: str) -> str:
        name = f"fleet_{uuid.uuid4().hex[:10]}"
        if kind == "sqlite":
            return str(self.workdir / f"{name}.db")
        import psycopg

        assert self.postgres is not None
        with psycopg.connect(self.postgres, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        self.schemas.append(name)
        return f"{self.postgres}?schema={name}"

    def drop(self) -> None:
        if not self.schemas:
            return
        import psycopg

        assert self.postgres is not None
        with psycopg.connect(self.postgres, autocommit=True) as conn:
            for name in self.schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _worker(location: str, name: str, stats: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tasktrail.replay.cli", "worker"]
    command += ["benchmarks.fleet_registry:registry", "--store", location, "--worker", name]
    command += ["--lease", "2000", "--poll", "20", "--quiet", "--stats", str(stats)]
    return subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)


class _EndedCounter:
    """Counts ``TaskEnded`` events as they arrive, on one connection, reading only what
    is new: the watcher must not load the store it measures."""

    def __init__(self, location: str) -> None:
        self.store = open_store(location)
        self.position = 0
        self.ended = 0

    def __call__(self) -> int:
        for recorded in self.store.read(after=self.position):
            self.position = recorded.position
            self.ended += isinstance(recorded.event, TaskEnded)
        return self.ended


def _submit_trees(location: str, trees: int) -> None:
    from .fleet_registry import registry

    s = Scheduler.open(location, registry=registry, worker="submitter")
    with s.batch():
        for _ in range(trees):
            s.submit("tree")
    s.close()


def _wait_for_leases(location: str, workers: int) -> None:
    """Until ``workers`` workers hold a lease: started, imported, their store open."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        s = Scheduler.open(location, worker="observer")
        try:
            if len(s.leases.alive(s.now()) - {"observer"}) >= workers:
                return
        finally:
            s.close()
        time.sleep(0.05)
    raise TimeoutError(f"{workers} workers did not start within 60 s")


def throughput(stores: Stores, kind: str, workers: int, trees: int) -> dict[str, float]:
    """One round: ``trees`` trees run by ``workers`` processes; tasks/s and conflicts/task.

    The clock starts once every worker is up and idle, when the trees are submitted:
    what is timed is the fleet working, not Python starting."""
    location = stores.new(kind)
    Scheduler.open(location, worker="setup").close()
    stats = stores.workdir / f"stats-{uuid.uuid4().hex[:8]}.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [_worker(location, f"w{n}", stats, env) for n in range(workers)]
    _wait_for_leases(location, workers)
    started = time.monotonic()
    _submit_trees(location, trees)
    total = trees * TASKS_PER_TREE
    ended = _EndedCounter(location)
    try:
        while ended() < total:
            if time.monotonic() - started > 300:
                raise TimeoutError(f"{workers} workers on {kind}: not done in 300 s")
            time.sleep(0.1)
        elapsed = time.monotonic() - started
    finally:
        ended.store.close()
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(30)
    totals = [json.loads(line) for line in stats.read_text().splitlines()]
    conflicts = sum(t["conflicts"] for t in totals)
    return {"tasks_per_s": total / elapsed, "conflicts_per_task": conflicts / total}


def _holds(location: str, worker: str) -> bool:
    """Whether ``worker`` holds a running task now (folded from the log)."""
    from tasktrail.replay import replay

    live = replay(location, audit=False).live.values()
    return any(task.status == "running" and task.worker == worker for task in live)


def recovery(stores: Stores, kind: str) -> float:
    """One round: ms from a SIGKILL mid-phase to the recovery another worker recorded."""
    location = stores.new(kind)
    _submit_trees(location, 40)
    stats = stores.workdir / f"stats-{uuid.uuid4().hex[:8]}.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TASKTRAIL_BENCH_PHASE_MS": "200"}
    victim, survivor = _worker(location, "victim", stats, env), _worker(location, "ok", stats, env)
    try:
        # Phases of 200 ms: kill as soon as the victim holds a task, so it dies mid-phase.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _holds(location, "victim"):
            time.sleep(0.01)
        victim.send_signal(signal.SIGKILL)
        killed_at = time.time() * 1000
        victim.wait(10)
        if not _holds(location, "victim"):
            raise RuntimeError("the victim held no task when killed: nothing to recover")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open_store(location) as store:
                recovered = [r.event.at for r in store.read() if isinstance(r.event, TaskRecovered)]
            if recovered:
                return min(recovered) - killed_at
            time.sleep(0.05)
        raise TimeoutError("no recovery within 30 s")
    finally:
        survivor.send_signal(signal.SIGTERM)
        survivor.wait(30)


def appends(stores: Stores, kind: str, writers: int, seconds: float) -> dict[str, Any]:
    """One round: ``writers`` processes (``benchmarks/fleet_writer.py``) submit, reserve
    and finish tasks on one store for ``seconds``. The clock starts once every writer
    has opened its store (a ready barrier: imports and opens are not timed). Returns
    commands/s, the appends the store refused per command (by cause), the errors that
    reached the writers, and what they wrote to stderr."""
    location = stores.new(kind)
    Scheduler.open(location, worker="setup").close()  # tables made before the race
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "benchmarks.fleet_writer", location]
    with contextlib.ExitStack() as files:
        errs = [files.enter_context(tempfile.TemporaryFile(mode="w+")) for _ in range(writers)]
        processes = [
            subprocess.Popen(
                [*command, f"writer{n}", "--seconds", str(seconds)],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errs[n],
                text=True,
            )
            for n in range(writers)
        ]
        try:
            ready = [p.stdout.readline() if p.stdout else "" for p in processes]
            for process in processes:  # the barrier: every writer is open
                if process.stdin is not None:
                    process.stdin.write("go\n")
                    process.stdin.flush()
            outputs = [p.communicate(timeout=seconds + 300)[0] for p in processes]
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
        reports, stderr = [], []
        for n, (process, output) in enumerate(zip(processes, outputs, strict=True)):
            errs[n].seek(0)
            text = errs[n].read().strip()
            if text:
                stderr.append(f"writer{n}: {text.splitlines()[-1]}")
            if ready[n] != "ready\n" or process.returncode != 0 or not output.strip():
                stderr.append(f"writer{n}: exit {process.returncode}, no report")
                continue
            reports.append(json.loads(output))
    issued = sum(r["commands"] for r in reports) or 1
    errors: dict[str, int] = {}
    for report in reports:
        for name, count in report["errors"].items():
            errors[name] = errors.get(name, 0) + count
    return {
        "commands_per_s": sum(r["commands"] / r["seconds"] for r in reports),
        "refused_per_command": sum(sum(r["refused"].values()) for r in reports) / issued,
        "clock_refused_per_command": sum(r["refused"].get("clock", 0) for r in reports) / issued,
        "errors": errors,
        "stderr": stderr[:5],
    }


def writer_races(
    stores: Stores, kinds: list[str], counts: tuple[int, ...], rounds: int, seconds: float
) -> dict[str, Any]:
    """:func:`appends` for every store and writer count, rounds outermost: a round runs
    them all back to back, so a burst of load on the (shared) machine touches one
    round's figures alike, and each count's ratio to one writer is taken within its
    round (the figure is the median of those ratios, with their min-max)."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(rounds):
        for kind in kinds:
            for writers in counts:
                run = appends(stores, kind, writers, seconds)
                runs.setdefault(f"{kind}/{writers}", []).append(run)
                print(kind, writers, "writers", {k: run[k] for k in list(run)[:3]}, flush=True)
    rows: dict[str, Any] = {}
    for key, done in runs.items():
        ones = runs.get(f"{key.split('/')[0]}/1", [])
        ratios = [
            r["commands_per_s"] / o["commands_per_s"] for r, o in zip(done, ones, strict=False)
        ]
        rows[key] = {
            "commands_per_s": spread([r["commands_per_s"] for r in done]),
            "ratio_to_one_writer": spread(ratios or [0.0]),
            "refused_per_command": spread([r["refused_per_command"] for r in done]),
            "clock_refused_per_command": spread([r["clock_refused_per_command"] for r in done]),
            "errors": sum(sum(r["errors"].values()) for r in done),
            "stderr": [line for r in done for line in r["stderr"]][:5],
        }
    return rows


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max of a round's figures."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer trees, rounds and writers")
    parser.add_argument("--json", default=None, help="write the figures as JSON to this file")
    parser.add_argument("--postgres", default=POSTGRES, help="server URL ('' to skip)")
    parser.add_argument(
        "--only", choices=MEASUREMENTS, action="append", help="run only these (repeatable)"
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="a writer round's length")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of each figure")
    args = parser.parse_args(argv)
    # Since group commit a worker runs about a thousand of these tasks a second: enough
    # trees that a round lasts seconds, not the fraction of one that start-up noise fills.
    rounds, trees = (2, 200) if args.quick else (3, 600)
    rounds = args.rounds or rounds
    only = set(args.only or MEASUREMENTS)
    writer_counts = (1, 4, 16) if args.quick else (1, 2, 4, 8, 16)
    kinds = ["sqlite"] + (["postgresql"] if args.postgres else [])
    results: dict[str, Any] = {"machine": machine(), "throughput": {}, "recovery": {}}
    results["appends"] = {}
    with tempfile.TemporaryDirectory(prefix="tasktrail-fleet-") as tmp:
        stores = Stores(Path(tmp), args.postgres or None)
        try:
            for kind in kinds:
                for workers in (1, 2, 4) if "throughput" in only else ():
                    runs = [throughput(stores, kind, workers, trees) for _ in range(rounds)]
                    results["throughput"][f"{kind}/{workers}"] = {
                        "tasks_per_s": spread([r["tasks_per_s"] for r in runs]),
                        "conflicts_per_task": spread([r["conflicts_per_task"] for r in runs]),
                    }
                    print(kind, workers, "workers", results["throughput"][f"{kind}/{workers}"])
                if "recovery" in only:
                    runs_ms = [recovery(stores, kind) for _ in range(rounds)]
                    results["recovery"][kind] = spread(runs_ms)
                    print(kind, "recovery ms", results["recovery"][kind])
            if "appends" in only:
                results["appends"] = writer_races(
                    stores, kinds, writer_counts, rounds, args.seconds
                )
        finally:
            stores.drop()
    print(format_fleet(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def format_fleet(results: dict[str, Any]) -> str:
    """The figures as markdown tables."""
    lines = [f"Machine: {machine_line(results['machine'])}", ""]
    lines += [
        "| store | workers | tasks/s (median, min-max) | conflicts per task |",
        "|---|---|---|---|",
    ]
    for key, row in results["throughput"].items():
        kind, workers = key.split("/")
        t, c = row["tasks_per_s"], row["conflicts_per_task"]
        lines.append(
            f"| {kind} | {workers} | {t['median']:.0f} ({t['min']:.0f}-{t['max']:.0f}) "
            f"| {c['median']:.3f} ({c['min']:.3f}-{c['max']:.3f}) |"
        )
    lines += ["", "| store | kill to recovery, ms (median, min-max) | goal: lease + heartbeat |"]
    lines += ["|---|---|---|"]
    for kind, r in results["recovery"].items():
        verdict = "met" if r["max"] <= 2000 + 2000 / 3 else "MISSED"
        lines.append(
            f"| {kind} | {r['median']:.0f} ({r['min']:.0f}-{r['max']:.0f}) | <= 2667 {verdict} |"
        )
    lines += ["", APPENDS_HEADER, "|---|---|---|---|---|---|---|"]
    for key, r in results["appends"].items():
        kind, writers = key.split("/")
        if "commands_per_s" not in r:
            continue  # a figure of the benchmark before issue 28: commands/s alone
        rate, refused, clock = (
            r["commands_per_s"],
            r["refused_per_command"],
            r["clock_refused_per_command"],
        )
        ratio = r["ratio_to_one_writer"]
        lines.append(
            f"| {kind} | {writers} | {rate['median']:.0f} ({rate['min']:.0f}-{rate['max']:.0f}) "
            f"| {ratio['median']:.2f}x ({ratio['min']:.2f}-{ratio['max']:.2f}) "
            f"| {refused['median']:.3f} ({refused['min']:.3f}-{refused['max']:.3f}) "
            f"| {clock['median']:.3f} | {r['errors']} |"
        )
    return "\n".join(lines)


APPENDS_HEADER = (
    "| store | writer processes | commands/s (median, min-max) | vs 1 writer, per round "
    "| refused appends per command (median, min-max) | of them the time guard's | errors |"
)


if __name__ == "__main__":
    sys.exit(main())
