"""``python -m benchmarks.flow``: flow control across a fleet (issue 44, rule 33).

``--workers`` ``tasktrail worker`` processes (default 4) at ``--concurrency`` (32) on
one store run ``--tasks`` tasks (200) of ``--tenants`` tenants (10) whose kind allows
``--limit`` (3) running at once per tenant; each task is one phase of ``--phase-ms``
(1000 ms: a model's answer). The tasks are submitted together, in one transaction,
once every worker is up.

Two figures a round, read from the log afterwards:

- **most running per tenant at any position**: the log folded event by event, the
  tasks running a phase counted by their tenant memo after each event (goal: the
  limit, never more);
- **throughput against the ideal the limit allows**: the ideal makespan is
  ``ceil(tasks per tenant / limit)`` phases back to back (every tenant's slots always
  busy), the measured one from the submission's commit to the last task's end (the
  workers' clock, this machine's); the ratio ideal / measured (goal: at least 0.9).
  Where the rest went: the first start after the commit, a phase from its start to
  its end (its sleep, its thread, its finish decision), and a slot's gap (a tenant's
  task ending to the tenant's next start), medians; the per-start overhead is fixed,
  so a shorter phase (``--phase-ms 200``) shows it as a larger share.

Medians over ``--rounds`` (3) with their min-max; on SQLite and PostgreSQL
(``--stores``). ``--quick`` runs a tiny size and gives no verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tasktrail.domain import Scheduler, World, open_store
from tasktrail.domain.tasks.events import TaskEnded, TaskSubmitted

from .concurrency import _choice, _met, spread
from .fleet import POSTGRES, Stores, _wait_for_leases
from .report import machine

ROOT = Path(__file__).resolve().parent.parent
MOST_GOAL, RATIO_GOAL = "the limit", 0.9
SETTLE_S = 1.0
"""How long the workers are left after their leases show, before the submission: their
loops reach their first idle wait (where a PostgreSQL worker starts listening)."""


@dataclass(frozen=True)
class Sizes:
    """One round's fleet and work."""

    workers: int = 4
    concurrency: int = 32
    tasks: int = 200
    tenants: int = 10
    limit: int = 3
    phase_ms: float = 1000.0


QUICK = Sizes(workers=2, concurrency=4, tasks=16, tenants=4, limit=2, phase_ms=50.0)


def _worker(location: str, name: str, sizes: Sizes, stats: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env["TASKTRAIL_BENCH_PHASE_MS"] = str(sizes.phase_ms)
    env["TASKTRAIL_BENCH_LIMIT"] = str(sizes.limit)
    command = [sys.executable, "-m", "tasktrail.replay.cli", "worker"]
    command += ["benchmarks.flow_registry:registry", "--store", location, "--worker", name]
    command += ["--concurrency", str(sizes.concurrency), "--quiet", "--stats", str(stats)]
    return subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)


def _ended(location: str) -> int:
    with open_store(location, read_only=True) as store:
        return sum(isinstance(r.event, TaskEnded) for r in store.read())


def read_round(location: str, limit: int, submitted_at: float) -> dict[str, Any]:
    """The log folded event by event: the most tasks running a phase per tenant after
    any event, the makespan from ``submitted_at`` (ms: when the submission was
    committed) to the last end, how many ended; and where the time went: the first
    start after the submission, each phase from its start to its end (the decisions'
    times), and each slot's gap (a tenant's task ending to the next one of the tenant
    starting), as medians."""
    world = World()
    tenant_of: dict[str, str] = {}
    running: set[str] = set()
    now: dict[str, int] = {}
    most: dict[str, int] = {}
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    with open_store(location, read_only=True) as store:
        for recorded in store.read():
            event = recorded.event
            world.apply_stored(recorded.position, event, recorded.originator_version)
            if isinstance(event, TaskSubmitted) and event.memos:
                tenant_of[event.task_id] = event.memos["tenant"]
            if not type(event).task_stream or event.task_id not in tenant_of:
                continue
            task, tenant = world.tasks[event.task_id], tenant_of[event.task_id]
            runs = task.status == "running" and task.mode == "run"
            if runs != (event.task_id in running):
                (running.add if runs else running.discard)(event.task_id)
                now[tenant] = now.get(tenant, 0) + (1 if runs else -1)
                most[tenant] = max(most.get(tenant, 0), now[tenant])
                if runs:
                    starts.setdefault(event.task_id, event.at)
            if isinstance(event, TaskEnded):
                ends[event.task_id] = event.at
    gaps = []
    for tenant in set(tenant_of.values()):
        mine = [t for t in starts if tenant_of[t] == tenant and t in ends]
        # The k-th start after the first `limit` takes the slot the k-th end freed.
        later = sorted(starts[t] for t in mine)[limit:]
        freed = sorted(ends[t] for t in mine)
        gaps += [start - end for start, end in zip(later, freed, strict=False)]
    return {
        "most": max(most.values()),
        "makespan_ms": max(ends.values()) - submitted_at,
        "ended": len(ends),
        "first_start_ms": min(starts.values()) - submitted_at,
        "phase_ms": statistics.median(ends[t] - starts[t] for t in ends),
        "gap_ms": statistics.median(gaps) if gaps else 0.0,
    }


def measure(stores: Stores, kind: str, sizes: Sizes) -> dict[str, Any]:
    """One round: the fleet started, the tasks submitted together, run to their end."""
    from .flow_registry import make_registry

    registry = make_registry(sizes.limit, sizes.phase_ms)
    location = stores.new(kind)
    Scheduler.open(location, worker="setup").close()
    stats = stores.workdir / f"stats-{uuid.uuid4().hex[:8]}.jsonl"
    processes = [_worker(location, f"w{n}", sizes, stats) for n in range(sizes.workers)]
    try:
        _wait_for_leases(location, sizes.workers)
        time.sleep(SETTLE_S)  # up and idle: each listening for the store's news
        submitter = Scheduler.open(location, registry=registry, worker="submitter")
        with submitter.batch():
            for n in range(sizes.tasks):
                submitter.submit("tenant_call", memos={"tenant": f"t{n % sizes.tenants}"})
        submitted_at = time.time() * 1000  # committed: the workers' clock, this machine's
        submitter.close()
        deadline = time.monotonic() + 600
        while _ended(location) < sizes.tasks:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{kind}: the tasks did not end within 600 s")
            time.sleep(0.2)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(60)
    figures = read_round(location, sizes.limit, submitted_at)
    totals = [json.loads(line) for line in stats.read_text().splitlines()]
    figures["conflicts_per_task"] = sum(t["conflicts"] for t in totals) / sizes.tasks
    per_tenant = math.ceil(sizes.tasks / sizes.tenants)
    ideal_ms = math.ceil(per_tenant / sizes.limit) * sizes.phase_ms
    figures["ideal_ms"] = ideal_ms
    figures["ratio"] = ideal_ms / figures["makespan_ms"]
    figures["tasks_per_s"] = sizes.tasks / figures["makespan_ms"] * 1000
    return figures


def run_all(stores_asked: list[str], sizes: Sizes, rounds: int, postgres: str) -> dict[str, Any]:
    """Every round on every store asked for, by store."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tasktrail-flow-") as tmp:
        stores = Stores(Path(tmp), postgres or None)
        try:
            for kind in stores_asked:
                runs = [measure(stores, kind, sizes) for _ in range(rounds)]
                results[kind] = {
                    "rounds": runs,
                    "most": spread([r["most"] for r in runs]),
                    "ratio": spread([r["ratio"] for r in runs]),
                    "tasks_per_s": spread([r["tasks_per_s"] for r in runs]),
                    "makespan_ms": spread([r["makespan_ms"] for r in runs]),
                    "first_start_ms": spread([r["first_start_ms"] for r in runs]),
                    "phase_ms": spread([r["phase_ms"] for r in runs]),
                    "gap_ms": spread([r["gap_ms"] for r in runs]),
                    "conflicts_per_task": spread([r["conflicts_per_task"] for r in runs]),
                    "ideal_ms": runs[0]["ideal_ms"],
                }
                print(format_row(kind, results[kind], sizes), file=sys.stderr, flush=True)
        finally:
            stores.drop()
    return results


def _s(s: dict[str, float], digits: int = 2) -> str:
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def format_row(kind: str, f: dict[str, Any], sizes: Sizes) -> str:
    """One store's figures as a markdown table row."""
    return (
        f"| {kind} | {sizes.workers} x {sizes.concurrency} | {sizes.tasks} / {sizes.tenants} "
        f"/ {sizes.limit} | {sizes.phase_ms:.0f} | {_s(f['most'], 0)} "
        f"| {_s(f['makespan_ms'], 0)} ({f['ideal_ms']:.0f} ideal) | {_s(f['tasks_per_s'], 1)} "
        f"| {_s(f['ratio'])} | {_s(f['first_start_ms'], 0)} | {_s(f['phase_ms'], 0)} "
        f"| {_s(f['gap_ms'], 0)} | {_s(f['conflicts_per_task'])} |"
    )


def format_table(results: dict[str, Any], sizes: Sizes, verdicts: bool = True) -> str:
    """The figures, then the goals."""
    lines = [
        "| store | workers x concurrency | tasks / tenants / limit | phase ms "
        "| most running per tenant | makespan ms | tasks/s | vs ideal | first start ms "
        "| phase ms | slot gap ms | conflicts/task |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [format_row(kind, f, sizes) for kind, f in results.items()]
    lines += ["", "| goal | figures | verdict |", "|---|---|---|"]
    for goal, figures, verdict in goals(results, sizes):
        lines.append(f"| {goal} | {figures} | {verdict if verdicts else '(quick: no verdict)'} |")
    return "\n".join(lines)


def goals(results: dict[str, Any], sizes: Sizes) -> list[tuple[str, str, str]]:
    """Each store's two goals: never more than the limit running per tenant (in any
    round), and the median ratio to the ideal at least 0.9."""
    out = []
    for kind, f in results.items():
        most = f["most"]["max"]
        out.append(
            (
                f"most running per tenant <= {sizes.limit} on {kind}",
                f"{most:.0f} (every round)",
                _met(most <= sizes.limit),
            )
        )
        ratio = f["ratio"]["median"]
        out.append(
            (
                f"throughput >= {RATIO_GOAL} x ideal on {kind}",
                f"{_s(f['ratio'])}",
                _met(ratio >= RATIO_GOAL),
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.flow", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--quick", action="store_true", help="a tiny size, no verdicts")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 3; quick 1)")
    parser.add_argument("--stores", default="sqlite,postgresql", help="sqlite,postgresql")
    for name in ("workers", "concurrency", "tasks", "tenants", "limit"):
        parser.add_argument(
            f"--{name}", type=int, default=None, help=f"default {getattr(Sizes(), name)}"
        )
    parser.add_argument("--phase-ms", type=float, default=None, help="default 1000")
    parser.add_argument("--postgres", default=POSTGRES, help="server URL")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    stores = _choice(parser, "--stores", args.stores, {"sqlite", "postgresql"})
    base = QUICK if args.quick else Sizes()
    given = {k: v for k, v in vars(args).items() if k in asdict(base) and v is not None}
    sizes = Sizes(**{**asdict(base), **given})
    if min(sizes.workers, sizes.concurrency, sizes.tasks, sizes.tenants, sizes.limit) < 1:
        parser.error("the sizes must be >= 1")
    if sizes.phase_ms <= 0:
        parser.error("--phase-ms must be > 0")
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    if rounds < 1:
        parser.error("--rounds must be >= 1")
    results = run_all(stores, sizes, rounds, args.postgres)
    print(format_table(results, sizes, verdicts=not args.quick))
    if args.json:
        figures = {"machine": machine(), "sizes": asdict(sizes), "rounds": rounds, "runs": results}
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
