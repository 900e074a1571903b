"""yui, ninth round (seeds 000 and 001: yui 0.6.4 -> 0.6.6, ``FileTaskController``, and
yui 0.13.9 -> 0.14.0, Turns): the retry backoff. Its cap and a success starting it over
(a Turn's delivery retry, a task-pass retry, a busy wake's re-signal, the Worker's stuck
pass), and task-pass retry exhaustion at a limit of one and exactly at the retry's
time. Each test names the seed behaviour it pins and fails when it breaks;
docs/seed-fidelity.md, "Round nine (yui)", says what changed."""

from __future__ import annotations

from typing import Any

from helpers.probes import Answers, of_type
from helpers.seed_yui_9 import AGGREGATION, Failing, _busy_wakeup, _found

from tasktrail.domain import ManualClock, Scheduler, Worker
from tasktrail.domain.turns.events import TurnDeliveryRetryScheduled
from tasktrail.domain.turns.keys import task_key
from tasktrail.domain.turns.pass_events import (
    PassTaskFailed,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
    TaskPassRetryScheduled,
)
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.state import LEADER

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
