"""yui's controller passes, seventh round (seed 000, yui 0.6.4 -> 0.6.6,
``FileTaskController``): maintenance fences (``prepareActiveWorkspaces``), asked within
each task's own pass. Each test names the seed behaviour and fails when it breaks;
docs/seed-fidelity.md, "Round seven (yui passes: concurrency, backoff, blocked tasks)",
says what changed."""

from __future__ import annotations

import logging
from typing import Any

from helpers.probes import of_type
from helpers.seed_yui_7 import Scripted

from tasktrail.domain import ManualClock, Scheduler, Worker
from tasktrail.domain.turns.keys import task_key
from tasktrail.domain.turns.pass_events import PassFinished, PassTaskFailed

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
        scheduler,
        runtime=runtime,
        maintenance=fence,
        on_pass_error=lambda t, e: heard.append((t, e)),
    )
    clock.advance(250)
    with caplog.at_level(logging.WARNING, logger="tasktrail.worker"):
        worker.tick()
    assert heard == [("t2", "OSError: maintenance lock of search unreadable")]
    assert [r.getMessage() for r in caplog.records] == [
        "controller pass failed t2: OSError: maintenance lock of search unreadable"
    ]


def test_yui_fence_is_asked_about_every_project_at_every_pass_and_each_deferral_reported(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``prepareActiveWorkspaces``): at each pass the fence is asked about each of a
    # task's projects (every one: the deferral names all that are fenced), a task with
    # no project is never deferred, and ``onMaintenanceFenceDefer`` hears of every
    # deferral, pass after pass, until the fence is down; deferred is never failed.
    scheduler.submit("crew", id="t1", phase="lead", project_ids=("billing", "search"))
    scheduler.submit("crew", id="t2", phase="lead")
    for task_id in ("t1", "t2"):
        scheduler.start_turn(task_id, "worker")
    asked: list[str] = []
    fenced = {"billing", "search"}

    def fence(project: str) -> bool:
        asked.append(project)
        return project in fenced

    heard: list[tuple[str, tuple[str, ...]]] = []
    runtime = Scripted()
    worker = Worker(
        scheduler,
        runtime=runtime,
        maintenance=fence,
        on_deferred=lambda task_id, projects: heard.append((task_id, projects)),
    )
    worker.tick()
    assert asked == ["billing", "search"] and heard == [("t1", ("billing", "search"))]
    assert runtime.delivered == [("t2", "worker")]
    due = worker.next_deadline()
    assert due is not None
    clock.set(due)
    worker.tick()
    assert heard == [("t1", ("billing", "search"))] * 2
    assert scheduler.task_pass_retry("t1") is None and of_type(scheduler, PassTaskFailed) == []
    fenced.clear()
    due = worker.next_deadline()
    assert due is not None
    clock.set(due)
    worker.tick()
    assert len(heard) == 2 and runtime.delivered == [("t2", "worker"), ("t1", "worker")]
