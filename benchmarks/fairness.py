"""SQLite writer fairness: writer processes submit to one store at ``durability="full"``
as fast as they can for a while; each writer's share of the commands, against its fair
share (1/N), and the verdict of issue 15: no writer gets less than a quarter of its
fair share.

    python -m benchmarks.fairness                     # 4 writers x 60 s, 1 round
    python -m benchmarks.fairness --writers 4 --seconds 20 --rounds 2

No timing is asserted anywhere; the shares are printed (and written with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .fleet import ROOT

WRITER = """
import sys, time
from tasktrail.domain import Registry, Scheduler, TaskDefinition
registry = Registry([TaskDefinition("job", 1, {"go": lambda inv: inv.finish()})])
s = Scheduler.open(sys.argv[1], registry=registry, worker=sys.argv[2])
start, stop, n = float(sys.argv[3]), float(sys.argv[4]), 0
late = time.time() - start
while time.time() < start:
    time.sleep(0.001)
while time.time() < stop:
    s.submit("job")
    n += 1
print(n, late)
s.close()
"""
"""benchmarks.fleet's writer, also saying how late it opened (after the start: its
count covers less than the whole time)."""

GOAL = 0.25
"""The least share of its fair share a writer may get (issue 15)."""


def counts(path: Path, writers: int, seconds: float) -> list[int]:
    """Commands each of ``writers`` processes submitted to the SQLite store at ``path``
    in ``seconds`` (every process open before the clock starts)."""
    from tasktrail.domain import Scheduler

    Scheduler.open(str(path), worker="setup").close()  # tables made before the race
    start = time.time() + 3.0 + 0.5 * writers
    stop = start + seconds
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"writer{n}", str(start), str(stop)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(writers)
    ]
    per_writer = []
    for n, process in enumerate(processes):
        out, err = process.communicate(timeout=seconds + 120)
        if process.returncode != 0:  # a writer that failed is shown, not counted as starved
            last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
            print(f"writer{n} failed: {last[0]}", file=sys.stderr)
        count, late = [*out.decode().split(), "0", "0"][:2]
        if float(late) > 0:
            print(f"writer{n} opened {float(late):.1f} s after the start", file=sys.stderr)
        per_writer.append(int(count))
    return per_writer


def shares(per_writer: list[int]) -> list[float]:
    """Each writer's commands as a fraction of its fair share (1.0: exactly fair)."""
    total = sum(per_writer)
    fair = total / len(per_writer) if total else 1.0
    return [n / fair for n in per_writer]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fairness", description=__doc__)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", default=None, help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tasktrail-fairness-") as tmp:
        for n in range(args.rounds):
            per_writer = counts(Path(tmp) / f"round{n}.db", args.writers, args.seconds)
            got = shares(per_writer)
            rounds.append({"commands": per_writer, "shares": got})
            print(
                f"round {n + 1}: {args.writers} writers x {args.seconds:g} s, commands "
                f"{per_writer} ({sum(per_writer) / args.seconds:,.0f}/s), share of fair "
                f"min {min(got):.2f} max {max(got):.2f}"
            )
    worst = min(min(r["shares"]) for r in rounds)
    verdict = "met" if worst >= GOAL else "MISSED"
    print(f"worst writer: {worst:.2f} of its fair share; goal >= {GOAL} {verdict}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rounds": rounds, "worst": worst}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
