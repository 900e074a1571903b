"""huey's side of ``python -m benchmarks.concurrency``: the same workload on SQLite.

A task is **one huey task doing three waits** (``single``, the default: the least a
peer records) or, with ``--peer-shape chain``, huey's own chain, a **pipeline of
three tasks** (``one.s().then(two).then(three)``): each waits
``$TASKTRAIL_BENCH_WAIT_S`` and the consumer that ran it enqueues the next when it
returns, so each phase is recorded before the next starts, as a tasktrail checkpoint
is. Storage: ``SqliteHuey`` at its
defaults (WAL, SQLite's default ``synchronous``), one file a run. A worker process
is one huey consumer of ``concurrency`` workers; huey has no asyncio mode, and its
consumer's help names **greenlet** workers for IO-heavy work (``-k greenlet``), so
they are greenlets (gevent, its monkey-patching applied first, as huey asks), with
``--huey-workers thread`` for threads. Its other settings are its defaults (polling
from 0.1 s backing off to 10 s when the queue is empty).

``python -c "$RUN" worker FILE CONCURRENCY TYPE`` (see :func:`start`) is one consumer
(it prints ``ready`` once its workers run); ``setup FILE`` makes the database;
``submit FILE SHAPE COUNT`` enqueues the tasks in one transaction (huey enqueues one a
transaction; the rows are the ones its ``enqueue`` writes).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .concurrency_marks import WAIT_S, mark

if TYPE_CHECKING:  # the benchmark's side only: a consumer imports no tasktrail
    from .concurrency_runs import Run, Started
    from .fleet import Stores

NAME = "bench"


def make(filename: str) -> tuple[Any, dict[str, Any]]:
    """The huey instance on ``filename`` with its tasks; and a new task by shape."""
    from huey import SqliteHuey  # type: ignore[import-untyped]

    huey = SqliteHuey(NAME, filename=filename)
    # time.sleep is gevent's under greenlet workers (monkey-patched)
    one = huey.task(name="one")(_phase(first=True))
    two = huey.task(name="two")(_phase())
    three = huey.task(name="three")(_phase(last=True))
    single = huey.task(name="single")(_single)
    return huey, {"chain": lambda: one.s().then(two).then(three), "single": single.s}


def _phase(first: bool = False, last: bool = False) -> Callable[[], None]:
    def phase() -> None:
        if first:
            mark("S")
        time.sleep(WAIT_S)
        if last:
            mark("E")

    return phase


def _single() -> None:
    mark("S")
    for _ in range(3):
        time.sleep(WAIT_S)
    mark("E")


def worker(filename: str, concurrency: int, worker_type: str) -> None:
    """One consumer of ``concurrency`` workers; ``ready`` once each of them runs."""
    huey, _ = make(filename)
    started = [0]
    lock = threading.Lock()

    def announce() -> None:  # each worker calls it once, as it starts
        with lock:
            started[0] += 1
            if started[0] == concurrency:
                print("ready", flush=True)

    huey.on_startup()(announce)
    consumer = huey.create_consumer(workers=concurrency, worker_type=worker_type)
    consumer.run()  # until SIGTERM, which huey's consumer takes as "stop now"


def submit(filename: str, shape: str, count: int) -> None:
    """``count`` tasks of ``shape`` in one transaction."""
    huey, new = make(filename)
    rows = [(NAME, huey.serialize_task(new[shape]()), 0) for _ in range(count)]
    with huey.storage.db(commit=True) as cursor:
        cursor.executemany("insert into task (queue, data, priority) values (?, ?, ?)", rows)


def start(stores: Stores, run: Run, env: dict[str, str]) -> Started:
    """The database made, ``run.workers`` consumers up; the submit."""
    from .concurrency_runs import Started, submit_by, wait_ready
    from .fleet import ROOT

    filename = str(stores.workdir / f"huey-{uuid.uuid4().hex[:10]}.db")
    # Not ``-m``: huey names a task by its module, which would be ``__main__`` there.
    here = [sys.executable, "-c", _RUN]
    subprocess.run([*here, "setup", filename], cwd=ROOT, env=env, check=True)
    processes = []
    for _ in range(run.workers):
        command = [*here, "worker", filename, str(run.concurrency), run.huey_workers]
        if run.huey_workers == "greenlet":  # gevent's patches go first, before any import
            command[2] = _PATCH + _RUN
        processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE))
    wait_ready(run, processes, "a huey consumer")
    return Started(
        processes, submit_by([*here, "submit", filename, run.peer_shape, str(run.tasks)], env)
    )


_PATCH = "from gevent import monkey; monkey.patch_all(); "
_RUN = "import sys; from benchmarks.concurrency_huey import main; sys.exit(main(sys.argv[1:]))"


def main(argv: list[str]) -> int:
    what, filename, *rest = argv
    if what == "worker":
        worker(filename, int(rest[0]), rest[1])
    elif what == "setup":
        make(filename)  # SqliteHuey makes its tables and turns WAL on as it opens
    else:
        submit(filename, rest[0], int(rest[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
