"""yui's controller passes, seventh round (seed 000, yui 0.6.4 -> 0.6.6,
``FileTaskController``): per-task work under the concurrency bound
(``#runDirtySchedulerPass``, ``partitionDirtyScope``, ``taskConcurrency``). Each test
names the seed behaviour and fails when it breaks; docs/seed-fidelity.md, "Round seven
(yui passes: concurrency, backoff, blocked tasks)", says what changed."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from helpers.probes import of_type
from helpers.seed_yui_7 import Scripted, with_turns

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import PassStarted

WAIT = 10  # seconds a test thread waits for another (never reached when green)


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


def test_yui_pass_starts_its_tasks_in_scope_order_and_the_next_waits_for_a_free_slot(
    scheduler: Scheduler,
) -> None:
    # yui (``#runDirtySchedulerPass``): ``min(taskConcurrency, tasks)`` consumers take
    # the task scopes from the keyed work queue in the order they were signalled (scope
    # order); a task past the bound starts once a consumer is free, beside the others.
    with_turns(scheduler, "t1", "t2", "t3")
    runtime = Holding()
    reports: list[Any] = []
    keys = [task_key("t2"), task_key("t3"), task_key("t1")]
    thread = threading.Thread(
        target=lambda: reports.append(
            scheduler.controller_pass(keys, runtime=runtime, concurrency=2)
        )
    )
    thread.start()
    try:
        assert runtime.entered["t2"].wait(WAIT) and runtime.entered["t3"].wait(WAIT)
        assert not runtime.entered["t1"].wait(0.2)  # the bound: no third one at once
        runtime.release["t2"].set()
        assert runtime.entered["t1"].wait(WAIT)  # a slot came free: it starts beside t3
        assert not runtime.left["t3"].is_set()
    finally:
        for event in runtime.release.values():
            event.set()
        thread.join(WAIT)
    assert not thread.is_alive()
    assert runtime.drained == ["t2", "t3", "t1"] and reports[0].done == ["t2", "t3", "t1"]


class Meeting(Scripted):
    """Counts the per-task passes inside their drain at once; each waits at a barrier of
    ``parties``, so a pass gets through only with that many inside together."""

    def __init__(self, parties: int) -> None:
        super().__init__(on_drain=self._meet)
        self.barrier = threading.Barrier(parties, timeout=WAIT)
        self.inside = 0
        self.most_inside = 0

    def _meet(self, task_id: str, visit: int) -> None:
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            self.barrier.wait()
        finally:
            with self._lock:
                self.inside -= 1


def test_yui_task_concurrency_setting_bounds_each_pass_and_is_refused_above_thirty_two(
    scheduler: Scheduler,
) -> None:
    # yui: ``taskConcurrency`` is a controller option, a positive integer (default 4)
    # of at most 32 (``boundedPositiveInteger``: a larger one is refused, not clamped);
    # every dirty pass runs that many task scopes at once.
    with_turns(scheduler, "t1", "t2", "t3", "t4")
    head = scheduler.store.head()
    for bad in (33, 0, 1.5):
        with pytest.raises(InvalidArgument, match="task_concurrency"):
            scheduler.configure_turns(task_concurrency=bad)
    assert scheduler.store.head() == head and scheduler.turn_settings.task_concurrency == 4
    scheduler.configure_turns(task_concurrency=2)
    meeting = Meeting(parties=2)
    report = scheduler.controller_pass(runtime=meeting)
    assert report.done == ["t1", "t2", "t3", "t4"] and meeting.most_inside == 2
    assert of_type(scheduler, PassStarted)[-1].concurrency == 2
    scheduler.configure_turns(task_concurrency=32)
    wide = Meeting(parties=4)
    assert scheduler.controller_pass(runtime=wide).done == ["t1", "t2", "t3", "t4"]
    assert wide.most_inside == 4 and of_type(scheduler, PassStarted)[-1].concurrency == 32


def test_yui_role_keys_of_one_task_are_one_per_task_pass_retried_together(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``partitionDirtyScope``): the role keys of a task make one task scope (one
    # serialized per-task pass, in the place of the task's first key), and a failure of
    # it arms one retry whose identity is every one of its keys, sorted.
    with_turns(scheduler, "t1", "t2", roles=("worker", "helper"))
    runtime = Scripted()
    runtime.refusing.add(("t1", "helper"))
    keys = [role_key("t1", "worker"), role_key("t2", "worker"), role_key("t1", "helper")]
    report = scheduler.controller_pass(keys, runtime=runtime)
    assert runtime.drained == ["t1", "t2"] and report.tasks == ["t1", "t2"]
    assert (report.failed, report.done) == (["t1"], ["t2"])
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and retry.keys == (role_key("t1", "helper"), role_key("t1", "worker"))
    assert (retry.attempt, retry.retry_at) == (0, clock.now + 250)
