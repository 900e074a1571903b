"""The writer the crash tests kill: a mixed workload on one store, until SIGKILL.

    python tests/helpers/crash_writer.py STORE ACKS VIEWS SEED START_MS

It opens STORE (recovery runs first), keeps read models in VIEWS now and
then, and writes to ACKS, one JSON line each, flushed and fsynced before it
goes on:

- ``{"intent": [[stream, version, topic], ...]}`` just before an append;
- ``{"appended": [[stream, version, topic, position], ...]}`` once it returned;
- ``{"failed": ...}`` if it raised (nothing may then be in the store);
- ``{"command": name, ...}`` once a command returned.

So every line names events that were recorded (or, for the last ``intent``,
that were being recorded) before the line was written. ``ready`` on stdout
says the store is open. The writer stops by itself only after MAX_STEPS.

    python tests/helpers/crash_writer.py serve

imports once and then forks one writer per line of arguments it reads on
stdin, answering ``started PID`` and, once that writer is gone, ``exited PID
CODE`` (a negative CODE is the signal that ended it): the tests kill many
writers without paying for the imports each time.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.workload import Workload, workload_registry
from tasktrail.domain import ManualClock, Scheduler, Store, TaskEvent, open_store
from tasktrail.projections import Projector

MAX_STEPS = 20_000
RESTART_LIMIT = 3


class Acks:
    """An append-only side file of acknowledgements, each synced before the next step."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        os.write(self.fd, orjson.dumps(record) + b"\n")
        os.fsync(self.fd)


def acknowledge_appends(store: Store, acks: Acks) -> None:
    """Log every append the scheduler makes: the intent before, the positions after."""
    append = store.append

    def acknowledged(
        events: Sequence[TaskEvent], versions: Sequence[int], **options: Any
    ) -> list[int]:
        rows = [[e.stream_id(), v, type(e).topic] for e, v in zip(events, versions, strict=True)]
        acks.write({"intent": rows})
        try:
            positions = append(events, versions, **options)
        except BaseException as error:
            acks.write({"failed": rows, "error": repr(error)})
            raise
        acks.write({"appended": [[*row, p] for row, p in zip(rows, positions, strict=True)]})
        return positions

    store.append = acknowledged  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    location, acks_path, views, seed, start_ms = argv
    rng = random.Random(int(seed))
    acks = Acks(acks_path)
    store = open_store(location)
    acknowledge_appends(store, acks)
    clock = ManualClock(int(start_ms))
    scheduler = Scheduler.open(
        store, clock=clock, registry=workload_registry(rng), restart_limit=RESTART_LIMIT
    )
    acks.write({"command": "open", "parked": scheduler.parked})
    projector = Projector(store, views)
    print("ready", flush=True)
    workload = Workload(scheduler, clock, rng, ack=acks.write, project=projector.catch_up)
    for _ in range(MAX_STEPS):
        workload.step()
    scheduler.close()
    projector.close()
    print("done", flush=True)
    return 0


def serve() -> int:
    """Fork a writer for each line of arguments on stdin; report how each one ended."""
    for line in sys.stdin:
        args = line.split()
        if not args:
            continue
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the writer
            code = 1
            try:
                code = main(args)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(f"started {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exited {pid} {os.waitstatus_to_exitcode(status)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["serve"] else main(sys.argv[1:]))
