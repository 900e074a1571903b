"""One writer of a race on one store: ``python -m benchmarks.fleet_writer LOCATION NAME
(--seconds S | --commands N) [--snapshot-every N]``.

It opens a scheduler (system clock), prints ``ready`` once its store is open, waits
for a line on stdin (the parent sends it when every writer is ready: the clock
starts then), then submits, reserves and finishes its own tasks for ``S`` seconds or
``N`` commands, and prints one JSON line: the commands issued, the seconds they took,
the appends the store refused (``clock``: the time guard's ``ClockConflict``;
``other``: a taken version or a read guard; both retried inside the scheduler), and
the errors that reached it, by class. ``benchmarks/fleet.py`` and
``tests/test_postgres_races.py`` run it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Any

import orjson

from tasktrail.domain import ClockConflict, ConflictError, Registry, Scheduler, TaskDefinition

REGISTRY = Registry([TaskDefinition("job", 1, {"go": lambda inv: inv.finish()})])


def count_refusals(scheduler: Scheduler) -> Counter[str]:
    """Count the appends the store refuses for ``scheduler``, by cause, as they happen."""
    refused: Counter[str] = Counter()
    append = scheduler.store.append

    def counted(*args: Any, **kwargs: Any) -> list[int]:
        try:
            return append(*args, **kwargs)
        except ClockConflict:
            refused["clock"] += 1
            raise
        except ConflictError:
            refused["other"] += 1
            raise

    scheduler.store.append = counted  # type: ignore[method-assign]
    return refused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet_writer")
    parser.add_argument("location")
    parser.add_argument("name")
    limit = parser.add_mutually_exclusive_group(required=True)
    limit.add_argument("--seconds", type=float)
    limit.add_argument("--commands", type=int)
    parser.add_argument("--snapshot-every", type=int, default=None)
    args = parser.parse_args(argv)
    s = Scheduler.open(
        args.location, registry=REGISTRY, worker=args.name, snapshot_every=args.snapshot_every
    )
    refused = count_refusals(s)
    print("ready", flush=True)
    sys.stdin.readline()
    errors: Counter[str] = Counter()
    issued = 0
    started = time.monotonic()
    stop = started + args.seconds if args.seconds is not None else None
    while (time.monotonic() < stop) if stop is not None else (issued < args.commands):
        try:
            task_id = s.submit("job")
            issued += 1
            s.reserve(task_id)
            issued += 1
            s.finish(task_id)
        except Exception as error:  # what reached the caller is what the race reports
            errors[type(error).__name__] += 1
            print(f"{args.name}: {type(error).__name__}: {error}", file=sys.stderr)
        issued += 1
    elapsed = time.monotonic() - started
    s.close()
    report = {"commands": issued, "seconds": elapsed, "refused": refused, "errors": errors}
    print(orjson.dumps(report).decode(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
