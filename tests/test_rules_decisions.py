"""Rules 1 to 4 of SPEC.md section 1: when a command may decide at all.

One test per numbered rule; each fails if its rule is broken. Only a running task
decides (rule 1), a closing scheduler decides nothing (rule 2), an abort mark ends the
run invocation at its next decision (rule 3), and terminal is absorbing (rule 4).
The other rules of section 1 are in the other ``test_rules_*.py`` modules.
"""

from __future__ import annotations

import pytest
from conftest import finishing
from helpers.probes import refused, running

from tasktrail.domain import ManualClock, Registry, RuleViolation, Scheduler, TaskDefinition

# 1 ──────────────────────────────────────────────────────────────────────────


def test_rule_01_decision_on_non_running_task_writes_nothing(scheduler: Scheduler) -> None:
    waiting = running(scheduler)
    other = scheduler.submit("leaf")
    scheduler.wait(waiting, [other])
    error = refused(scheduler, 1, scheduler.checkpoint, waiting, "end")
    assert "waiting" in str(error) and waiting in str(error)

    sleeper = running(scheduler)
    scheduler.sleep(sleeper, until=scheduler.now() + 1000)
    refused(scheduler, 1, scheduler.finish, sleeper, "completed")

    done = running(scheduler)
    scheduler.finish(done, "completed")
    refused(scheduler, 1, scheduler.memo, done, "k", 1)

    pending = scheduler.submit("job")
    refused(scheduler, 1, scheduler.checkpoint, pending, "end")


def test_rule_01_completing_task_takes_no_decision(scheduler: Scheduler) -> None:
    owner = running(scheduler)
    scheduler.submit("leaf", owner=owner)
    scheduler.finish(owner, "completed")
    assert scheduler.task(owner).status == "completing"
    refused(scheduler, 1, scheduler.checkpoint, owner, "end")


def _submitted_under(scheduler: Scheduler, owner: str) -> list[str]:
    """The tasks the log records as submitted with ``owner`` as their owner."""
    return [
        r.event.task_id
        for r in scheduler.store.read()
        if type(r.event).__name__ == "TaskSubmitted" and r.event.owner_id == owner  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("ending", ["sleep", "wait", "finish", "finish_holding"])
def test_rule_01_owned_submit_after_the_invocation_ended_is_refused(
    store_url: str, clock: ManualClock, registry: Registry, ending: str
) -> None:
    """A phase that put its task to sleep, made it wait, or finished it (terminal, or
    holding its outcome for a child) has ended its invocation: a child it submits
    after that is refused under rule 1 and appends nothing."""
    seen: dict[str, object] = {}

    def phase(invocation) -> None:
        if ending == "sleep":
            invocation.sleep(invocation.now() + 60_000)
        elif ending == "wait":
            invocation.wait([seen["other"]])
        else:
            if ending == "finish_holding":
                seen["first"] = invocation.submit("leaf")
            invocation.finish("completed")
        store = invocation.scheduler.store
        seen["head"] = store.head()
        try:
            seen["late"] = invocation.submit("leaf")
        except RuleViolation as refusal:
            seen["refusal"], seen["head_after"] = refusal, store.head()
            raise

    registry.register(TaskDefinition("ender", 1, {"start": phase}))
    scheduler = Scheduler.open(store_url, clock=clock, worker="w", registry=registry)
    try:
        seen["other"] = scheduler.submit("leaf", phase="go")
        task_id = scheduler.submit("ender")
        scheduler.run_pass()
        refusal = seen.get("refusal")
        assert isinstance(refusal, RuleViolation) and "late" not in seen, seen
        assert refusal.rule == 1 and refusal.task_id == task_id
        assert seen["head_after"] == seen["head"], "a refused submit appended events"
        expected = [seen["first"]] if ending == "finish_holding" else []
        assert _submitted_under(scheduler, task_id) == expected
    finally:
        scheduler.close()


# 2 ──────────────────────────────────────────────────────────────────────────


def test_rule_02_closing_scheduler_ends_every_decision(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    decisions: list[str] = []

    def closing_phase(invocation) -> None:
        invocation.scheduler.closing = True  # what close() sets before it stops tasks
        try:
            invocation.checkpoint("end")
        except RuleViolation as error:
            decisions.append(f"rule {error.rule}")
            raise

    registry.register(TaskDefinition("closer", 1, {"start": closing_phase, "end": finishing()}))
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    task_id = scheduler.submit("closer")
    before = scheduler.store.head()
    scheduler.run_pass()
    assert decisions == ["rule 2"]
    assert scheduler.store.head() == before + 1  # the reservation only
    assert scheduler.task(task_id).checkpoint.phase == "start"
    refused(scheduler, 2, scheduler.submit, "job")
    refused(scheduler, 2, scheduler.abort, task_id)
    scheduler.closing = False
    scheduler.close()
    with pytest.raises(RuleViolation) as caught:
        scheduler.submit("job")
    assert caught.value.rule == 2


# 3 ──────────────────────────────────────────────────────────────────────────


def test_rule_03_abort_mark_ends_run_invocation_at_next_decision(scheduler: Scheduler) -> None:
    task_id = running(scheduler)
    scheduler.abort(task_id)
    refused(scheduler, 3, scheduler.checkpoint, task_id, "end")
    refused(scheduler, 3, scheduler.finish, task_id, "completed")
    # The run invocation has ended: the abort invocation may now be reserved.
    assert scheduler.reserve(task_id) == "abort"
    scheduler.finish(task_id, "aborted")
    assert scheduler.task(task_id).outcome.status == "aborted"


def test_rule_03_abort_invocation_waits_for_owned_live_work(scheduler: Scheduler) -> None:
    owner = scheduler.submit("job")
    child = running(scheduler, "leaf", owner=owner)
    scheduler.abort(owner)
    refused(scheduler, 3, scheduler.reserve, owner)
    assert scheduler.task(child).abort_requested
    # The child's run invocation ends at its next decision; its abort handler ends it.
    refused(scheduler, 3, scheduler.checkpoint, child, "go")
    assert scheduler.reserve(child) == "abort"
    scheduler.finish(child, "aborted")
    assert scheduler.reserve(owner) == "abort"


def test_rule_03_owned_submit_after_an_abort_mark_arrived_is_refused(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Another writer abort-marks a task while its phase runs: the run invocation has
    ended, so the child the phase submits next is refused under rule 3, appends
    nothing, and the abort handler runs next."""
    seen: dict[str, object] = {}
    operator = Scheduler.open(store_url, clock=clock, worker="operator")

    def phase(invocation) -> None:
        assert operator.abort(invocation.task_id, actor="ops", reason="stop it")
        seen["head"] = operator.store.head()
        try:
            seen["late"] = invocation.submit("leaf")
        except RuleViolation as refusal:
            seen["refusal"], seen["head_after"] = refusal, operator.store.head()
            raise

    def aborted(invocation) -> None:
        invocation.finish("aborted")

    registry.register(TaskDefinition("marked", 1, {"start": phase}, abort=aborted))
    scheduler = Scheduler.open(store_url, clock=clock, worker="w", registry=registry)
    try:
        task_id = scheduler.submit("marked")
        scheduler.run_pass()
        refusal = seen.get("refusal")
        assert isinstance(refusal, RuleViolation) and "late" not in seen, seen
        assert refusal.rule == 3 and refusal.task_id == task_id
        assert seen["head_after"] == seen["head"], "a refused submit appended events"
        assert _submitted_under(scheduler, task_id) == []
        scheduler.run_pass()  # the invocation ended: the abort handler runs next
        assert scheduler.task(task_id).outcome.status == "aborted"  # type: ignore[union-attr]
    finally:
        scheduler.close()
        operator.close()


# 4 ──────────────────────────────────────────────────────────────────────────


def test_rule_04_terminal_is_absorbing(scheduler: Scheduler) -> None:
    task_id = running(scheduler)
    scheduler.finish(task_id, "completed")
    before = scheduler.store.head()
    assert scheduler.abort(task_id) is False  # a no-op, not an error
    assert scheduler.store.head() == before
    assert scheduler.task(task_id).abort_requested is False
    refused(scheduler, 4, scheduler.reserve, task_id)
    refused(scheduler, 4, scheduler.submit, "leaf", owner=task_id)
    assert scheduler.retry(task_id) is False
    assert scheduler.store.head() == before
