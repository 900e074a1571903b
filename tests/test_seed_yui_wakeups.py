"""yui's Leader wakeup dispatch where tasktrail once differed (issue 16; seed 001): a
forced wakeup is recorded only once handed off (defect 2), and a Leader wake fence
pauses wakeup dispatch, the Worker retrying the pass it could not resolve with the
delivery backoff. Each test names the behaviour and fails when it breaks. The rules they
hold are written down in docs/seed-fidelity.md."""

from __future__ import annotations

import pytest
from helpers.probes import of_type
from helpers.seed_yui import AGGREGATION, FORCE, Delivering

from tasktrail.domain import ManualClock, Scheduler, Worker
from tasktrail.domain.turns.events import WakeupDispatched, WakeupDropped
from tasktrail.domain.turns.pass_events import PassStarted
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.state import LEADER

# ─── defect 2: a forced wakeup is recorded only once handed off (seed 001) ─────────


class Steer(Runtime):
    """Steers forced wakeups into the busy Leader Turn; the first ``fails`` hand-offs
    raise. Notes whether the wakeup was still pending (nothing recorded) at each."""

    def __init__(self, scheduler: Scheduler, fails: int = 0, join: str | None = None) -> None:
        self.scheduler = scheduler
        self.fails = fails
        self.join = join
        self.steered: list[tuple[str, str, tuple[str, ...]]] = []
        self.pending_at_hand_off: list[bool] = []

    def steer(self, task_id: str, turn_id: str, reasons: tuple[str, ...]) -> None:
        self.pending_at_hand_off.append(self.scheduler.pending_wakeup(task_id) is not None)
        if self.join is not None:  # a request arrives while the hand-off is underway
            self.scheduler.request_wakeup(task_id, self.join)
            self.join = None
        if self.fails:
            self.fails -= 1
            raise ConnectionError("the Leader's socket went away")
        self.steered.append((task_id, turn_id, reasons))


def _busy_leader_past_force(scheduler: Scheduler, clock: ManualClock) -> tuple[str, str]:
    scheduler.configure_turns(stall_window_ms=FORCE * 4)
    task = scheduler.submit("job", id="t1")
    busy = scheduler.start_turn(task, LEADER)
    scheduler.deliver_turn(task, LEADER, busy, "delivered")
    scheduler.request_wakeup(task, "review-done")
    clock.advance(FORCE)
    return task, busy


def test_yui_forced_wakeup_whose_hand_off_fails_is_kept_and_retried(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task, busy = _busy_leader_past_force(scheduler, clock)
    runtime = Steer(scheduler, fails=1)
    first = scheduler.controller_pass(runtime=runtime)
    assert first.failed == [task]
    assert of_type(scheduler, WakeupDispatched) == []  # nothing claims the hand-off
    assert scheduler.pending_wakeup(task) is not None
    retry_at = first.retries[task]
    assert retry_at is not None
    clock.set(retry_at)
    second = scheduler.controller_pass(runtime=runtime)
    assert second.wakeups == {task: "steered"}
    assert runtime.steered == [(task, busy, ("review-done",))]
    assert runtime.pending_at_hand_off == [True, True]  # recorded only after each
    (dispatched,) = of_type(scheduler, WakeupDispatched)
    assert (dispatched.mode, dispatched.turn_id, dispatched.pass_id) == (
        "steered",
        busy,
        second.pass_id,
    )
    assert scheduler.pending_wakeup(task) is None


def test_yui_forced_wakeup_command_appends_nothing_when_the_hand_off_raises(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task, _ = _busy_leader_past_force(scheduler, clock)
    head = scheduler.store.head()
    with pytest.raises(ConnectionError):
        scheduler.dispatch_wakeup(task, runtime=Steer(scheduler, fails=1))
    assert scheduler.store.head() == head
    assert scheduler.dispatch_wakeup(task, runtime=Steer(scheduler)).status == "steered"


def test_yui_forced_wakeup_records_only_what_it_handed_off(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task, _ = _busy_leader_past_force(scheduler, clock)
    runtime = Steer(scheduler, join="late-news")
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "busy"}
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None and wakeup.reasons == ("review-done", "late-news")
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "steered"}
    assert [reasons for _, _, reasons in runtime.steered] == [
        ("review-done",),
        ("review-done", "late-news"),
    ]
    (dispatched,) = of_type(scheduler, WakeupDispatched)
    assert dispatched.reasons == ("review-done", "late-news")


# ─── a Leader wake fence pauses wakeup dispatch (seed 001) ─────────────────────────


class Fenced(Delivering):
    def __init__(self) -> None:
        super().__init__()
        self.fence = True

    def leader_wake_fenced(self) -> bool:
        return self.fence


def test_yui_leader_wake_fence_pauses_wakeup_dispatch(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    ended = scheduler.submit("leaf", id="ended")
    for task_id in (task, ended):
        scheduler.request_wakeup(task_id, "mail")
    scheduler.reserve(ended)
    scheduler.finish(ended, "completed")
    clock.advance(FORCE)
    runtime = Fenced()
    head = scheduler.store.head()
    report = scheduler.controller_pass(runtime=runtime)
    assert report.wakeups == {task: "fenced", ended: "fenced"}  # not even dropped
    assert of_type(scheduler, WakeupDispatched) == [] and of_type(scheduler, WakeupDropped) == []
    assert scheduler.active_turn(task, LEADER) is None
    assert set(scheduler.pending_wakeups()) == {task, ended}
    assert scheduler.store.head() > head  # the pass itself is recorded, nothing else
    runtime.fence = False
    assert scheduler.controller_pass(runtime=runtime).wakeups == {
        task: "dispatched",
        ended: "dropped",
    }


def test_yui_worker_retries_a_pass_it_could_not_resolve_with_the_delivery_backoff(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("crew", id="t1", phase="lead")  # no phases here to run
    scheduler.request_wakeup(task, "mail")
    clock.advance(AGGREGATION)
    runtime = Fenced()
    worker = Worker(scheduler, runtime=runtime)
    for _ in range(5):  # the fence holds the wakeup: not a pass at every tick
        worker.tick()
    assert len(of_type(scheduler, PassStarted)) == 1
    assert worker.next_deadline() == clock.now + 250
    clock.advance(250)
    worker.tick()
    assert len(of_type(scheduler, PassStarted)) == 2
    assert worker.next_deadline() == clock.now + 500  # backing off, as yui's timers do
    runtime.fence = False
    clock.advance(500)
    worker.tick()
    assert scheduler.active_turn(task, LEADER) is not None
