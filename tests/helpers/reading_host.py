"""The host tests/test_own_store_reads.py kills: a process that writes a SQLite store
and reads it too.

    python tests/helpers/reading_host.py STORE FOLDER [READ_PATH ...]

It opens a scheduler on STORE and runs one task; then runs each read path named (by
default every one of :data:`read_paths.READ_PATHS`) on STORE, in this process,
watching which of the store's files it opens outside SQLite, and prints ``opened
JSON`` (those paths). Then another process writes to the store and closes it
(``tasktrail submit``), and the scheduler submits tasks, printing ``acked ID`` once
each submit returned, then ``done``; and it waits, until the test kills it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.read_paths import KIND, PHASE, READ_PATHS, Reading, prepare, registry, store_file_opens
from tasktrail.domain import Scheduler

SUBMITS = 10


def main(argv: list[str]) -> None:
    store, folder, *names = argv
    scheduler = Scheduler.open(store, registry=registry(), worker="host")
    task = scheduler.submit(KIND)
    scheduler.run_until_idle()
    reading = Reading(store, Path(folder), task)
    with store_file_opens(store) as opened:
        prepare(reading)
        for name in names or READ_PATHS:
            READ_PATHS[name](reading)
    print("opened", orjson.dumps(opened).decode(), flush=True)
    other = [sys.executable, "-m", "tasktrail.replay.cli", "submit", store, KIND]
    subprocess.run([*other, "--phase", PHASE], check=True, capture_output=True)
    for _ in range(SUBMITS):
        print("acked", scheduler.submit(KIND), flush=True)
    print("done", flush=True)
    sys.stdin.read()  # killed here


if __name__ == "__main__":
    main(sys.argv[1:])
