"""yui's Turns, seventh round (seed 001, yui 0.13.9 -> 0.14.0; seed 000 for the delivery
retry constants): the Leader wake windows' arithmetic (aggregation end, force end,
re-signals of a busy wake). Each test names the seed function it follows and fails when
the behaviour breaks. docs/seed-fidelity.md, "Round seven (Turns: delivery outcomes,
retries, force windows)", says what changed."""

from __future__ import annotations

from helpers.probes import busy_leader, of_type
from helpers.seed_turns_7 import AGGREGATION, FORCE

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import TurnStarted, WakeupDispatched, WakeupFoundBusy
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.state import LEADER


class Steering(Runtime):
    """Notes each forced wakeup's hand-off: (busy Turn, reasons)."""

    def __init__(self) -> None:
        self.steered: list[tuple[str, tuple[str, ...]]] = []

    def steer(self, task_id: str, turn_id: str, reasons: tuple[str, ...]) -> None:
        self.steered.append((turn_id, reasons))


# ─── Leader wake windows ────────────────────────────────────────────────────────


def test_yui_idle_leader_wakeup_is_due_exactly_at_its_aggregation_end(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleNextLeaderWakeDeadline``: the deadline is ``firstRequestedAt +
    LEADER_WAKE_AGGREGATION_MS`` while it is ahead (``aggregationAt > now``); a request
    that joins a millisecond before does not move it, and at the end one Turn starts
    with every reason."""
    task = scheduler.submit("job", id="t1")
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.set(first_at + AGGREGATION - 1)
    assert scheduler.request_wakeup(task, "b") == "aggregated"
    assert scheduler.next_turn_deadline() == first_at + AGGREGATION
    before = scheduler.pending_wakeup(task)
    assert scheduler.controller_pass().wakeups == {task: "aggregating"}
    assert scheduler.pending_wakeup(task) == before
    assert of_type(scheduler, WakeupDispatched) == [] and of_type(scheduler, TurnStarted) == []
    clock.set(first_at + AGGREGATION)
    assert scheduler.controller_pass().wakeups == {task: "dispatched"}
    (started,) = of_type(scheduler, TurnStarted)
    assert (started.turn_id, started.reasons) == ("leader.1", ("a", "b"))


def test_yui_wakeup_past_its_force_end_with_an_idle_leader_starts_a_turn(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleNextLeaderWakeDeadline`` arms the force end only while
    ``getActiveTurn(task, "leader") !== null``: the force window bounds a busy Leader.
    A wakeup first handled past its force end, with the Leader idle, starts a Turn;
    nothing is steered."""

    task = scheduler.submit("job", id="t1")
    scheduler.request_wakeup(task, "a")
    clock.advance(FORCE + 1)
    runtime = Steering()
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "dispatched"}
    assert runtime.steered == []
    (dispatched,) = of_type(scheduler, WakeupDispatched)
    assert (dispatched.mode, dispatched.turn_id) == ("started", "leader.1")


def test_yui_force_end_counts_from_the_first_request_not_from_when_the_leader_got_busy(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleNextLeaderWakeDeadline``: ``forceAt = firstRequestedAt +
    LEADER_WAKE_FORCE_MS``. A Leader that became busy during the aggregation window
    gets the reasons steered at that time, not a force window after it got busy."""

    task = scheduler.submit("job", id="t1")
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.advance(AGGREGATION / 2)
    busy = busy_leader(scheduler, task)
    clock.set(first_at + AGGREGATION)
    runtime = Steering()
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "busy"}
    clock.set(first_at + FORCE - 1)
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "busy"}
    assert scheduler.next_turn_deadline() == first_at + FORCE
    clock.set(first_at + FORCE)
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "steered"}
    assert runtime.steered == [(busy, ("a",))]


def test_yui_request_joining_a_found_busy_wakeup_keeps_its_resignal(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries``: a busy wake is on the delivery retry timer of
    the Leader's key, with the busy Turn as its identity; a request that joins the
    wakeup does not touch that timer: the re-signal keeps its attempt and its time."""
    task = scheduler.submit("job", id="t1")
    busy = busy_leader(scheduler, task)
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.set(first_at + AGGREGATION)
    scheduler.controller_pass()
    clock.advance(100)
    assert scheduler.request_wakeup(task, "b") == "aggregated"
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None
    assert (wakeup.busy_attempts, wakeup.resignal_at) == (1, first_at + AGGREGATION + 250)
    assert scheduler.next_turn_deadline() == first_at + AGGREGATION + 250
    clock.set(first_at + AGGREGATION + 250)
    assert scheduler.controller_pass().wakeups == {task: "busy"}
    found = of_type(scheduler, WakeupFoundBusy)
    assert [(f.turn_id, f.attempt) for f in found] == [(busy, 0), (busy, 1)]


def test_yui_busy_leader_that_ends_makes_its_wakeup_due_at_once(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries``: the end of the busy Turn settles the Leader's
    key and the wakeup is processed by the pass that sees it, not at the next
    re-signal (here 2 s away)."""
    scheduler.configure_turns(delivery_retry_limit=10)
    task = scheduler.submit("job", id="t1")
    busy = busy_leader(scheduler, task)
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.set(first_at + AGGREGATION)
    for _ in range(4):
        scheduler.controller_pass()
        due = scheduler.next_turn_deadline()
        assert due is not None
        clock.set(due)
    scheduler.controller_pass()
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None and wakeup.resignal_at == clock.now + 2000
    clock.advance(10)
    scheduler.complete_turn(task, LEADER, busy)
    assert scheduler.next_turn_deadline() == first_at + AGGREGATION  # in the past: due now
    assert scheduler.controller_pass().wakeups == {task: "dispatched"}
