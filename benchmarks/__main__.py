"""``python -m benchmarks [--quick] [--json PATH] [--dir DIR]``: run every benchmark once,
print the table, write the figures as JSON."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import append, ledger, memory, plain_es, projection, replaying
from .report import Figure, format_table, machine, machine_line, without_verdicts
from .workload import EVENTS_PER_CYCLE, build_store, cycles_for


@dataclass(frozen=True)
class Sizes:
    """How much work each benchmark does."""

    command_cycles_full: int
    command_cycles_normal: int
    batch_cycles: int
    replay_cycles: int
    lag_seconds: float
    memory_events: tuple[int, ...]
    ledger_runs: tuple[int, ...]
    rounds: int
    command_rounds: int
    memory_budget: int


QUICK = Sizes(
    command_cycles_full=cycles_for(1_000),
    command_cycles_normal=cycles_for(4_000),
    batch_cycles=cycles_for(16_000),
    replay_cycles=cycles_for(16_000),
    lag_seconds=2.5,
    memory_events=(10_000, 100_000),
    ledger_runs=(1_000, 10_000),
    rounds=2,
    command_rounds=4,
    memory_budget=60_000,
)
FULL = Sizes(
    command_cycles_full=cycles_for(2_000),
    command_cycles_normal=cycles_for(10_000),
    batch_cycles=cycles_for(100_000),
    replay_cycles=cycles_for(100_000),
    lag_seconds=10.0,
    memory_events=(10_000, 100_000, 1_000_000),
    ledger_runs=(1_000, 10_000, 100_000),
    rounds=3,
    command_rounds=5,
    memory_budget=300_000,
)
"""The sizes are in events of the mixed workload (see :mod:`.workload`)."""


def run(sizes: Sizes, workdir: Path, log: object = sys.stderr) -> list[Figure]:
    """Every benchmark, in order; progress goes to ``log``."""
    figures: list[Figure] = []

    def step(name: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {name}", file=log, flush=True)  # type: ignore[arg-type]

    step("1 append, a transaction a command")
    for durability, cycles in (
        ("full", sizes.command_cycles_full),
        ("normal", sizes.command_cycles_normal),
    ):
        figures.append(append.per_command(workdir, durability, cycles, sizes.command_rounds))
    step("2 batched append")
    figures.extend(append.batched(workdir, sizes.batch_cycles, sizes.rounds))
    step("3 replay")
    store = workdir / "replay.db"
    build_store(store, sizes.replay_cycles)
    es_store = workdir / "es-replay.db"
    plain_es.save_many(es_store, sizes.replay_cycles * EVENTS_PER_CYCLE // 4)
    figures.extend(
        replaying.replay_figures(store, es_store, workdir / "replay.jsonl", sizes.rounds)
    )
    step("4 projections")
    figures.append(projection.rebuild(store, workdir, sizes.rounds))
    figures.append(projection.lag(workdir, seconds=sizes.lag_seconds))
    step("5 memory and scale")
    big = workdir / "big.db"
    build_store(big, sizes.memory_events[-1] // EVENTS_PER_CYCLE + 1)
    # The goal is met through audit=False, if the replay API offers it; the default
    # (every read model) is measured once, for comparison, in the full run only.
    for label, options in replaying.replay_options()[::-1]:
        figures.extend(
            memory.memory_figures(
                big, list(sizes.memory_events), options, label, sizes.memory_budget
            )
        )
        if sizes is QUICK:
            break
    step("6 run ledger")
    figures.extend(ledger.ledger_figures(workdir, list(sizes.ledger_runs)))
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes: under a minute")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--dir", type=Path, help="where the stores go (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.dir is not None and not args.dir.is_dir():
        parser.error(f"--dir {args.dir}: no such directory (the stores go in a new one inside it)")
    sizes = QUICK if args.quick else FULL
    info = machine()
    print(machine_line(info), flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="tasktrail-bench-", dir=args.dir))
    started = time.perf_counter()
    try:
        figures = run(sizes, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.perf_counter() - started
    if args.quick:
        without_verdicts(figures)
    print(format_table(figures))
    print(f"{'quick' if args.quick else 'full'} run: {seconds:.0f} s")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "machine": info,
                    "quick": args.quick,
                    "seconds": seconds,
                    "figures": [f.to_dict() for f in figures],
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
