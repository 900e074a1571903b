"""The registry the worker process tests run (tests/test_worker_processes.py).

    tasktrail worker worker_workload:registry --store STORE ...
    python tests/helpers/worker_workload.py STORE     # a plain script (see main)

(with ``tests/helpers`` on ``PYTHONPATH`` for the first). Every phase waits
``$TASKTRAIL_TEST_PHASE_S`` seconds (default 0.05) of wall time, a sync one less if
the file ``$TASKTRAIL_TEST_GATE`` appears first (a test opens the gate when it is
ready), then decides:

- ``sync``: one phase, ``time.sleep`` then ``finish``;
- ``async``: one ``async def`` phase, ``await asyncio.sleep`` then ``finish``;
- ``mixed``: a sync phase that checkpoints to an async one that finishes;
- ``answer``: as ``sync``, finishing with the result ``{"by": WORKER}``.

``python tests/helpers/worker_workload.py result STORE TASK`` is a caller that is not a
worker, waiting for a task's result (:func:`wait_result`).

Every phase appends ``start TASK PHASE WORKER MS`` when it starts and ``end TASK
PHASE WORKER MS OUTCOME`` when it ends (``decided``, or the name of what it raised:
``LeaseLost`` for a fenced decision, ``CancelledError`` for a stop) to
``$TASKTRAIL_PHASE_LOG/<worker>.log``, one ``os.write`` of an ``O_APPEND`` file a
line, so lines from many threads never interleave, and a process killed mid-phase
leaves a ``start`` with no ``end``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from tasktrail.domain import Registry, Scheduler, TaskDefinition

DEFAULT_PHASE_S = 0.05


def _phase_s() -> float:
    return float(os.environ.get("TASKTRAIL_TEST_PHASE_S", DEFAULT_PHASE_S))


def _pause() -> None:
    """A sync phase's wait: the phase time, or until the gate file appears."""
    gate = os.environ.get("TASKTRAIL_TEST_GATE")
    deadline = time.monotonic() + _phase_s()
    while time.monotonic() < deadline and not (gate and os.path.exists(gate)):
        time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))


def _log(inv: Any, kind: str, phase: str, outcome: str = "") -> None:
    folder = os.environ.get("TASKTRAIL_PHASE_LOG")
    if not folder:
        return
    worker = inv.worker
    line = f"{kind} {inv.task_id} {phase} {worker} {time.time() * 1000:.3f} {outcome}".rstrip()
    fd = os.open(os.path.join(folder, f"{worker}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _decide(inv: Any, phase: str, decision: Callable[[], Any]) -> None:
    """Take the phase's decision, logging the end with what came of it."""
    try:
        decision()
    except BaseException as error:
        _log(inv, "end", phase, type(error).__name__)
        raise
    _log(inv, "end", phase, "decided")


def _sync_work(inv: Any) -> None:
    _log(inv, "start", "work")
    _pause()
    _decide(inv, "work", inv.finish)


async def _async_work(inv: Any) -> None:
    _log(inv, "start", "work")
    try:
        await asyncio.sleep(_phase_s())
    except BaseException as error:  # cancelled by the worker's stop
        _log(inv, "end", "work", type(error).__name__)
        raise
    _decide(inv, "work", inv.finish)


def _mixed_first(inv: Any) -> None:
    _log(inv, "start", "first")
    _pause()
    _decide(inv, "first", lambda: inv.checkpoint("second"))


async def _mixed_second(inv: Any) -> None:
    _log(inv, "start", "second")
    try:
        await asyncio.sleep(_phase_s())
    except BaseException as error:
        _log(inv, "end", "second", type(error).__name__)
        raise
    _decide(inv, "second", inv.finish)


def _answer_work(inv: Any) -> None:
    _log(inv, "start", "work")
    _pause()
    _decide(inv, "work", lambda: inv.finish("completed", result={"by": inv.worker}))


registry = Registry(
    [
        TaskDefinition("sync", 1, {"work": _sync_work}),
        TaskDefinition("answer", 1, {"work": _answer_work}),
        TaskDefinition("async", 1, {"work": _async_work}),
        TaskDefinition("mixed", 1, {"first": _mixed_first, "second": _mixed_second}),
    ]
)
"""What ``tasktrail worker worker_workload:registry`` runs."""


def main(location: str) -> int:
    """A script as a user writes one: open with default settings (system clock, 30 s
    lease, a fresh worker name), run until idle, close. Prints ``opened NAME``."""
    scheduler = Scheduler.open(location, registry=registry)
    print("opened", scheduler.worker, flush=True)
    scheduler.run_until_idle()
    scheduler.close()
    print("closed", flush=True)
    return 0


def wait_result(location: str, task_id: str) -> int:
    """A caller that is not a worker: open (no registry), print ``waiting``, wait for the
    task's result, print ``WALL_MS STATUS RESULT_JSON`` the moment it returned."""
    import json

    with Scheduler.open(location) as caller:
        print("waiting", flush=True)
        outcome = caller.result(task_id, timeout=60)
        returned_ms = time.time() * 1000
        print(f"{returned_ms:.3f} {outcome.status} {json.dumps(outcome.result)}", flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "result":
        sys.exit(wait_result(sys.argv[2], sys.argv[3]))
    sys.exit(main(sys.argv[1]))
