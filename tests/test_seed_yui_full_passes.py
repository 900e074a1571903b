"""yui's full passes where tasktrail once differed (issue 16; seed 000): a full pass takes
over armed task-pass retries and queued dirty work, and a dirty pass yields its unstarted
tasks to a requested full pass. Each test names the behaviour and fails when it breaks.
The rules they hold are written down in docs/seed-fidelity.md."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.probes import of_type

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import PassStarted, TaskPassRetryScheduled
from tasktrail.domain.turns.runtime import Runtime

# ─── a full pass takes over armed task-pass retries and queued dirty work (seed 000) ─


class FailingDelivery(Runtime):
    """Delivering a Turn of a task in ``fails`` raises; others are delivered."""

    def __init__(self, *fails: str, on_deliver: Any = None) -> None:
        self.fails = set(fails)
        self.on_deliver = on_deliver
        self.delivered: list[str] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if self.on_deliver is not None:
            self.on_deliver(task_id)
        if task_id in self.fails:
            raise RuntimeError("the runtime's socket went away")
        self.delivered.append(task_id)
        return "delivered"


def _with_worker_turns(scheduler: Scheduler, *ids: str) -> None:
    for task_id in ids:
        scheduler.submit("job", id=task_id)
        scheduler.start_turn(task_id, "worker")


def test_yui_full_pass_takes_over_an_armed_task_pass_retry(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    _with_worker_turns(scheduler, "t1", "t2")
    dirty = scheduler.controller_pass([role_key("t1", "worker")], runtime=FailingDelivery("t1"))
    assert dirty.failed == ["t1"]
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and retry.retry_at > clock.now  # armed, not due yet
    full = scheduler.controller_pass("full", runtime=FailingDelivery())
    assert full.retried == ["t1"]  # taken over before it was due, all its roles
    assert full.done == ["t1", "t2"]
    assert scheduler.task_pass_retry("t1") is None
    started = [e for e in of_type(scheduler, PassStarted) if e.pass_id == full.pass_id]
    assert started[0].retried == ("t1",)


def test_yui_full_pass_failing_a_taken_over_retry_uses_its_next_attempt(
    scheduler: Scheduler,
) -> None:
    _with_worker_turns(scheduler, "t1")
    runtime = FailingDelivery("t1")
    scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)  # attempt 0
    second = scheduler.controller_pass("full", runtime=runtime)  # the same work, failing
    (retry,) = [r for r in of_type(scheduler, TaskPassRetryScheduled) if r.attempt == 1]
    assert second.retries["t1"] == retry.retry_at
    third = scheduler.controller_pass("full", runtime=runtime)
    assert third.retries == {"t1": None}  # the limit (2) holds under full passes too
    assert scheduler.task_pass_retry("t1") is None


def test_yui_requested_full_pass_takes_over_queued_dirty_work(scheduler: Scheduler) -> None:
    _with_worker_turns(scheduler, "t1", "t2")
    scheduler.request_pass([task_key("t1")])
    scheduler.request_pass("full")
    scheduler.request_pass([task_key("t2")])  # part of the full pass already queued
    reports = scheduler.pump(runtime=FailingDelivery())
    assert [(r.scope, r.tasks) for r in reports] == [("full", ["t1", "t2"])]
    assert scheduler.pump() == [] and not scheduler.pass_queue
    scheduler.request_pass([task_key("t2")])
    scheduler.request_pass([role_key("t1", "worker")])
    (dirty,) = scheduler.pump()
    # In the order the tasks were asked for (round four: yui's ``partitionDirtyScope``).
    assert (dirty.scope, dirty.tasks) == ("dirty", ["t2", "t1"])
    with pytest.raises(InvalidArgument):
        scheduler.request_pass(["task:"])
    assert not scheduler.pass_queue


def test_yui_dirty_pass_yields_its_unstarted_tasks_to_a_requested_full_pass(
    scheduler: Scheduler,
) -> None:
    _with_worker_turns(scheduler, "t1", "t2")
    runtime = FailingDelivery(on_deliver=lambda task_id: scheduler.request_pass("full"))
    dirty = scheduler.controller_pass(
        [task_key("t1"), task_key("t2")], runtime=runtime, concurrency=1
    )
    assert (dirty.done, dirty.having("skipped")) == (["t1"], ["t2"])
    (full,) = scheduler.pump(runtime=FailingDelivery())
    assert full.scope == "full" and "t2" in full.done
