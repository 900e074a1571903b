"""yui's controller passes, seventh round (seed 000, yui 0.6.4 -> 0.6.6,
``FileTaskController``): per-task work under the concurrency bound
(``#runDirtySchedulerPass``, ``partitionDirtyScope``, ``taskConcurrency``), task-pass
retries with capped exponential backoff (``#scheduleTaskPassRetry``,
``#clearTaskPassRetry``), blocked tasks (``runtimeTaskFailureIds``, ``blockedTaskIds``)
and maintenance fences (``prepareActiveWorkspaces``). Each test names the seed
behaviour and fails when it breaks; docs/seed-fidelity.md, "Round seven (yui passes:
concurrency, backoff, blocked tasks)", says what changed."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from helpers.probes import of_type

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler, Worker
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import (
    PassFinished,
    PassStarted,
    PassTaskBlocked,
    PassTaskFailed,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
    TaskPassRetryScheduled,
)
from tasktrail.domain.turns.runtime import Runtime

WAIT = 10  # seconds a test thread waits for another (never reached when green)


def with_turns(scheduler: Scheduler, *ids: str, roles: tuple[str, ...] = ("worker",)) -> None:
    """Tasks with an undelivered Turn per role (due for delivery now)."""
    for task_id in ids:
        scheduler.submit("job", id=task_id)
        for role in roles:
            scheduler.start_turn(task_id, role)


class Scripted(Runtime):
    """A runtime whose drain notes each visit and runs ``on_drain(task_id, visit)``
    first; the runtime events of ``unreadable`` tasks cannot be applied, and delivering
    a Turn of a ``(task, role)`` in ``refusing`` raises."""

    def __init__(self, on_drain: Any = None) -> None:
        self.on_drain = on_drain
        self.unreadable: set[str] = set()
        self.refusing: set[tuple[str, str]] = set()
        self.drained: list[str] = []
        self.delivered: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def drain(self, scheduler: Any, task_id: str) -> None:
        with self._lock:
            self.drained.append(task_id)
            visit = self.drained.count(task_id)
        if self.on_drain is not None:
            self.on_drain(task_id, visit)
        if task_id in self.unreadable:
            raise ConnectionError(f"runtime events of {task_id} unreadable")

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if (task_id, role) in self.refusing:
            raise RuntimeError(f"{role} of {task_id}: socket closed")
        with self._lock:
            self.delivered.append((task_id, role))
        return "delivered"


def fire(scheduler: Scheduler, clock: ManualClock, task_id: str, runtime: Runtime) -> Any:
    """Let the task's armed retry come due and run the operator lane that fires it."""
    retry = scheduler.task_pass_retry(task_id)
    assert retry is not None
    clock.set(retry.retry_at)
    report = scheduler.controller_pass(["operator"], runtime=runtime)
    assert report.retried == [task_id]
    return report


# ─── per-task work under the concurrency bound ────────────────────────────────────


class Holding(Scripted):
    """Holds each per-task pass in its drain until the test releases that task."""

    def __init__(self) -> None:
        super().__init__(on_drain=self._hold)
        self.entered = {t: threading.Event() for t in ("t1", "t2", "t3")}
        self.release = {t: threading.Event() for t in ("t1", "t2", "t3")}
        self.left = {t: threading.Event() for t in ("t1", "t2", "t3")}

    def _hold(self, task_id: str, visit: int) -> None:
        self.entered[task_id].set()
        assert self.release[task_id].wait(WAIT)
        self.left[task_id].set()


# ─── task-pass retries: the exact backoff, and when its count starts again ────────


def test_yui_failure_in_a_full_pass_while_another_full_pass_is_requested_arms_no_retry(
    scheduler: Scheduler,
) -> None:
    # yui (``#scheduleTaskPassRetry`` returns while ``#pendingFull``, whatever pass
    # failed): a task blocked in a full pass during which another full pass was
    # requested gets no retry; that full pass does its work, and arms its retry from
    # attempt 0 if it is blocked again.
    with_turns(scheduler, "t1", "t2")

    def ask_again(task_id: str, visit: int) -> None:
        if (task_id, visit) == ("t1", 1):
            scheduler.request_pass("full")

    runtime = Scripted(on_drain=ask_again)
    runtime.unreadable.add("t1")
    scheduler.request_pass("full")
    first, second = scheduler.pump(runtime=runtime)
    assert (first.blocked, first.done, first.retries) == (["t1"], ["t2"], {"t1": None})
    assert (second.blocked, second.retried) == (["t1"], [])
    assert [r.attempt for r in of_type(scheduler, TaskPassRetryScheduled)] == [0]
    assert len(of_type(scheduler, PassTaskBlocked)) == 2


# ─── blocked tasks ─────────────────────────────────────────────────────────────────


# ─── maintenance fences ────────────────────────────────────────────────────────────


def test_yui_maintenance_fence_that_raises_fails_only_its_task(
    scheduler: Scheduler, clock: ManualClock, caplog: Any
) -> None:
    # yui (``prepareActiveWorkspaces`` inside the per-task pass of
    # ``#runDirtySchedulerPass``): the fence is asked within a task's own pass, so a
    # ``maintenanceFence`` that throws for a task's project fails that task's pass
    # (``onError``, a task-pass retry of its keys) while the other tasks go on.
    for task_id, project in (("t1", "billing"), ("t2", "search"), ("t3", "ops")):
        scheduler.submit("crew", id=task_id, phase="lead", project_ids=(project,))
        scheduler.start_turn(task_id, "worker")

    def fence(project: str) -> bool:
        if project == "search":
            raise OSError("maintenance lock of search unreadable")
        return False

    runtime = Scripted()
    keys = [task_key("t1"), task_key("t2"), task_key("t3")]
    report = scheduler.controller_pass(keys, runtime=runtime, maintenance=fence)
    assert (report.done, report.failed) == (["t1", "t3"], ["t2"])
    assert "maintenance lock of search unreadable" in report.errors["t2"]
    assert runtime.delivered == [("t1", "worker"), ("t3", "worker")]
    assert report.retries == {"t2": clock.now + 250}
    (finished,) = of_type(scheduler, PassFinished)
    assert (finished.done, finished.failed) == (("t1", "t3"), ("t2",))
    # A Worker hears of it like any failed task, and its tick goes on.
    heard: list[tuple[str, str]] = []
    worker = Worker(
        scheduler, runtime=runtime, maintenance=fence, on_pass_error=lambda t, e: heard.append((t, e))
    )
    clock.advance(250)
    with caplog.at_level(logging.WARNING, logger="tasktrail.worker"):
        worker.tick()
    assert heard == [("t2", "OSError: maintenance lock of search unreadable")]
    assert [r.getMessage() for r in caplog.records] == [
        "controller pass failed t2: OSError: maintenance lock of search unreadable"
    ]


