"""One writer process of a race on one store: ``racing_writer.py LOCATION NAME COMMANDS
[SNAPSHOT_EVERY]``. It opens a scheduler (system clock), prints ``ready``, waits for a
line on stdin (every writer starts at once), then submits, reserves and finishes its
own tasks until it has issued ``COMMANDS`` commands, and prints one JSON line: the
commands, the appends the store refused for their time (``ClockConflict``, retried
inside the scheduler) and for anything else, and the errors that reached it."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import orjson

from tasktrail.domain import ClockConflict, ConflictError, Registry, Scheduler, TaskDefinition

REGISTRY = Registry([TaskDefinition("job", 1, {"go": lambda inv: inv.finish()})])


def main(location: str, name: str, commands: int, snapshot_every: int | None) -> None:
    s = Scheduler.open(location, registry=REGISTRY, worker=name, snapshot_every=snapshot_every)
    refused: Counter[str] = Counter()
    append = s.store.append

    def counted(*args: Any, **kwargs: Any) -> list[int]:
        try:
            return append(*args, **kwargs)
        except ClockConflict:
            refused["clock"] += 1
            raise
        except ConflictError:
            refused["other"] += 1
            raise

    s.store.append = counted  # type: ignore[method-assign]
    print("ready", flush=True)
    sys.stdin.readline()
    errors: Counter[str] = Counter()
    issued = 0
    while issued < commands:
        try:
            task_id = s.submit("job")
            s.reserve(task_id)
            s.finish(task_id)
        except Exception as error:  # what reached the caller is what the race reports
            errors[type(error).__name__] += 1
        issued += 3
    s.close()
    print(orjson.dumps({"commands": issued, "refused": refused, "errors": errors}).decode())


if __name__ == "__main__":
    every = int(sys.argv[4]) if len(sys.argv) > 4 else None
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), every)
