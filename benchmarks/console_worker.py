"""The worker ``benchmarks.console`` runs beside the console: ``python -m
benchmarks.console_worker LOCATION SECONDS``.

It opens the store as a worker of kind ``bench`` only (the store's own tasks are
others', never run here), prints ``ready``, waits for a line on stdin (the clock starts
then), then for ``SECONDS`` submits 20 one-phase tasks at a time and runs them until
idle, each phase finishing at once: three events a task (submitted, reserved, ended),
each command its own transaction, as a service's worker appends. After each wave it
prints ``done COUNT MONOTONIC`` (the parent times windows of the run from these); at
the end one JSON line: tasks run and the seconds they took.
"""

from __future__ import annotations

import sys
import time

import orjson

from tasktrail.domain import Registry, Scheduler, TaskDefinition

REGISTRY = Registry([TaskDefinition("bench", 1, {"go": lambda inv: inv.finish("completed")})])
WAVE = 20


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    location, seconds = args[0], float(args[1])
    with Scheduler.open(location, registry=REGISTRY, worker="bench-worker") as scheduler:
        print("ready", flush=True)
        sys.stdin.readline()
        began = time.monotonic()
        done = 0
        while time.monotonic() - began < seconds:
            for _ in range(WAVE):
                scheduler.submit("bench", phase="go")
            scheduler.run_until_idle()
            done += WAVE
            print(f"done {done} {time.monotonic()!r}", flush=True)
        took = time.monotonic() - began
    print(orjson.dumps({"tasks": done, "seconds": took}).decode(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
