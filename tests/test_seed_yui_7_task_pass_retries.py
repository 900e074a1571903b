"""yui's controller passes, seventh round (seed 000, yui 0.6.4 -> 0.6.6,
``FileTaskController``): task-pass retries with capped exponential backoff
(``#scheduleTaskPassRetry``, ``#clearTaskPassRetry``), and the retries of blocked tasks
(``runtimeTaskFailureIds``, ``blockedTaskIds``). Each test names the seed behaviour and
fails when it breaks; docs/seed-fidelity.md, "Round seven (yui passes: concurrency,
backoff, blocked tasks)", says what changed."""

from __future__ import annotations

from typing import Any

from helpers.probes import of_type
from helpers.seed_yui_7 import Scripted, with_turns

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import (
    PassFinished,
    PassTaskBlocked,
    PassTaskFailed,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
    TaskPassRetryScheduled,
)
from tasktrail.domain.turns.runtime import Runtime


def fire(scheduler: Scheduler, clock: ManualClock, task_id: str, runtime: Runtime) -> Any:
    """Let the task's armed retry come due and run the operator lane that fires it."""
    retry = scheduler.task_pass_retry(task_id)
    assert retry is not None
    clock.set(retry.retry_at)
    report = scheduler.controller_pass(["operator"], runtime=runtime)
    assert report.retried == [task_id]
    return report


# ─── task-pass retries: the exact backoff, and when its count starts again ────────


def test_yui_task_pass_retry_delays_double_from_the_base_and_stop_at_two_seconds(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``#scheduleTaskPassRetry``): the n-th retry of a failure waits
    # ``min(2000, base * 2 ** min(n, 3))`` ms, no jitter, up to the retry limit; the
    # failure after the last retry arms none.
    scheduler.configure_turns(task_pass_retry_base_ms=300, task_pass_retry_limit=6)
    with_turns(scheduler, "t1")
    runtime = Scripted()
    runtime.refusing.add(("t1", "worker"))
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    for _ in range(6):
        fire(scheduler, clock, "t1", runtime)
    scheduled = of_type(scheduler, TaskPassRetryScheduled)
    assert [(r.attempt, r.retry_at - r.at) for r in scheduled] == [
        (0, 300),
        (1, 600),
        (2, 1200),
        (3, 2000),  # 300 * 2**3 = 2400: capped
        (4, 2000),
        (5, 2000),
    ]
    (abandoned,) = of_type(scheduler, TaskPassRetryAbandoned)
    assert abandoned.attempts == 6 and scheduler.task_pass_retry("t1") is None
    assert len(of_type(scheduler, PassTaskFailed)) == 7


def test_yui_failure_of_other_keys_replaces_the_armed_retry_at_attempt_zero(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui: a retry's identity is its sorted keys; a failure of another identity clears
    # the task's retry (its armed timer and its count) and arms a new one from attempt
    # 0, even while the old one has not fired.
    with_turns(scheduler, "t1")
    runtime = Scripted()
    runtime.refusing.add(("t1", "worker"))
    scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)
    fire(scheduler, clock, "t1", runtime)
    armed = scheduler.task_pass_retry("t1")
    assert armed is not None and (armed.attempt, armed.retry_at) == (1, clock.now + 500)
    clock.advance(100)
    report = scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert report.retries == {"t1": clock.now + 250}
    replaced = scheduler.task_pass_retry("t1")
    assert replaced is not None
    assert (replaced.keys, replaced.attempt) == ((task_key("t1"),), 0)


def test_yui_success_of_any_keys_clears_the_retry_and_its_count(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``#runDirtySchedulerPass``): a per-task pass of the task that succeeds clears
    # its retry and attempts (``#clearTaskPassRetry(taskId)``), whatever keys it ran
    # for; the next failure starts from attempt 0.
    with_turns(scheduler, "t1", roles=("worker", "helper"))
    runtime = Scripted()
    runtime.refusing.add(("t1", "worker"))
    scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)
    fire(scheduler, clock, "t1", runtime)
    assert scheduler.task_pass_retry("t1") is not None
    helper = scheduler.controller_pass([role_key("t1", "helper")], runtime=runtime)
    assert helper.done == ["t1"] and scheduler.task_pass_retry("t1") is None
    assert of_type(scheduler, TaskPassRetryCleared)[-1].why == "succeeded"
    again = scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)
    assert again.retries == {"t1": clock.now + 250}
    assert [r.attempt for r in of_type(scheduler, TaskPassRetryScheduled)] == [0, 1, 0]


def test_yui_failure_in_a_full_pass_while_another_full_pass_is_requested_arms_no_retry(
    scheduler: Scheduler,
) -> None:
    # yui (``#scheduleTaskPassRetry`` returns while ``#pendingFull``, whatever pass
    # failed): a task blocked in a full pass during which another full pass was
    # requested gets no retry; that full pass does its work, and arms its retry from
    # attempt 0 if it is blocked again.
    with_turns(scheduler, "t1", "t2")

    def ask_again(task_id: str, visit: int) -> None:
        if (task_id, visit) == ("t1", 1):
            scheduler.request_pass("full")

    runtime = Scripted(on_drain=ask_again)
    runtime.unreadable.add("t1")
    scheduler.request_pass("full")
    first, second = scheduler.pump(runtime=runtime)
    assert (first.blocked, first.done, first.retries) == (["t1"], ["t2"], {"t1": None})
    assert (second.blocked, second.retried) == (["t1"], [])
    assert [r.attempt for r in of_type(scheduler, TaskPassRetryScheduled)] == [0]
    assert len(of_type(scheduler, PassTaskBlocked)) == 2


# ─── blocked tasks ─────────────────────────────────────────────────────────────────


def test_yui_blocked_task_is_blocked_for_that_pass_only(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``#runCoalesced``): ``runtimeFailedTaskIds`` is gathered afresh for each
    # pass; a task blocked in one pass is worked by the next pass that covers it once
    # its events apply, before its retry fired, and that success clears the retry. A
    # pass that does not cover it leaves its retry alone.
    with_turns(scheduler, "t1", "t2")
    runtime = Scripted()
    runtime.unreadable.add("t1")
    blocked = scheduler.controller_pass([task_key("t1"), task_key("t2")], runtime=runtime)
    assert (blocked.blocked, blocked.done) == (["t1"], ["t2"])
    armed = scheduler.task_pass_retry("t1")
    assert armed is not None
    runtime.unreadable.clear()
    clock.advance(100)
    scheduler.controller_pass([task_key("t2")], runtime=runtime)
    assert scheduler.task_pass_retry("t1") == armed
    worked = scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert worked.done == ["t1"] and ("t1", "worker") in runtime.delivered
    assert scheduler.task_pass_retry("t1") is None
    assert clock.now < armed.retry_at


def test_yui_task_blocked_in_every_pass_is_retried_with_the_backoff_then_given_up(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui: each pass a task's events fail in blocks it again and reports it; its retry
    # (task key) is one identity, so a block while it is armed uses no attempt, each
    # retry that fired and was blocked again is the next attempt (250, 500 ms), and the
    # limit ends it. The other task is worked in every pass.
    with_turns(scheduler, "t1", "t2")
    runtime = Scripted()
    runtime.unreadable.add("t1")
    both = [task_key("t1"), task_key("t2"), "operator"]
    first = scheduler.controller_pass(both, runtime=runtime)
    assert first.retries == {"t1": clock.now + 250}
    clock.advance(100)
    armed = scheduler.controller_pass(both, runtime=runtime)
    assert (armed.blocked, armed.done, armed.retries) == (["t1"], ["t2"], {"t1": clock.now + 150})
    clock.advance(150)
    assert scheduler.controller_pass(both, runtime=runtime).retries == {"t1": clock.now + 500}
    clock.advance(500)
    last = scheduler.controller_pass(both, runtime=runtime)
    assert (last.blocked, last.done, last.retries) == (["t1"], ["t2"], {"t1": None})
    assert [r.attempt for r in of_type(scheduler, TaskPassRetryScheduled)] == [0, 1]
    assert [f.blocked for f in of_type(scheduler, PassFinished)] == [("t1",)] * 4


def test_yui_blocked_task_retry_fired_and_failing_is_the_same_retry(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui: the blocked task's retry has its task key as identity, so when the retry
    # fires, its events apply and the task's per-task pass then fails, that failure is
    # the retry's next attempt (500 ms), not a new failure.
    with_turns(scheduler, "t1")
    runtime = Scripted()
    runtime.unreadable.add("t1")
    scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)
    runtime.unreadable.clear()
    runtime.refusing.add(("t1", "worker"))
    fired = fire(scheduler, clock, "t1", runtime)
    assert fired.failed == ["t1"] and fired.retries == {"t1": clock.now + 500}
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and (retry.keys, retry.attempt) == ((task_key("t1"),), 1)
