"""Controller passes (SPEC.md section 2): scope and keys, blocked tasks, per-task
serialization and concurrency, task-pass retries, maintenance deferral, all as events."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from conftest import event_count

from tasktrail.domain import InvalidArgument, ManualClock, Registry, Scheduler, TaskEvent
from tasktrail.domain.turns.events import TurnEvent
from tasktrail.domain.turns.keys import parse_key, role_key, task_key
from tasktrail.domain.turns.pass_events import (
    PassFinished,
    PassStarted,
    PassTaskBlocked,
    PassTaskDeferred,
    PassTaskFailed,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
    TaskPassRetryScheduled,
)
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import MAX_TASK_CONCURRENCY
from tasktrail.domain.turns.state import PassState

WAIT = 10  # seconds a test thread waits for another before giving up (never reached when green)


def events_of(scheduler: Scheduler) -> list[TaskEvent]:
    return [recorded.event for recorded in scheduler.store.read()]


def of_type(scheduler: Scheduler, cls: type[TaskEvent]) -> list[Any]:
    return [e for e in events_of(scheduler) if isinstance(e, cls)]


def tasks_with_turns(scheduler: Scheduler, *ids: str, project: str | None = None) -> list[str]:
    for task_id in ids:
        scheduler.submit("job", id=task_id, project_ids=(project,) if project else ())
        scheduler.start_turn(task_id, "worker")
    return list(ids)


# ─── scope and keys ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "key",
    [
        "",
        "task:",
        "task:%20t1",  # surrounding whitespace
        "task:t 1",  # not encoded
        "task:t%41",  # not canonical: 'A' needs no escape
        "task:t%2",  # broken escape
        "task:%00",  # NUL
        "role:t1",
        "role:t1/",
        "role:/leader",
        "role:t1/a/b",
        "global-role:leader",
        "Task:t1",
        "operator ",
        42,
    ],
)
def test_pass_malformed_key_is_a_clear_error_naming_the_key(
    scheduler: Scheduler, key: object
) -> None:
    tasks_with_turns(scheduler, "t1")
    head = scheduler.store.head()
    with pytest.raises(InvalidArgument) as refused:
        scheduler.controller_pass(["task:t1", key])  # type: ignore[list-item]
    assert "controller key is invalid" in str(refused.value)
    assert repr(key) in str(refused.value)
    assert scheduler.store.head() == head  # refused before anything is written


def test_pass_scope_is_full_or_a_list_of_keys(scheduler: Scheduler) -> None:
    with pytest.raises(InvalidArgument) as refused:
        scheduler.controller_pass("task:t1")
    assert "'full' or a list of dirty keys" in str(refused.value)


def test_pass_keys_are_uri_encoded_and_round_trip() -> None:
    assert task_key("a/b c") == "task:a%2Fb%20c"
    assert role_key("t(1)", "lead/er") == "role:t(1)/lead%2Fer"
    parsed = parse_key(role_key("naïve task", "reviewer #2"))
    assert (parsed.kind, parsed.task_id, parsed.role) == ("role", "naïve task", "reviewer #2")
    assert parse_key("operator").kind == "operator"


def test_pass_concurrency_bound_default_four_above_thirty_two_refused(
    scheduler: Scheduler,
) -> None:
    head = scheduler.store.head()
    for bad in (MAX_TASK_CONCURRENCY + 1, 0, -1, True, 2.5):
        with pytest.raises(InvalidArgument) as refused:
            scheduler.controller_pass(concurrency=bad)  # type: ignore[arg-type]
        assert "concurrency" in str(refused.value)
    with pytest.raises(InvalidArgument, match="at most 32"):
        scheduler.controller_pass(concurrency=33)
    assert scheduler.store.head() == head
    scheduler.controller_pass()
    scheduler.controller_pass(concurrency=MAX_TASK_CONCURRENCY)
    assert [s.concurrency for s in of_type(scheduler, PassStarted)] == [4, 32]


def test_pass_task_key_subsumes_role_keys_and_role_key_selects_one_role(
    scheduler: Scheduler,
) -> None:
    scheduler.submit("job", id="t1")
    for role in ("leader", "worker"):
        scheduler.start_turn("t1", role)
        scheduler.observe_exit("t1", role)
    one = scheduler.controller_pass([role_key("t1", "worker"), role_key("t1", "worker")])
    assert one.turns == {"t1": {"worker": "exited"}}
    for role in ("worker",):
        scheduler.start_turn("t1", role)
        scheduler.observe_exit("t1", role)
    both = scheduler.controller_pass([role_key("t1", "worker"), task_key("t1"), "operator"])
    assert both.turns == {"t1": {"leader": "exited", "worker": "exited"}}
    # Unknown tasks in well-formed keys are simply not there to visit.
    assert scheduler.controller_pass([task_key("ghost")]).tasks == []


def test_pass_orders_tasks_numerically(scheduler: Scheduler) -> None:
    tasks_with_turns(scheduler, "t10", "t2", "t1")
    assert scheduler.controller_pass().tasks == ["t1", "t2", "t10"]


# ─── blocked, failed, retried, deferred ─────────────────────────────────────


class Failing(Runtime):
    """Runtime events of ``drain_fails`` cannot be applied; delivering to
    ``deliver_fails`` raises."""

    def __init__(self, drain_fails: set[str] | None = None, deliver_fails: set[str] | None = None):
        self.drain_fails = drain_fails or set()
        self.deliver_fails = deliver_fails or set()
        self.delivered: list[str] = []

    def drain(self, scheduler: Any, task_id: str) -> None:
        if task_id in self.drain_fails:
            raise ConnectionError(f"runtime events of {task_id} unreadable")

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if task_id in self.deliver_fails:
            raise RuntimeError("host went away")
        self.delivered.append(task_id)
        return "delivered"


def test_pass_blocks_tasks_whose_runtime_events_failed(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    tasks_with_turns(scheduler, "t1", "t2", "t3")
    runtime = Failing(drain_fails={"t2"})
    report = scheduler.controller_pass(runtime=runtime)
    assert report.blocked == ["t2"] and report.done == ["t1", "t3"]
    assert runtime.delivered == ["t1", "t3"]  # nothing of the blocked task ran
    assert "unreadable" in report.errors["t2"]
    (blocked,) = of_type(scheduler, PassTaskBlocked)
    assert blocked.task_id == "t2" and blocked.pass_id == report.pass_id
    retry = scheduler.task_pass_retry("t2")
    assert retry is not None and retry.keys == ("task:t2",) and retry.retry_at == clock.now + 250


def test_pass_failed_task_is_retried_with_capped_backoff_up_to_the_limit(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    tasks_with_turns(scheduler, "t1", "t2")
    runtime = Failing(deliver_fails={"t1"})
    first = scheduler.controller_pass(runtime=runtime)
    assert first.failed == ["t1"] and first.done == ["t2"]  # the others continue
    assert first.retries == {"t1": clock.now + 250}
    clock.advance(249)
    assert scheduler.controller_pass(["operator"], runtime=runtime).retried == []
    clock.advance(1)
    second = scheduler.controller_pass(["operator"], runtime=runtime)
    assert second.retried == ["t1"] and second.failed == ["t1"]
    assert second.retries == {"t1": clock.now + 500}
    clock.advance(500)
    third = scheduler.controller_pass(["operator"], runtime=runtime)
    assert third.failed == ["t1"] and third.retries == {"t1": None}  # limit 2: abandoned
    assert scheduler.task_pass_retry("t1") is None
    clock.advance(10_000)
    assert scheduler.controller_pass(["operator"], runtime=runtime).retried == []
    scheduled = of_type(scheduler, TaskPassRetryScheduled)
    assert [(r.attempt, r.retry_at - r.at) for r in scheduled] == [(0, 250), (1, 500)]
    (abandoned,) = of_type(scheduler, TaskPassRetryAbandoned)
    assert abandoned.attempts == 2 and abandoned.keys == ("task:t1",)
    assert [f.task_id for f in of_type(scheduler, PassTaskFailed)] == ["t1"] * 3


def test_pass_success_clears_the_task_retry(scheduler: Scheduler, clock: ManualClock) -> None:
    tasks_with_turns(scheduler, "t1")
    scheduler.controller_pass(runtime=Failing(deliver_fails={"t1"}))
    assert scheduler.task_pass_retry("t1") is not None
    clock.advance(250)
    report = scheduler.controller_pass(["operator"], runtime=Failing())
    assert report.retried == ["t1"] and report.done == ["t1"]
    assert scheduler.task_pass_retry("t1") is None
    (cleared,) = of_type(scheduler, TaskPassRetryCleared)
    assert cleared.why == "succeeded"


def test_pass_defers_tasks_of_a_project_under_maintenance_never_fails_them(
    scheduler: Scheduler,
) -> None:
    tasks_with_turns(scheduler, "t1", "t2", project="billing")
    tasks_with_turns(scheduler, "t3", project="search")
    runtime = Failing()
    report = scheduler.controller_pass(runtime=runtime, maintenance={"billing"})
    assert report.having("deferred") == ["t1", "t2"] and report.done == ["t3"]
    assert report.failed == [] and report.retries == {}
    assert report.deferred == {"t1": ("billing",), "t2": ("billing",)}
    assert runtime.delivered == ["t3"]
    assert [(d.task_id, d.project_ids) for d in of_type(scheduler, PassTaskDeferred)] == [
        ("t1", ("billing",)),
        ("t2", ("billing",)),
    ]
    assert scheduler.task_pass_retry("t1") is None
    # A predicate works too; once maintenance ends the tasks run.
    predicate = scheduler.controller_pass(runtime=runtime, maintenance=lambda p: p == "search")
    assert predicate.having("deferred") == ["t3"] and predicate.done == ["t1", "t2"]


def test_pass_decisions_are_events_a_replay_can_read(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    tasks_with_turns(scheduler, "t1", "t2", "t3", project="p")
    scheduler.observe_exit("t1", "worker")
    report = scheduler.controller_pass(
        runtime=Failing(drain_fails={"t2"}), maintenance=lambda p: False
    )
    (started,) = of_type(scheduler, PassStarted)
    (finished,) = of_type(scheduler, PassFinished)
    assert started.task_ids == ("t1", "t2", "t3") and started.scope == "full"
    assert (finished.done, finished.blocked) == (("t1", "t3"), ("t2",))
    assert {e.pass_id for e in events_of(scheduler) if isinstance(e, TurnEvent) and e.pass_id} == {
        report.pass_id
    }
    state: PassState = scheduler.world.streams[f"pass:{report.pass_id}"]
    assert list(state.blocked) == ["t2"] and state.finished_at == clock.now


# ─── serialization per task, concurrency across tasks ───────────────────────


class Meeting(Runtime):
    """Every per-task pass waits at a barrier: the pass finishes only if ``parties``
    tasks are inside their per-task pass at the same time."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=WAIT)
        self.lock = threading.Lock()
        self.inside = 0
        self.most_inside = 0

    def drain(self, scheduler: Any, task_id: str) -> None:
        with self.lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            self.barrier.wait()
        finally:
            with self.lock:
                self.inside -= 1


def test_pass_runs_tasks_concurrently_up_to_the_bound(scheduler: Scheduler) -> None:
    tasks = tasks_with_turns(scheduler, "t1", "t2", "t3", "t4")
    meeting = Meeting(parties=4)
    report = scheduler.controller_pass(runtime=meeting)
    assert report.done == tasks and meeting.most_inside == 4
    bounded = Meeting(parties=2)
    report = scheduler.controller_pass(runtime=bounded, concurrency=2)
    assert report.done == tasks and bounded.most_inside == 2


class Recorder(Runtime):
    """Holds the first per-task pass of ``t1`` until released, and records every
    per-task pass's entry and exit."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside: Counter[str] = Counter()
        self.visits: Counter[str] = Counter()
        self.overlaps: list[str] = []
        self.log: list[tuple[str, int, str]] = []
        self.entered = {key: threading.Event() for key in [("t1", 1), ("t1", 2), ("t2", 1)]}
        self.release = threading.Event()

    def drain(self, scheduler: Any, task_id: str) -> None:
        with self.lock:
            self.inside[task_id] += 1
            if self.inside[task_id] > 1:
                self.overlaps.append(task_id)
            self.visits[task_id] += 1
            visit = self.visits[task_id]
            self.log.append((task_id, visit, "in"))
        event = self.entered.get((task_id, visit))
        if event is not None:
            event.set()
        if (task_id, visit) == ("t1", 1):
            assert self.release.wait(WAIT)
        with self.lock:
            self.inside[task_id] -= 1
            self.log.append((task_id, visit, "out"))


def test_pass_per_task_work_never_overlaps_while_different_tasks_do(
    scheduler: Scheduler,
) -> None:
    tasks_with_turns(scheduler, "t1", "t2")
    recorder = Recorder()
    reports: dict[str, Any] = {}

    def run(name: str, keys: list[str]) -> None:
        reports[name] = scheduler.controller_pass(keys, runtime=recorder, concurrency=2)

    first = threading.Thread(target=run, args=("first", [task_key("t1")]))
    first.start()
    assert recorder.entered[("t1", 1)].wait(WAIT)
    second = threading.Thread(target=run, args=("second", [task_key("t1"), task_key("t2")]))
    second.start()
    # t2 runs in the second pass while t1's pass in the first one is still inside ...
    assert recorder.entered[("t2", 1)].wait(WAIT)
    # ... but the second pass's t1 has not entered: it waits for the first to leave.
    assert not recorder.entered[("t1", 2)].is_set()
    recorder.release.set()
    first.join(WAIT)
    second.join(WAIT)
    assert not first.is_alive() and not second.is_alive()
    assert recorder.overlaps == []
    t1 = [(visit, edge) for task, visit, edge in recorder.log if task == "t1"]
    assert t1 == [(1, "in"), (1, "out"), (2, "in"), (2, "out")]
    assert reports["first"].done == ["t1"] and reports["second"].done == ["t1", "t2"]


def test_pass_concurrently_on_every_store(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(store_url, clock=clock, registry=registry)
    tasks = tasks_with_turns(scheduler, "t1", "t2", "t3", "t4")
    for task_id in tasks:
        scheduler.observe_exit(task_id, "worker")
    report = scheduler.controller_pass(runtime=Meeting(parties=4))
    assert report.done == tasks
    assert report.turns == {task_id: {"worker": "exited"} for task_id in tasks}
    written = scheduler.events_written
    scheduler.close()
    assert event_count(store_url) == written
    reopened = Scheduler.open(store_url, clock=clock, registry=registry)
    # Finished, the pass is not held in memory after the reopen; it reads back from the store.
    assert f"pass:{report.pass_id}" not in reopened.world.streams
    state: PassState = reopened.world.stream(f"pass:{report.pass_id}")
    assert state.done == tuple(tasks) and state.task_ids == tuple(tasks)
    assert all(reopened.active_turn(t, "worker") is None for t in tasks)
    reopened.close()


def test_a_task_lock_is_kept_only_while_a_pass_holds_it(scheduler: Scheduler) -> None:
    """A Worker runs for months: the per-task locks of the tasks it worked are not
    kept once no pass holds or waits for them (they were, one a task, for good)."""
    tasks = tasks_with_turns(scheduler, *(f"t{n}" for n in range(20)))
    assert scheduler.controller_pass(runtime=Meeting(parties=1)).done == tasks
    assert len(scheduler._turn_task_locks) == 0
    held = scheduler._task_lock("t0")
    assert scheduler._task_lock("t0") is held  # asked for while held: the same lock
    assert list(scheduler._turn_task_locks) == ["t0"]
    del held
    assert len(scheduler._turn_task_locks) == 0
