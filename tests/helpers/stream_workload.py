"""The processes of tests/test_streams.py (issue 44, streams).

    tasktrail worker stream_workload:registry --store STORE ...
    python tests/helpers/stream_workload.py read STORE TASK AFTER    # a reader, no worker

(with ``tests/helpers`` on ``PYTHONPATH`` for the first). Kind ``talk``: one phase that
emits ``{"i": offset}`` at each offset from ``inv.streamed()`` (where a run before it
got to) to ``$TASKTRAIL_TEST_CHUNKS`` (default 40), then finishes. Given
``$TASKTRAIL_TEST_STOP_AT``, it stops there instead: it records what it emitted
(``inv.flush``), creates the file ``$TASKTRAIL_TEST_STOPPED`` and waits to be killed.

The reader opens the store without a registry (no worker of it: it runs no phase) and
prints each chunk of the task's stream ``out`` after ``AFTER`` as one JSON line
``[offset, value]``, then ``closed``; it prints ``reading`` first, once it has looked.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tasktrail.domain import Registry, Scheduler, TaskDefinition


def talk(inv: Any) -> None:
    total = int(os.environ.get("TASKTRAIL_TEST_CHUNKS", "40"))
    stop_at = os.environ.get("TASKTRAIL_TEST_STOP_AT")
    for offset in range(inv.streamed(), total):
        if stop_at is not None and offset == int(stop_at):
            inv.flush()  # recorded: what a reader saw stays, whatever happens next
            Path(os.environ["TASKTRAIL_TEST_STOPPED"]).touch()
            while True:
                time.sleep(1)  # until SIGKILL
        assert inv.emit({"i": offset}) == offset  # rule 29: offsets go on after the log's
    inv.finish("completed", result={"chunks": total})


registry = Registry([TaskDefinition("talk", 1, {"say": talk})])


def read(location: str, task_id: str, after: int) -> None:
    with Scheduler.open(location, worker=f"reader-{os.getpid()}") as scheduler:
        chunks = scheduler.read_stream(task_id, after=after, timeout=120)
        print("reading", flush=True)
        for offset, value in chunks:
            print(json.dumps([offset, value]), flush=True)
        print("closed", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]))
