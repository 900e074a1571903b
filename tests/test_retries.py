"""Retries of phases (the Service API issue, item 4; rules 23 and 25): a phase that
raises is tried again at its checkpoint after a recorded backoff, until its attempts
are used up; per-phase policies override the definition's; the default is unchanged;
a policy that cannot be kept is refused when made. Timeouts (rule 24) are
tests/test_retries_timeouts.py's."""

from __future__ import annotations

import random
from typing import Any

import pytest
from helpers.retries import finish, retries_of

from tasktrail.domain import (
    InvalidPolicy,
    ManualClock,
    Registry,
    Retry,
    Scheduler,
    TaskDefinition,
)
from tasktrail.projections.trace import phase_spans
from tasktrail.replay import explain, replay


def flaky(failures: int, then: str = "done") -> Any:
    """A phase that raises its first ``failures`` times (naming the try), then
    checkpoints ``then``."""
    tries: list[int] = []

    def phase(inv: Any) -> str:
        tries.append(1)
        if len(tries) <= failures:
            raise ConnectionError(f"model call failed (try {len(tries)})")
        return then

    return phase


def run_through_backoffs(s: Scheduler, clock: ManualClock, task_id: str) -> None:
    """Run passes, moving the clock to each recorded sleep's end, until the task ends."""
    for _ in range(20):
        s.run_until_idle()
        task = s.task(task_id)
        if not task.live:
            return
        assert task.status == "sleeping" and task.until is not None
        clock.set(task.until)
    raise AssertionError("the task never ended")


@pytest.mark.parametrize("jitter", [0.0, 0.2])
def test_recorded_delays_follow_the_backoff_and_replay_folds_them(
    store_url: str, clock: ManualClock, jitter: float
) -> None:
    policy = Retry(max_attempts=5, base_s=1.0, factor=2.0, max_s=3.0, jitter=jitter)
    registry = Registry(
        [TaskDefinition("call", 1, {"ask": flaky(4), "done": finish}, retry=policy)]
    )
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    s.retry_random.seed(7)
    task_id = s.submit("call")
    run_through_backoffs(s, clock, task_id)
    retried = retries_of(s, task_id)
    assert [e.attempt for e in retried] == [1, 2, 3, 4]
    for n, event in enumerate(retried):
        low, high = policy.bounds_s(n)
        assert low <= event.delay_s <= high
        assert event.until == event.at + event.delay_s * 1000  # what the fold sleeps to
        assert event.rule == 23 and event.cause == "threw" and event.phase == "ask"
        assert event.message == f"ConnectionError: model call failed (try {n + 1})"
    if jitter == 0.0:  # base * factor**n, capped by max_s
        assert [e.delay_s for e in retried] == [1.0, 2.0, 3.0, 3.0]
    else:
        assert len({e.delay_s for e in retried}) > 1  # drawn, not fixed
    assert s.task(task_id).outcome.status == "completed"  # type: ignore[union-attr]
    live = s.world.tasks[task_id]
    s.close()
    assert replay(store_url).world.tasks[task_id] == live


def test_the_scheduler_draws_the_jitter_from_its_own_seedable_random(
    store_url: str, clock: ManualClock
) -> None:
    policy = Retry(max_attempts=3, base_s=1.0, jitter=0.5)
    registry = Registry([TaskDefinition("call", 1, {"ask": flaky(9)}, retry=policy)])
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    s.retry_random = random.Random(42)
    tasks = [s.submit("call") for _ in range(3)]
    s.run_until_idle()
    draws = random.Random(42)
    expected = [policy.delay_s(0, draws.random()) for _ in tasks]
    assert [retries_of(s, task_id)[0].delay_s for task_id in tasks] == expected
    s.close()


def test_a_retried_phase_span_ends_with_its_error(sqlite_url: str, clock: ManualClock) -> None:
    registry = Registry(
        [TaskDefinition("call", 1, {"ask": flaky(1), "done": finish}, retry=Retry(base_s=1))]
    )
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    run_through_backoffs(s, clock, task_id)
    s.close()
    first, second, last = phase_spans(sqlite_url, task_id)
    assert (first.phase, first.outcome, first.error) == (
        "ask",
        "retrying",
        "ConnectionError: model call failed (try 1)",
    )
    assert first.attributes["error.type"] == "phase_retried"
    assert (second.phase, second.attributes["attempt"], second.error) == ("ask", 1, None)
    assert last.phase == "done"


def test_a_phase_that_succeeds_on_its_third_try_completes(
    store_url: str, clock: ManualClock
) -> None:
    policy = Retry(max_attempts=3, base_s=0.5)
    registry = Registry(
        [TaskDefinition("call", 1, {"ask": flaky(2), "done": finish}, retry=policy)]
    )
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    s.run_until_idle()
    assert s.task(task_id).status == "sleeping"  # the backoff frees the slot: a sleep
    assert s.task(task_id).checkpoint.attempt == 1  # type: ignore[union-attr]
    run_through_backoffs(s, clock, task_id)
    assert s.task(task_id).outcome.status == "completed"  # type: ignore[union-attr]
    assert len(retries_of(s, task_id)) == 2
    s.close()


def test_rule_23_used_up_attempts_end_the_task_failed_with_the_last_error(
    store_url: str, clock: ManualClock
) -> None:
    registry = Registry(
        [TaskDefinition("call", 1, {"ask": flaky(9)}, retry=Retry(max_attempts=3, base_s=1))]
    )
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    run_through_backoffs(s, clock, task_id)
    outcome = s.task(task_id).outcome
    assert outcome is not None and outcome.status == "failed"
    assert outcome.message == "ConnectionError: model call failed (try 3)"
    assert outcome.reason == "retries_exhausted"
    assert outcome.detail == {"attempts": 3, "cause": "threw"}
    assert len(retries_of(s, task_id)) == 2
    s.close()
    assert replay(store_url).world.tasks[task_id].outcome == outcome


def test_per_phase_policies_override_the_definitions(store_url: str, clock: ManualClock) -> None:
    registry = Registry(
        [
            TaskDefinition(
                "call",
                1,
                {"plan": flaky(1, then="ask"), "ask": flaky(1), "done": finish},
                retry=Retry(max_attempts=2, base_s=1),
                phase_retries={"plan": None},  # planning is not retried
            )
        ]
    )
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    s.run_until_idle()
    outcome = s.task(task_id).outcome
    assert outcome is not None and (outcome.status, outcome.reason) == ("faulted", "threw")
    assert retries_of(s, task_id) == []
    s.close()


def test_without_a_policy_a_raising_phase_faults_its_task_as_before(
    store_url: str, clock: ManualClock
) -> None:
    registry = Registry([TaskDefinition("call", 1, {"ask": flaky(1)})])
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    report = s.run_pass()
    assert report.faulted == {task_id: "threw"}
    outcome = s.task(task_id).outcome
    assert outcome is not None and outcome.status == "faulted"
    assert outcome.message == "ConnectionError: model call failed (try 1)"
    assert retries_of(s, task_id) == []
    s.close()


def test_an_abort_mark_beats_a_retry(store_url: str, clock: ManualClock) -> None:
    def marked_then_raises(inv: Any) -> None:
        inv.scheduler.abort(inv.task_id, actor="ops", reason="stop it")
        raise ConnectionError("model call failed")

    registry = Registry(
        [TaskDefinition("call", 1, {"ask": marked_then_raises}, retry=Retry(base_s=1))]
    )
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    s.run_until_idle()
    assert s.task(task_id).outcome.status == "aborted"  # type: ignore[union-attr]
    assert retries_of(s, task_id) == []
    s.close()


# ─── policies that cannot be kept (rule 25) ──────────────────────────────────


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"max_attempts": 0}, "max_attempts must be an int >= 1"),
        ({"max_attempts": 2.5}, "max_attempts must be an int >= 1"),
        ({"base_s": -1}, "base_s must be >= 0"),
        ({"base_s": float("nan")}, "base_s must be a finite number"),
        ({"factor": 0.5}, "factor must be >= 1"),
        ({"max_s": 0.5, "base_s": 1}, "max_s must be >= base_s"),
        ({"jitter": 1.5}, "jitter must be between 0 and 1"),
        ({"jitter": "0.2"}, "jitter must be a finite number"),
    ],
)
def test_rule_25_a_retry_policy_that_cannot_be_kept_is_refused(
    arguments: dict[str, Any], words: str
) -> None:
    with pytest.raises(InvalidPolicy, match=words) as refused:
        Retry(**arguments)
    assert refused.value.rule == 25 and isinstance(refused.value, ValueError)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"timeout_s": 0}, "timeout_s must be > 0"),
        ({"timeout_s": float("inf")}, "timeout_s must be a finite number"),
        ({"retry": 3}, "retry must be a Retry or None"),
        ({"phase_timeouts": {"nowhere": 1}}, "phase_timeouts names no phase 'nowhere'"),
        ({"phase_retries": {"ask": 3}}, r"phase_retries\['ask'\] must be a Retry"),
    ],
)
def test_a_definitions_policies_are_checked(options: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidPolicy, match=words) as refused:
        TaskDefinition("call", 1, {"ask": finish}, **options)
    assert refused.value.rule == 25


def test_explain_and_the_audit_name_the_retries_and_the_end(
    sqlite_url: str, clock: ManualClock
) -> None:
    registry = Registry(
        [TaskDefinition("call", 1, {"ask": flaky(9)}, retry=Retry(max_attempts=2, base_s=1))]
    )
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    run_through_backoffs(s, clock, task_id)
    s.close()
    steps = explain(sqlite_url, task_id)
    retried = next(step for step in steps if step.event_type == "PhaseRetried")
    assert (retried.command, retried.rule) == ("retry_phase", 23)
    assert (retried.status_before, retried.status_after) == ("running", "sleeping")
    assert "tried again after its backoff" in retried.why
    ended = steps[-1]
    assert (ended.event_type, ended.rule, ended.command) == ("TaskEnded", 23, "run_pass")
