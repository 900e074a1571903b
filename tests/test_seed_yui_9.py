"""yui, ninth round (seeds 000 and 001: yui 0.6.4 -> 0.6.6, ``FileTaskController``, and
yui 0.13.9 -> 0.14.0, Turns): the corners earlier rounds touched least. The backoff at
its cap and after a success, retry exhaustion counts (a busy Leader's re-signals, Turn
deliveries, task-pass retries), deadlines exactly at their time, the exact mapping of
delivery outcomes, which tasks and roles a dirty pass takes, and the Leader wake
deadlines 0.14.0 adds. Each test names the seed behaviour it pins and fails when it
breaks; docs/seed-fidelity.md, "Round nine (yui)", says what changed."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from helpers.probes import Answers, busy_leader, of_type

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler, Worker
from tasktrail.domain.turns.events import (
    TurnDelivered,
    TurnDeliveryFailed,
    TurnDeliveryHeld,
    TurnDeliveryRetryScheduled,
    TurnFailed,
    WakeupDispatched,
    WakeupFoundBusy,
)
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import (
    PassStarted,
    PassTaskFailed,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
    TaskPassRetryScheduled,
)
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings
from tasktrail.domain.turns.state import LEADER

AGGREGATION = TurnSettings().aggregation_window_ms  # yui's LEADER_WAKE_AGGREGATION_MS
FORCE = TurnSettings().force_window_ms  # yui's LEADER_WAKE_FORCE_MS
WAIT = 10  # seconds a test waits for the worker's thread (never reached when green)


def _found(scheduler: Scheduler) -> list[tuple[int, float | None]]:
    """Each WakeupFoundBusy as (attempt, ms from its record to its re-signal)."""
    return [
        (f.attempt, None if f.resignal_at is None else f.resignal_at - f.at)
        for f in of_type(scheduler, WakeupFoundBusy)
    ]


def _busy_wakeup(scheduler: Scheduler, clock: ManualClock, task_id: str = "t1") -> float:
    """A task whose Leader is busy with a delivered Turn and whose wakeup's aggregation
    window just ended; returns when the wakeup was first requested."""
    scheduler.submit("job", id=task_id)
    busy_leader(scheduler, task_id)
    first_at = clock.now
    scheduler.request_wakeup(task_id, "mail")
    clock.set(first_at + AGGREGATION)
    return first_at


def _follow_resignals(
    scheduler: Scheduler, clock: ManualClock, task_id: str, first_at: float
) -> int:
    """Run a pass at each of the wakeup's re-signals until only its force end is left;
    returns how many passes found the Leader busy."""
    passes = 0
    while True:
        assert scheduler.controller_pass().wakeups == {task_id: "busy"}
        passes += 1
        due = scheduler.next_turn_deadline()
        assert due is not None
        if due == first_at + FORCE:
            return passes
        clock.set(due)


# ─── exhaustion counts: a busy Leader's re-signals (001, with 000's limits) ──────────


def test_yui_busy_wake_is_resignalled_as_often_as_a_delivery_is_retried(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries`` puts a wake that found the Leader busy on the
    Leader's delivery retry timer, the one a Turn that was not ready is retried on, with
    the same limit (000 ``deliveryRetryLimit``): at limit 3 a Turn gets 3 retries (4
    deliveries), and a busy wake 3 re-signals (250, 500, 1000 ms); the pass the third
    runs finds the Leader busy still and gives up, leaving the force end."""
    scheduler.configure_turns(delivery_retry_limit=3)
    scheduler.submit("job", id="slow")
    scheduler.start_turn("slow", "worker")
    runtime = Answers("not-ready")
    for _ in range(5):
        scheduler.controller_pass([task_key("slow")], runtime=runtime)
        retries = of_type(scheduler, TurnDeliveryRetryScheduled)
        if retries:
            clock.set(max(clock.now, retries[-1].retry_at))
    assert len(runtime.tried) == 4 and len(of_type(scheduler, TurnDeliveryRetryScheduled)) == 3

    first_at = _busy_wakeup(scheduler, clock)
    assert _follow_resignals(scheduler, clock, "t1", first_at) == 4
    assert _found(scheduler) == [(0, 250), (1, 500), (2, 1000), (3, None)]
    assert clock.now == first_at + AGGREGATION + 1750  # the third re-signal's pass
    assert scheduler.pending_wakeup("t1").resignal_at is None  # type: ignore[union-attr]


def test_yui_default_busy_wake_resignals_end_when_default_delivery_retries_do(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000's defaults (a 250 ms base, 60 retries) on 001's busy wake: 60 re-signals, the
    last 115,750 ms after the pass that first found the Leader busy, exactly when a Turn
    that is never ready gets its last delivery (round seven pinned that one)."""
    first_at = _busy_wakeup(scheduler, clock)
    assert _follow_resignals(scheduler, clock, "t1", first_at) == 61
    found = _found(scheduler)
    assert [gap for _, gap in found if gap is not None] == [250, 500, 1000] + [2000] * 57
    assert found[-1] == (60, None)
    assert clock.now == first_at + AGGREGATION + 115_750


def test_yui_busy_wake_whose_limit_was_lowered_below_its_count_gives_up_at_its_resignal(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries`` gives up on a retry whose attempts reached the
    limit. A wake found busy three times under a limit of 6 (re-signal due at +1750),
    then the limit lowered to 2 (a recorded setting): the pass at that re-signal finds
    the Leader busy and gives up, so only the force end is left; the deadline does not
    stay in the past (a Worker would run a pass every backoff until the force end)."""
    scheduler.configure_turns(delivery_retry_limit=6)
    first_at = _busy_wakeup(scheduler, clock)
    for _ in range(3):
        assert scheduler.controller_pass().wakeups == {"t1": "busy"}
        due = scheduler.next_turn_deadline()
        assert due is not None
        clock.set(due)
    scheduler.configure_turns(delivery_retry_limit=2)
    assert scheduler.controller_pass().wakeups == {"t1": "busy"}
    assert _found(scheduler)[-1] == (3, None)
    assert scheduler.next_turn_deadline() == first_at + FORCE


# ─── the backoff at its cap, and after a success ────────────────────────────────────


def test_yui_backoff_base_above_the_cap_waits_the_cap_from_the_first_retry(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``#scheduleTaskPassRetry`` caps the whole delay, base included: a base of
    5000 ms waits 2000 ms from the first retry, for a Turn's delivery retry, a task-pass
    retry and a busy wake's re-signal alike."""
    scheduler.configure_turns(delivery_retry_base_ms=5_000, task_pass_retry_base_ms=5_000)
    scheduler.submit("job", id="slow")
    scheduler.start_turn("slow", "worker")
    scheduler.controller_pass([task_key("slow")], runtime=Answers("not-ready"))
    (retry,) = of_type(scheduler, TurnDeliveryRetryScheduled)
    assert retry.retry_at - retry.at == 2_000

    class Unreadable(Runtime):
        def drain(self, scheduler: Any, task_id: str) -> None:
            raise ConnectionError("runtime events unreadable")

    scheduler.controller_pass([task_key("slow")], runtime=Unreadable())
    (armed,) = of_type(scheduler, TaskPassRetryScheduled)
    assert (armed.attempt, armed.retry_at - armed.at) == (0, 2_000)

    _busy_wakeup(scheduler, clock)
    scheduler.controller_pass([task_key("t1")])
    assert _found(scheduler) == [(0, 2_000)]


class Failing(Runtime):
    """Delivering any Turn of a task in ``failing`` raises (its per-task pass fails)."""

    def __init__(self, *failing: str) -> None:
        self.failing = set(failing)

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if task_id in self.failing:
            raise RuntimeError(f"{task_id}: socket closed")
        return "delivered"


def test_yui_task_pass_retry_after_a_success_backs_off_from_the_base_again(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000: a per-task pass that succeeds clears the task's retry and its attempts
    (``#clearTaskPassRetry``), so the next failure is retried after the base (250 ms,
    attempt 0) again, not after the step the count had reached (1000 ms)."""
    scheduler.configure_turns(task_pass_retry_limit=5)
    scheduler.submit("job", id="t1")
    scheduler.start_turn("t1", "worker")
    keys = [task_key("t1")]
    scheduler.controller_pass(keys, runtime=Failing("t1"))
    for _ in range(2):  # the retries fire and fail: attempts 1 and 2
        retry = scheduler.task_pass_retry("t1")
        assert retry is not None
        clock.set(retry.retry_at)
        scheduler.controller_pass(["operator"], runtime=Failing("t1"))
    armed = of_type(scheduler, TaskPassRetryScheduled)
    assert [(r.attempt, r.retry_at - r.at) for r in armed] == [(0, 250), (1, 500), (2, 1000)]
    assert scheduler.controller_pass(keys, runtime=Failing()).outcomes == {"t1": "done"}
    assert scheduler.task_pass_retry("t1") is None
    assert of_type(scheduler, TaskPassRetryCleared)[-1].why == "succeeded"
    scheduler.start_turn("t1", "reviewer")
    scheduler.controller_pass(keys, runtime=Failing("t1"))
    last = of_type(scheduler, TaskPassRetryScheduled)[-1]
    assert (last.attempt, last.retry_at - last.at) == (0, 250)


def test_yui_worker_pass_backoff_caps_at_two_seconds_and_restarts_after_a_pass_that_moved(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """The Worker runs a pass that could not move its deadline again after yui's
    delivery backoff (001 ``#scheduleDeliveryRetries``' timers): 250, 500, 1000, 2000,
    then 2000 ms for good; once a pass moved the deadline, the next stuck pass starts
    again at 250 ms (a retry that got through is cleared)."""

    class Fenced(Runtime):
        fence = True

        def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
            return "delivered"

        def leader_wake_fenced(self) -> bool:
            return self.fence

    task = scheduler.submit("crew", id="t1", phase="lead")  # no phases here to run
    scheduler.request_wakeup(task, "mail")
    clock.advance(AGGREGATION)
    runtime = Fenced()
    worker = Worker(scheduler, runtime=runtime)
    gaps = []
    for _ in range(6):
        worker.tick()
        due = worker.next_deadline()
        assert due is not None
        gaps.append(due - clock.now)
        clock.set(due)
    assert gaps == [250, 500, 1000, 2000, 2000, 2000]
    runtime.fence = False
    worker.tick()  # dispatches: the deadline moved
    leader = scheduler.active_turn(task, LEADER)
    assert leader is not None and leader.status == "delivered"
    scheduler.complete_turn(task, LEADER, leader.turn_id)
    runtime.fence = True
    scheduler.request_wakeup(task, "more mail")
    clock.advance(AGGREGATION)
    worker.tick()
    assert worker.next_deadline() == clock.now + 250


# ─── exhaustion counts at a limit of one ────────────────────────────────────────────


def test_yui_delivery_limit_of_one_retries_once_then_fails_the_turn(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000/001: a delivery retry limit of 1 is one retry: the first ``not-ready`` is
    retried after 250 ms, the second delivery's ``not-ready`` records the delivery
    failure (two deliveries) and ends the Turn ``failed``."""
    scheduler.configure_turns(delivery_retry_limit=1)
    scheduler.submit("job", id="t1")
    turn = scheduler.start_turn("t1", "worker")
    runtime = Answers("not-ready")
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    (retry,) = of_type(scheduler, TurnDeliveryRetryScheduled)
    assert (retry.attempt, retry.retry_at - retry.at) == (0, 250)
    clock.set(retry.retry_at)
    report = scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert report.turns == {"t1": {"worker": "failed"}}
    assert runtime.tried == [(turn, 0), (turn, 1)]
    (failure,) = of_type(scheduler, TurnDeliveryFailed)
    assert failure.attempts == 2
    (failed,) = of_type(scheduler, TurnFailed)
    assert (failed.turn_id, failed.reason) == (turn, "delivery_exhausted")


def test_yui_task_pass_retry_limit_of_one_retries_once_then_gives_up(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``#scheduleTaskPassRetry``: a limit of 1 arms one retry (after 250 ms); the
    failure of that retry finds the attempts at the limit and gives up, arming none."""
    scheduler.configure_turns(task_pass_retry_limit=1)
    scheduler.submit("job", id="t1")
    scheduler.start_turn("t1", "worker")
    scheduler.controller_pass([task_key("t1")], runtime=Failing("t1"))
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and (retry.attempt, retry.retry_at - clock.now) == (0, 250)
    clock.set(retry.retry_at)
    report = scheduler.controller_pass(["operator"], runtime=Failing("t1"))
    assert report.retried == ["t1"] and report.retries == {"t1": None}
    (abandoned,) = of_type(scheduler, TaskPassRetryAbandoned)
    assert abandoned.attempts == 1
    assert scheduler.task_pass_retry("t1") is None
    assert len(of_type(scheduler, TaskPassRetryScheduled)) == 1


# ─── deadlines exactly at their time ────────────────────────────────────────────────


def test_yui_failure_exactly_when_the_task_pass_retry_is_due_is_its_next_attempt(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``#scheduleTaskPassRetry``: a failure while the retry timer is armed uses no
    attempt; at the retry's time the timer has fired, so a failure of the same keys
    then is the retry's next attempt (a millisecond before, it is not)."""
    scheduler.submit("job", id="t1")
    scheduler.start_turn("t1", "worker")
    keys = [task_key("t1")]
    scheduler.controller_pass(keys, runtime=Failing("t1"))
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None
    clock.set(retry.retry_at - 1)
    scheduler.controller_pass(keys, runtime=Failing("t1"))
    assert scheduler.task_pass_retry("t1") == retry  # armed: no attempt used
    clock.set(retry.retry_at)
    scheduler.controller_pass(keys, runtime=Failing("t1"))
    after = scheduler.task_pass_retry("t1")
    assert after is not None and (after.attempt, after.retry_at) == (1, clock.now + 500)
    assert len(of_type(scheduler, PassTaskFailed)) == 3


def test_yui_delivery_retry_is_offered_exactly_at_its_retry_time(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001: a Turn that was not ready is delivered again when its retry timer fires, at
    ``retry_at`` exactly; a pass a millisecond before does not offer it."""
    scheduler.submit("job", id="t1")
    turn = scheduler.start_turn("t1", "worker")
    runtime = Answers("not-ready")
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    (retry,) = of_type(scheduler, TurnDeliveryRetryScheduled)
    assert scheduler.next_turn_deadline() == retry.retry_at
    clock.set(retry.retry_at - 1)
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert runtime.tried == [(turn, 0)]
    clock.set(retry.retry_at)
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert runtime.tried == [(turn, 0), (turn, 1)]


def test_yui_busy_wake_resignal_is_recorded_exactly_at_its_time(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001: a busy wake's retry timer fires at its re-signal time exactly; the pass then
    finds the Leader busy (attempt 1); a pass a millisecond before records nothing."""
    _busy_wakeup(scheduler, clock)
    scheduler.controller_pass()
    resignal_at = clock.now + 250
    assert scheduler.next_turn_deadline() == resignal_at
    clock.set(resignal_at - 1)
    scheduler.controller_pass()
    assert _found(scheduler) == [(0, 250)]
    clock.set(resignal_at)
    scheduler.controller_pass()
    assert _found(scheduler) == [(0, 250), (1, 500)]


def test_yui_resignal_falling_on_the_force_end_is_the_force(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleNextLeaderWakeDeadline`` arms the force end for a busy Leader once
    the aggregation end passed; a re-signal due at that same time is that deadline, and
    the pass then hands the reasons to the busy Turn (the force window counts from the
    first request, and a wake at its end is forced)."""
    scheduler.configure_turns(aggregation_window_ms=1_000, force_window_ms=1_250)
    scheduler.submit("job", id="t1")
    busy = busy_leader(scheduler, "t1")
    first_at = clock.now
    scheduler.request_wakeup("t1", "mail")
    clock.set(first_at + 1_000)
    assert scheduler.controller_pass().wakeups == {"t1": "busy"}
    assert _found(scheduler) == [(0, 250)]
    assert scheduler.next_turn_deadline() == first_at + 1_250
    clock.set(first_at + 1_250)
    assert scheduler.controller_pass().wakeups == {"t1": "steered"}
    (steered,) = of_type(scheduler, WakeupDispatched)
    assert (steered.mode, steered.turn_id) == ("steered", busy)
    assert len(_found(scheduler)) == 1  # forced, not found busy again


def test_yui_wakeups_due_at_the_same_aggregation_end_are_dispatched_by_one_pass(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleNextLeaderWakeDeadline`` signals every wakeup whose deadline is the
    nearest one (a deadline batch), and the pass it runs dispatches them all: two tasks'
    wakeups requested at the same time start their Leader Turns in one pass at their
    aggregation end, and a third, requested later, stays pending."""
    first_at = clock.now
    for task_id in ("t1", "t2"):
        scheduler.submit("job", id=task_id)
        scheduler.request_wakeup(task_id, "mail")
    scheduler.submit("job", id="t3")
    clock.advance(1)
    scheduler.request_wakeup("t3", "mail")
    assert scheduler.next_turn_deadline() == first_at + AGGREGATION
    clock.set(first_at + AGGREGATION)
    report = scheduler.controller_pass(runtime=Answers("delivered"))
    assert report.wakeups == {"t1": "dispatched", "t2": "dispatched", "t3": "aggregating"}
    assert scheduler.pending_wakeup("t3") is not None
    assert scheduler.next_turn_deadline() == first_at + 1 + AGGREGATION


# ─── delivery outcomes, each mapped exactly ─────────────────────────────────────────


class ByRole(Runtime):
    """Answers each role's delivery with the outcome named after it."""

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        return None if role == "silent" else role


def test_yui_each_delivery_outcome_maps_to_what_it_does_to_the_turn(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries``: ``delivered`` and ``already-delivered`` settle
    the Turn; ``not-ready`` and ``runtime-unavailable`` are retried (attempt 0, after
    250 ms); ``writer-attached`` (writer-blocked) and ``delivery-uncertain`` are neither
    settled nor retried, and use no attempt. A runtime that does not deliver records
    nothing (the Turn stays due); an outcome outside the six is refused, appending
    nothing."""
    outcomes = (
        "delivered",
        "already-delivered",
        "not-ready",
        "runtime-unavailable",
        "writer-attached",
        "delivery-uncertain",
    )
    scheduler.submit("job", id="t1")
    turns = {role: scheduler.start_turn("t1", role) for role in (*outcomes, "silent")}
    scheduler.controller_pass([task_key("t1")], runtime=ByRole())
    settled = {e.role for e in of_type(scheduler, TurnDelivered)}
    retried = {
        e.role: (e.attempt, e.retry_at - e.at)
        for e in of_type(scheduler, TurnDeliveryRetryScheduled)
    }
    held = {e.role for e in of_type(scheduler, TurnDeliveryHeld)}
    assert settled == {"delivered", "already-delivered"}
    assert retried == {"not-ready": (0, 250), "runtime-unavailable": (0, 250)}
    assert held == {"writer-attached", "delivery-uncertain"}
    state = {role: scheduler.active_turn("t1", role) for role in turns}
    assert {r for r, t in state.items() if t is not None and t.status == "delivered"} == settled
    for role in ("writer-attached", "delivery-uncertain", "silent"):
        turn = state[role]
        assert turn is not None and turn.status == "started" and turn.delivery_attempts == 0
    silent = state["silent"]
    assert silent is not None and silent.delivery_outcome is None
    assert scheduler.next_turn_deadline() == silent.started_at  # still due now
    head = scheduler.store.head()
    with pytest.raises(InvalidArgument):
        scheduler.deliver_turn("t1", "silent", turns["silent"], "lost")
    assert scheduler.store.head() == head


def test_yui_settled_answer_for_a_delivered_turn_records_nothing(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001: ``delivered`` and ``already-delivered`` both settle; a Turn already
    delivered that is answered either way again is unchanged, nothing recorded."""
    scheduler.submit("job", id="t1")
    turn = scheduler.start_turn("t1", "worker")
    assert scheduler.deliver_turn("t1", "worker", turn, "delivered").status == "delivered"
    head = scheduler.store.head()
    for outcome in ("already-delivered", "delivered"):
        assert scheduler.deliver_turn("t1", "worker", turn, outcome).status == "unchanged"
    assert scheduler.store.head() == head


# ─── which tasks and roles a dirty pass takes ───────────────────────────────────────


def test_yui_leaders_role_key_selects_its_due_wakeup(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleNextLeaderWakeDeadline`` signals ``role:<task>/leader`` when a
    wakeup's deadline comes: a dirty pass of that key alone dispatches the due wakeup
    and delivers the Leader Turn it starts, and leaves the task's other roles alone."""
    scheduler.submit("job", id="t1")
    scheduler.start_turn("t1", "worker")
    scheduler.request_wakeup("t1", "mail")
    clock.advance(AGGREGATION)
    runtime = Answers("delivered")
    report = scheduler.controller_pass([role_key("t1", LEADER)], runtime=runtime)
    assert report.tasks == ["t1"] and report.wakeups == {"t1": "dispatched"}
    assert runtime.tried == [("leader.1", 0)]
    worker = scheduler.active_turn("t1", "worker")
    assert worker is not None and worker.delivery_outcome is None


def test_yui_role_key_pass_works_only_the_roles_it_names(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``partitionDirtyScope`` / ``selectedRuntimeLifecycleTargets``: role keys give
    a task's pass only those roles; a task key all of them."""
    scheduler.submit("job", id="t1")
    for role in ("a", "b", "c"):
        scheduler.start_turn("t1", role)
    runtime = Answers("delivered")
    scheduler.controller_pass([role_key("t1", "a"), role_key("t1", "c")], runtime=runtime)
    assert sorted(turn for turn, _ in runtime.tried) == ["a.1", "c.1"]
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert sorted(turn for turn, _ in runtime.tried) == ["a.1", "b.1", "c.1"]


def test_yui_task_key_asked_among_role_keys_is_the_retry_identity(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``partitionDirtyScope``: a task key replaces that task's role keys asked
    before it and swallows those after, so the per-task pass that fails is retried with
    the task key alone (``#scheduleTaskPassRetry``'s identity)."""
    scheduler.submit("job", id="t1")
    scheduler.start_turn("t1", "a")
    keys = [role_key("t1", "a"), task_key("t1"), role_key("t1", "b")]
    report = scheduler.controller_pass(keys, runtime=Failing("t1"))
    assert report.outcomes == {"t1": "failed"}
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and retry.keys == (task_key("t1"),)


# ─── what marks a task dirty, with a Worker ─────────────────────────────────────────


def test_yui_worker_runs_the_dirty_pass_a_host_asked_for_at_its_next_tick(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``#requestPass`` pumps a pass as soon as keys are marked dirty (coalesced):
    a Worker runs the dirty pass a host requested at its next tick, with those keys,
    though no Turn work was due, and says so in its next deadline."""
    scheduler.submit("crew", id="t1", phase="lead")  # no phases here to run
    scheduler.submit("crew", id="t2", phase="lead")
    for task_id in ("t1", "t2"):
        busy_leader(scheduler, task_id)
    runtime = Answers("delivered")
    worker = Worker(scheduler, runtime=runtime)
    worker.tick()
    due = scheduler.next_turn_deadline()
    assert due is not None and due > clock.now  # nothing due: no pass
    assert of_type(scheduler, PassStarted) == []
    scheduler.request_pass([task_key("t2")])
    scheduler.request_pass([role_key("t2", LEADER), task_key("t1")])
    assert worker.next_deadline() == clock.now
    assert worker.tick().passed == 2
    (started,) = of_type(scheduler, PassStarted)
    assert (started.scope, started.keys, started.task_ids) == (
        "dirty",
        (task_key("t2"), role_key("t2", LEADER), task_key("t1")),
        ("t2", "t1"),
    )
    assert not scheduler.pass_queue
    next_due = worker.next_deadline()
    assert next_due is not None and next_due > clock.now


def test_yui_idle_worker_wakes_when_a_pass_is_requested(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``#requestPass`` runs the pass it was asked for without waiting for a timer:
    an idle Worker (its next deadline far off) stops waiting once a host requests a
    pass, and its next tick runs it."""
    scheduler.submit("crew", id="t1", phase="lead")
    busy_leader(scheduler, "t1")
    worker = Worker(scheduler, runtime=Answers("delivered"), poll_ms=5)
    running = threading.Thread(target=worker.run)
    running.start()
    try:
        while worker.ticks < 1 and running.is_alive():
            time.sleep(0.005)
        scheduler.request_pass([task_key("t1")])
        given_up = time.monotonic() + WAIT
        while worker.ticks < 2 and running.is_alive() and time.monotonic() < given_up:
            time.sleep(0.005)
        assert worker.ticks >= 2, "the idle worker went on waiting after a pass was requested"
    finally:
        worker.stop()
        running.join(WAIT)
    (started,) = of_type(scheduler, PassStarted)
    assert started.keys == (task_key("t1"),)


def test_yui_worker_leaves_a_pass_requested_during_another_pump_to_that_pump(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """passes.one_pump: a pass requested while another pump runs (a host's own pump
    thread) is that pump's to run once its pass is done; the Worker's pump returns at
    once meanwhile. A Worker that took the queued request for work due now would tick
    without pause (its idle wait returning at once) for as long as that pass lasts."""
    scheduler.submit("crew", id="t1", phase="lead")
    busy_leader(scheduler, "t1")
    worker = Worker(scheduler, runtime=Answers("delivered"), poll_ms=5)
    worker.tick()
    queue = scheduler.pass_queue
    assert queue.start_pumping()  # a host's pump is running a pass
    scheduler.request_pass([task_key("t1")])
    assert worker.tick().passed == 0 and queue  # its pump left the request to that one
    due = worker.next_deadline()
    assert due is not None and due > clock.now  # nothing for this Worker to do now
    assert queue.stop_pumping()  # that pump ended without running it (it was closing)
    assert worker.next_deadline() == clock.now  # now the Worker's to run
    assert worker.tick().passed == 1 and not queue
