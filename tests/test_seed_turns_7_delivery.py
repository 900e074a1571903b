"""yui's Turns, seventh round (seed 001, yui 0.13.9 -> 0.14.0; seed 000 for the delivery
retry constants): what each delivery outcome records and when the Turn is offered again,
and delivery retry exhaustion and what follows it. Each test names the seed function it
follows and fails when the behaviour breaks. docs/seed-fidelity.md, "Round seven (Turns:
delivery outcomes, retries, force windows)", says what changed."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.probes import Answers, busy_leader, of_type
from helpers.seed_turns_7 import AGGREGATION

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import (
    TurnDelivered,
    TurnDeliveryFailed,
    TurnDeliveryHeld,
    TurnDeliveryRetryScheduled,
    TurnFailed,
    TurnStarted,
    WakeupDispatched,
    WakeupRequested,
)
from tasktrail.domain.turns.pass_events import PassTaskFailed, TaskPassRetryScheduled
from tasktrail.domain.turns.refusals import StaleCompletion
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.state import LEADER

DELIVERY_EVENTS = (TurnDelivered, TurnDeliveryRetryScheduled, TurnDeliveryHeld, TurnDeliveryFailed)


class Scripted(Runtime):
    """Answers each delivery with the next of ``outcomes``, noting (turn, attempt)."""

    def __init__(self, *outcomes: str) -> None:
        self.outcomes = list(outcomes)
        self.tried: list[tuple[str, int]] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.tried.append((turn_id, attempt))
        return self.outcomes.pop(0)


class EndsWhileDelivering(Runtime):
    """Ends the Turns named in ``ends`` while delivering them (``how``: a terminal
    delivery failure, or an agent that finished at once), then answers ``answer``;
    delivers the others."""

    def __init__(self, scheduler: Scheduler, ends: set[str], how: str, answer: str) -> None:
        self.scheduler = scheduler
        self.ends = ends
        self.how = how
        self.answer = answer
        self.tried: list[str] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.tried.append(turn_id)
        if turn_id not in self.ends:
            return "delivered"
        if self.how == "failed":
            self.scheduler.fail_turn(task_id, role, turn_id, reason="launch failed for good")
        else:
            self.scheduler.complete_turn(task_id, role, turn_id)
        return self.answer


class RaisesOnce(Runtime):
    """The first delivery raises (the runtime's socket went away); later ones deliver."""

    def __init__(self) -> None:
        self.tried: list[tuple[str, int]] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.tried.append((turn_id, attempt))
        if len(self.tried) == 1:
            raise ConnectionError("the runtime's socket went away")
        return "delivered"


# ─── delivery outcomes ──────────────────────────────────────────────────────────


@pytest.mark.parametrize("answer", ["delivered", "not-ready", "writer-attached"])
@pytest.mark.parametrize("how", ["failed", "completed"])
def test_yui_turn_ended_while_being_delivered_is_settled_not_a_failed_pass(
    scheduler: Scheduler, how: str, answer: str
) -> None:
    """001 ``FileTaskController#scheduleDeliveryRetries``: a delivery result that
    ``terminalized`` its Turn is settled (the role's retry cleared), like a delivered
    one; it is no error of the pass. A runtime ends a Turn it cannot deliver with
    ``fail_turn`` (or its agent finished at once): the pass records nothing more of
    that delivery and goes on."""
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = EndsWhileDelivering(scheduler, {turn}, how, answer)
    report = scheduler.controller_pass(runtime=runtime)
    assert report.outcomes == {task: "done"} and report.errors == {}
    assert of_type(scheduler, PassTaskFailed) == []
    assert of_type(scheduler, TaskPassRetryScheduled) == []
    assert scheduler.task_pass_retry(task) is None
    assert [e for cls in DELIVERY_EVENTS for e in of_type(scheduler, cls)] == []
    last = scheduler.roles(task)["worker"].last
    assert last is not None and (last.turn_id, last.status) == (turn, how)
    assert scheduler.next_turn_deadline() is None
    assert scheduler.start_turn(task, "worker") == "worker.2"


def test_yui_leader_turn_ended_while_being_delivered_lets_its_wakeup_start_the_next(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries`` (0.13.9's wakeup branch): a terminalized
    result settles the role and signals it again, so the wakeup that waited for the
    busy Leader starts the next Turn; in tasktrail, in the same pass."""
    task = scheduler.submit("job", id="t1")
    first = scheduler.start_turn(task, LEADER)
    scheduler.request_wakeup(task, "operator wrote")
    clock.advance(AGGREGATION)
    runtime = EndsWhileDelivering(scheduler, {first}, "failed", "runtime-unavailable")
    report = scheduler.controller_pass(runtime=runtime)
    assert report.outcomes == {task: "done"}
    assert report.wakeups == {task: "dispatched"}
    assert runtime.tried == [first, "leader.2"]
    leader = scheduler.active_turn(task, LEADER)
    assert leader is not None and (leader.turn_id, leader.status) == ("leader.2", "delivered")
    (failed,) = of_type(scheduler, TurnFailed)
    assert (failed.turn_id, failed.reason) == (first, "launch failed for good")


@pytest.mark.parametrize("settled", ["delivered", "already-delivered"])
def test_yui_settled_delivery_ends_the_retry_and_is_not_offered_again(
    scheduler: Scheduler, clock: ManualClock, settled: str
) -> None:
    """001 ``#scheduleDeliveryRetries``: ``delivered`` and ``already-delivered`` are
    settled (the role's retry timer is cleared); only ``not-ready`` and
    ``runtime-unavailable`` are retried."""
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = Scripted("not-ready", settled)
    scheduler.controller_pass(runtime=runtime)
    clock.advance(250)
    scheduler.controller_pass(runtime=runtime)
    active = scheduler.active_turn(task, "worker")
    assert active is not None and (active.status, active.retry_at) == ("delivered", None)
    (delivered,) = of_type(scheduler, TurnDelivered)
    assert (delivered.turn_id, delivered.outcome) == (turn, settled)
    clock.advance(10_000)
    scheduler.controller_pass(runtime=runtime)  # would pop from an empty script
    assert runtime.tried == [(turn, 0), (turn, 1)]
    due = scheduler.next_turn_deadline()
    assert due is not None and due > clock.now  # the stall diagnostic only


def test_yui_held_answers_use_no_delivery_attempt(scheduler: Scheduler, clock: ManualClock) -> None:
    """001 ``#scheduleDeliveryRetries``: ``writer-attached`` is writer-blocked and
    ``delivery-uncertain`` is neither settled nor retried; only the retryable answers
    go on the retry timer, so held answers before them count for nothing: the first
    retry is still attempt 0, after 250 ms."""
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = Scripted("writer-attached", "delivery-uncertain", "not-ready")
    for _ in range(3):
        scheduler.controller_pass(runtime=runtime)
    assert runtime.tried == [(turn, 0)] * 3
    held = of_type(scheduler, TurnDeliveryHeld)
    assert [h.outcome for h in held] == ["writer-attached", "delivery-uncertain"]
    (retry,) = of_type(scheduler, TurnDeliveryRetryScheduled)
    assert (retry.attempt, retry.retry_at) == (0, clock.now + 250)


def test_yui_delivery_that_raises_records_nothing_and_its_task_pass_is_retried(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``runControllerSchedulerPass``: the delivery phase comes before liveness and
    the later wakeup phase, so a delivery that throws ends the task's pass there; 000
    ``#scheduleTaskPassRetry`` retries it. Nothing of that delivery is recorded, it
    uses no delivery attempt, and the rest of the task's pass waits for the retry."""
    task = scheduler.submit("job", id="t1")
    worker = scheduler.start_turn(task, "worker")
    leader = busy_leader(scheduler, task)
    scheduler.observe_exit(task, LEADER, leader)
    scheduler.request_wakeup(task, "operator wrote")
    clock.advance(AGGREGATION)
    runtime = RaisesOnce()
    report = scheduler.controller_pass(runtime=runtime)
    assert report.outcomes == {task: "failed"} and "socket" in report.errors[task]
    assert report.turns == {} and report.wakeups == {}  # liveness and wakeup did not run
    assert [e for cls in DELIVERY_EVENTS for e in of_type(scheduler, cls) if e.pass_id] == []
    assert scheduler.active_turn(task, LEADER) is not None
    retry = scheduler.task_pass_retry(task)
    assert retry is not None and retry.retry_at == clock.now + 250
    clock.set(retry.retry_at)
    report = scheduler.controller_pass(runtime=runtime)
    assert report.outcomes == {task: "done"}
    assert report.turns == {task: {LEADER: "exited"}} and report.wakeups == {task: "dispatched"}
    assert runtime.tried == [(worker, 0), (worker, 0), ("leader.2", 0)]


def test_yui_wakeup_turn_whose_delivery_raises_is_delivered_by_the_retry_not_started_again(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``runControllerSchedulerPass``: the wakeup phase starts the Leader Turn (its
    own durable step), then its delivery throws. The started Turn stays, undelivered
    and due now; the task-pass retry delivers that same Turn, no second one."""
    task = scheduler.submit("job", id="t1")
    scheduler.request_wakeup(task, "operator wrote")
    clock.advance(AGGREGATION)
    runtime = RaisesOnce()
    assert scheduler.controller_pass(runtime=runtime).outcomes == {task: "failed"}
    assert scheduler.pending_wakeup(task) is None
    leader = scheduler.active_turn(task, LEADER)
    assert leader is not None and (leader.turn_id, leader.status) == ("leader.1", "started")
    assert scheduler.next_turn_deadline() == leader.started_at
    retry = scheduler.task_pass_retry(task)
    assert retry is not None
    clock.set(retry.retry_at)
    assert scheduler.controller_pass(runtime=runtime).outcomes == {task: "done"}
    assert runtime.tried == [("leader.1", 0), ("leader.1", 0)]
    assert [s.turn_id for s in of_type(scheduler, TurnStarted)] == ["leader.1"]
    assert len(of_type(scheduler, WakeupDispatched)) == 1


# ─── delivery retry exhaustion ──────────────────────────────────────────────────


def test_yui_default_delivery_retries_give_up_after_sixty_in_under_two_minutes(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``DEFAULT_DELIVERY_RETRY_MS = 250``, ``DEFAULT_DELIVERY_RETRY_LIMIT = 60``
    and ``min(2000, base * 2**min(attempts, 3))``: sixty retries after the first try,
    250 + 500 + 1000 + 57 * 2000 ms in all; the delivery after them is the failure."""
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = Answers("runtime-unavailable")
    started = clock.now
    while scheduler.active_turn(task, "worker") is not None:
        scheduler.controller_pass(runtime=runtime)
        due = scheduler.next_turn_deadline()
        if due is not None and scheduler.active_turn(task, "worker") is not None:
            clock.set(due)
    assert runtime.tried == [(turn, attempt) for attempt in range(61)]
    assert clock.now - started == 250 + 500 + 1000 + 57 * 2000
    (failure,) = of_type(scheduler, TurnDeliveryFailed)
    assert (failure.attempts, failure.outcome) == (61, "runtime-unavailable")


def test_yui_exhaustion_fails_the_turn_not_the_pass_nor_the_task(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries`` / ``#terminalizePreparedAfterRetryExhaustion``:
    exhaustion saves the delivery failure of that one Turn and settles its role. The
    task's pass is no failure (no task-pass retry), the task keeps its status, the
    role starts its next Turn, whose attempts are its own (the retry's identity is
    the Turn), no Leader wakeup is asked for, and a late completion of the failed Turn
    is stale."""
    scheduler.configure_turns(delivery_retry_limit=1)
    task = scheduler.submit("job", id="t1")
    status = scheduler.task(task).status
    turn = scheduler.start_turn(task, "worker")
    runtime = Answers("not-ready")
    scheduler.controller_pass(runtime=runtime)
    clock.advance(250)
    report = scheduler.controller_pass(runtime=runtime)
    assert report.outcomes == {task: "done"} and report.turns == {task: {"worker": "failed"}}
    assert of_type(scheduler, PassTaskFailed) == [] and scheduler.task_pass_retry(task) is None
    assert scheduler.task(task).status == status
    assert scheduler.next_turn_deadline() is None
    assert of_type(scheduler, WakeupRequested) == [] and scheduler.pending_wakeup(task) is None
    with pytest.raises(StaleCompletion):
        scheduler.complete_turn(task, "worker", turn)
    assert scheduler.start_turn(task, "worker") == "worker.2"
    scheduler.controller_pass(runtime=runtime)
    assert runtime.tried == [(turn, 0), (turn, 1), ("worker.2", 0)]


def test_yui_leader_exhaustion_does_not_cut_its_wakeups_aggregation_window(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleNextLeaderWakeDeadline``: the wake is timed from
    ``firstRequestedAt`` only. A Leader Turn that exhaustion ended frees the Leader,
    but the wakeup still waits for its aggregation end, then starts the next Turn."""
    scheduler.configure_turns(delivery_retry_limit=1)
    task = scheduler.submit("job", id="t1")
    scheduler.start_turn(task, LEADER)
    runtime = Answers("not-ready")
    scheduler.controller_pass(runtime=runtime)
    first_at = clock.now
    scheduler.request_wakeup(task, "operator wrote")
    clock.advance(250)
    report = scheduler.controller_pass(runtime=runtime)
    assert report.turns == {task: {LEADER: "failed"}} and report.wakeups == {task: "aggregating"}
    assert scheduler.next_turn_deadline() == first_at + AGGREGATION
    clock.set(first_at + AGGREGATION)
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "dispatched"}
    leader = scheduler.active_turn(task, LEADER)
    assert leader is not None and leader.turn_id == "leader.2"
