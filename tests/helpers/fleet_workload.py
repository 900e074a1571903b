"""The registry the fleet test runs in three ``tasktrail worker`` processes.

    tasktrail worker fleet_workload:registry --store STORE --worker NAME

(with ``tests/helpers`` on ``PYTHONPATH``). Trees of tasks that use both wait
policies and sleeps:

- ``root``: ``plan`` submits three ``leaf`` tasks and waits on them (``all``),
  then ``review`` submits two ``check`` tasks and waits on them (``failFast``),
  then ``done`` finishes ``completed`` whatever the checks said.
- ``leaf``: ``work`` sleeps 30 ms (of the scheduler clock), ``wake`` finishes.
- ``check``: ``check`` finishes ``completed``, or ``failed`` for one task in ten
  (chosen from its id, so the same on every worker).

Every phase invocation appends ``start`` and ``end`` lines (task, phase, worker,
wall time in ms) to ``$TASKTRAIL_PHASE_LOG/<worker>.log``, flushed at once, so a
test can prove no phase of a task ran in two workers at overlapping times even
for a worker killed mid-phase (its last ``start`` has no ``end``).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from tasktrail.domain import Registry, TaskDefinition

PHASE_MS = 15.0
"""Wall time each phase takes, so that two runs of one phase would overlap."""


class _PhaseLog:
    def __init__(self) -> None:
        self._file: Any = None

    def write(self, worker: str, kind: str, task_id: str, phase: str) -> None:
        folder = os.environ.get("TASKTRAIL_PHASE_LOG")
        if not folder:
            return
        if self._file is None:
            self._file = (Path(folder) / f"{worker}.log").open("a", buffering=1)
        self._file.write(f"{kind} {task_id} {phase} {worker} {time.time() * 1000:.3f}\n")
        self._file.flush()


_LOG = _PhaseLog()


def logged(phase_name: str, body: Any) -> Any:
    """Wrap a phase so its start and end are logged with the worker that ran it."""

    def phase(invocation: Any) -> Any:
        worker = invocation.worker
        _LOG.write(worker, "start", invocation.task_id, phase_name)
        time.sleep(PHASE_MS / 1000)
        try:
            return body(invocation)
        finally:
            _LOG.write(worker, "end", invocation.task_id, phase_name)

    return phase


def _plan(inv: Any) -> None:
    leaves = [inv.submit("leaf") for _ in range(3)]
    inv.wait(leaves, "all", then="review")


def _review(inv: Any) -> None:
    checks = [inv.submit("check") for _ in range(2)]
    inv.wait(checks, "failFast", then="done")


def _done(inv: Any) -> None:
    inv.finish("completed")


def _work(inv: Any) -> None:
    inv.sleep(inv.now() + 30, then="wake")


def _wake(inv: Any) -> None:
    inv.finish("completed")


def _check(inv: Any) -> None:
    failing = hashlib.sha256(inv.task_id.encode()).digest()[0] < 26  # about one in ten
    inv.finish("failed" if failing else "completed")


registry = Registry(
    [
        TaskDefinition(
            "root",
            1,
            {
                "plan": logged("plan", _plan),
                "review": logged("review", _review),
                "done": logged("done", _done),
            },
        ),
        TaskDefinition("leaf", 1, {"work": logged("work", _work), "wake": logged("wake", _wake)}),
        TaskDefinition("check", 1, {"check": logged("check", _check)}),
    ]
)
"""What ``tasktrail worker fleet_workload:registry`` runs."""

TASKS_PER_ROOT = 6
