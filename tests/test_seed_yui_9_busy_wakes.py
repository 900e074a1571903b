"""yui, ninth round (seed 001, yui 0.13.9 -> 0.14.0, Turns, with seed 000's limits): a
busy Leader's wake. Retry exhaustion counts (a busy wake is re-signalled as often as a
delivery is retried), a re-signal exactly at its time, one falling on the force end, and
the wakeups due at one aggregation end (the Leader wake deadlines 0.14.0 adds). Each
test names the seed behaviour it pins and fails when it breaks; docs/seed-fidelity.md,
"Round nine (yui)", says what changed."""

from __future__ import annotations

from helpers.probes import Answers, busy_leader, of_type
from helpers.seed_yui_9 import AGGREGATION, FORCE, _busy_wakeup, _found

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import TurnDeliveryRetryScheduled, WakeupDispatched
from tasktrail.domain.turns.keys import task_key


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


# ─── deadlines exactly at their time ────────────────────────────────────────────────


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
