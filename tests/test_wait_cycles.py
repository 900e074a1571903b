"""Rule 7's wait-for graph: a holder waits for its owned work, an abort mark ends a wait.

SPEC.md rule 7 refuses a wait that would close a cycle in the wait-for graph. A task
holding its outcome (``completing``, rule 5) cannot end before its live owned tasks,
so it waits for them; a waiter with an abort mark no longer waits (rules 3 and 8).
The scheduler's check and ``verify``'s invariant read the same graph.
"""

from __future__ import annotations

import pytest

from tasktrail.domain import RuleViolation, Scheduler
from tasktrail.domain.store.recorded import Recorded
from tasktrail.domain.tasks.events import (
    AbortMarked,
    OutcomeHeld,
    TaskEvent,
    TaskReserved,
    TaskSubmitted,
    WaitStarted,
)
from tasktrail.replay import fold, verify


def running(scheduler: Scheduler, kind: str = "job", **options: object) -> str:
    task_id = scheduler.submit(kind, **options)
    assert scheduler.reserve(task_id) == "run"
    return task_id


def refused_as_cycle(scheduler: Scheduler, waiter: str, on: list[str]) -> RuleViolation:
    before = scheduler.store.head()
    with pytest.raises(RuleViolation) as caught:
        scheduler.wait(waiter, on)
    assert caught.value.rule == 7 and "cycle" in str(caught.value), caught.value
    assert scheduler.store.head() == before, "a refused wait appended events"
    return caught.value


def holding_owner(scheduler: Scheduler) -> tuple[str, str]:
    """An owner that finished ``completed`` and holds for its running child."""
    owner = running(scheduler)
    child = running(scheduler, owner=owner)
    scheduler.finish(owner, "completed")
    assert scheduler.task(owner).status == "completing"
    return owner, child


def test_rule_07_child_waiting_on_its_holding_owner_is_refused(scheduler: Scheduler) -> None:
    owner, child = holding_owner(scheduler)
    error = refused_as_cycle(scheduler, child, [owner])
    assert f"{child} -> {owner} -> {child}" in str(error)
    assert scheduler.task(child).status == "running"


def test_rule_07_three_task_chain_through_a_holding_owner_is_refused(
    scheduler: Scheduler,
) -> None:
    a = running(scheduler)
    b, c = holding_owner(scheduler)  # b holds its outcome until its child c ends
    scheduler.wait(a, [b])
    error = refused_as_cycle(scheduler, c, [a])
    assert f"{c} -> {a} -> {b} -> {c}" in str(error)


def test_rule_07_wait_through_an_abort_marked_waiter_is_accepted(scheduler: Scheduler) -> None:
    a, b = running(scheduler), running(scheduler)
    scheduler.wait(a, [b])
    scheduler.abort(a)  # ends a's wait: it runs its abort path, not waiting for b
    assert scheduler.task(a).status == "waiting" and scheduler.task(a).abort_requested
    scheduler.wait(b, [a])
    assert scheduler.task(b).status == "waiting"
    assert scheduler.reserve(a) == "abort"
    scheduler.finish(a, "aborted")
    assert scheduler.reserve(b) == "run"  # a ended, so b's wait is over: no deadlock
    assert verify(scheduler.store).ok


def test_rule_07_wait_on_a_holding_owner_that_does_not_lead_back_is_accepted(
    scheduler: Scheduler,
) -> None:
    owner, child = holding_owner(scheduler)
    stranger = running(scheduler)
    scheduler.wait(stranger, [owner])  # owner -> child, and child waits on nothing
    assert scheduler.task(stranger).status == "waiting"
    other = running(scheduler)
    scheduler.wait(child, [other])  # child -> other, which waits on nothing
    assert scheduler.task(child).status == "waiting"
    assert verify(scheduler.store).ok


def _records(*events: TaskEvent) -> list[Recorded]:
    versions: dict[str, int] = {}
    out = []
    for position, event in enumerate(events, start=1):
        versions[event.task_id] = versions.get(event.task_id, 0) + 1
        out.append(Recorded(position, event, versions[event.task_id]))
    return out


def test_rule_07_verify_reports_a_child_waiting_on_its_holding_owner() -> None:
    # A log written before the check counted a holder's owned work.
    records = _records(
        TaskSubmitted(task_id="o", at=0, kind="job", version=1, phase="start"),
        TaskReserved(task_id="o", at=1, mode="run"),
        TaskSubmitted(task_id="c", at=2, kind="job", version=1, phase="start", owner_id="o"),
        OutcomeHeld(task_id="o", at=3, status="completed"),
        TaskReserved(task_id="c", at=4, mode="run"),
        WaitStarted(task_id="c", at=5, on=("o",), policy="all", phase="start"),
    )
    report = verify(fold(records))
    found = [(v.check, v.message) for v in report.violations]
    assert ("rule_07_waits", "wait-for cycle: c -> o -> c") in found, found


def test_rule_07_verify_takes_a_cycle_through_an_abort_marked_waiter() -> None:
    records = _records(
        TaskSubmitted(task_id="a", at=0, kind="job", version=1, phase="start"),
        TaskSubmitted(task_id="b", at=0, kind="job", version=1, phase="start"),
        TaskReserved(task_id="a", at=1, mode="run"),
        TaskReserved(task_id="b", at=1, mode="run"),
        WaitStarted(task_id="a", at=2, on=("b",), policy="all", phase="start"),
        AbortMarked(task_id="a", at=3),
        WaitStarted(task_id="b", at=4, on=("a",), policy="all", phase="start"),
    )
    report = verify(fold(records))
    assert report.ok, report.violations


def test_rule_07_a_wait_on_the_waiters_own_owner_is_refused(scheduler: Scheduler) -> None:
    """An owner cannot end before its live child (rule 5): once it finishes
    ``completed`` it holds for the child, so a child waiting on it (directly, or on a
    task that waits on it) would never wake. Refused while the owner still runs, since
    the finish that closes the cycle cannot be refused."""
    owner = running(scheduler)
    child = running(scheduler, owner=owner)
    grandchild = running(scheduler, owner=child)
    error = refused_as_cycle(scheduler, child, [owner])
    assert f"{child} -> {owner} -> {child} (which {owner} owns)" in str(error)
    refused_as_cycle(scheduler, grandchild, [owner])  # an owner's owner holds too
    other = running(scheduler)
    scheduler.wait(other, [owner])  # a task that waits on the owner ...
    refused_as_cycle(scheduler, child, [other])  # ... leads back to the child's owner
    # The owner finishes; with no wait in the way, it holds and its child ends it.
    scheduler.finish(grandchild, "completed")
    scheduler.finish(child, "completed")
    scheduler.finish(owner, "completed")
    assert scheduler.task(owner).status == "terminal"


def test_rule_07_a_wait_on_an_unrelated_or_owned_task_is_still_accepted(
    scheduler: Scheduler,
) -> None:
    owner = running(scheduler)
    child = running(scheduler, owner=owner)
    sibling = running(scheduler, owner=owner)
    scheduler.wait(child, [sibling])  # a sibling is not an owner
    scheduler.wait(owner, [sibling])  # an owner may wait on what it owns
    assert scheduler.task(owner).status == "waiting"
