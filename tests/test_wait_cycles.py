"""Rule 7's wait-for graph: a holder waits for its owned work, an abort mark ends a wait.

SPEC.md rule 7 refuses a wait that would close a cycle in the wait-for graph. A task
holding its outcome (``completing``, rule 5) cannot end before its live owned tasks,
so it waits for them; a waiter with an abort mark no longer waits (rules 3 and 8).
``verify``'s invariant reads that graph as it stands; the scheduler's check also
counts a task that may hold later (any live task, for its live owned tasks).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import examples
from helpers.probes import running
from hypothesis import example, given, settings
from hypothesis import strategies as st

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
from tasktrail.replay.harness import Harness
from tasktrail.replay.strategies import Command


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


# ─── Round seven: a task that still runs may hold for its owned work later ──────
# pi-durable (seed 004, `#commitState`: a task finishing while `#hasOwnedLive` holds
# its outcome, whatever it is; `#waitingOn(record, true)`: an abort invocation waits
# for the live work below it; `#validateWait`: "It may not close a cycle in the
# wait-for graph"). Any live task may yet finish and hold for its live owned tasks,
# and a finish cannot be refused; so the wait check counts an edge from every live
# task to its live owned tasks, and refuses a wait a later finish would deadlock.


def test_rule_07_a_cycle_through_a_running_task_that_holds_later_is_refused(
    scheduler: Scheduler,
) -> None:
    """pi-durable, seed 004 (`#validateWait`, `#commitState`/`#hasOwnedLive`): D runs
    and owns E, E waits on A, A owns C. C's wait on D would be a deadlock once D and A
    finish ``completed`` (D holds for E, A for C), so it is refused when C waits."""
    d = running(scheduler)
    e = running(scheduler, owner=d)
    a = running(scheduler)
    c = running(scheduler, owner=a)
    scheduler.wait(e, [a])  # a -> c, and c waits on nothing yet
    error = refused_as_cycle(scheduler, c, [d])
    assert f"{c} -> {d} -> {e} (which {d} owns) -> {a} -> {c} (which {a} owns)" in str(error)
    assert scheduler.task(c).status == "running"
    # What the refused wait would have led to: both finish and hold, nothing is stuck.
    scheduler.finish(d, "completed")
    scheduler.finish(a, "completed")
    assert (scheduler.task(d).status, scheduler.task(a).status) == ("completing", "completing")
    scheduler.finish(c, "completed")
    assert scheduler.task(a).status == "terminal"
    assert scheduler.reserve(e) == "run"
    assert verify(scheduler.store).ok


def test_rule_07_a_wait_on_a_sibling_whose_subtree_does_not_lead_back_is_accepted(
    scheduler: Scheduler,
) -> None:
    """pi-durable, seed 004 (`#validateWait`): only a path back to the waiter closes a
    cycle. A sibling's owned work that waits elsewhere, or on the waiter's own owned
    work, leads nowhere back, so waiting on the sibling is accepted and ends."""
    owner = running(scheduler)
    waiter = running(scheduler, owner=owner)
    below_waiter = running(scheduler, owner=waiter)
    sibling = running(scheduler, owner=owner)
    below_sibling = running(scheduler, owner=sibling)
    other = running(scheduler)
    scheduler.wait(below_sibling, [other, below_waiter])
    scheduler.wait(waiter, [sibling])  # sibling -> below_sibling -> other, below_waiter
    assert scheduler.task(waiter).status == "waiting"
    for done in (other, below_waiter):
        scheduler.finish(done, "completed")
    scheduler.finish(sibling, "completed")  # holds for below_sibling, which wakes
    assert scheduler.reserve(below_sibling) == "run"
    scheduler.finish(below_sibling, "completed")
    assert scheduler.task(sibling).status == "terminal"
    assert scheduler.reserve(waiter) == "run"
    assert verify(scheduler.store).ok


def test_rule_07_a_wait_through_an_abort_marked_task_below_a_running_one_is_accepted(
    scheduler: Scheduler,
) -> None:
    """pi-durable, seed 004 (`wake`: a waiter is held back only without an abort mark;
    `#waitingOn(record, true)`): the first test's path with E abort-marked. E's mark
    ends its wait, so D holding for E waits for E's abort handler only: accepted."""
    d = running(scheduler)
    e = running(scheduler, owner=d)
    a = running(scheduler)
    c = running(scheduler, owner=a)
    scheduler.wait(e, [a])
    scheduler.abort(e)
    scheduler.wait(c, [d])  # d -> e, and e's wait is over
    assert scheduler.task(c).status == "waiting"
    scheduler.finish(d, "completed")
    scheduler.finish(a, "completed")
    assert scheduler.reserve(e) == "abort"
    scheduler.finish(e, "aborted")
    assert scheduler.task(d).status == "terminal"
    assert scheduler.reserve(c) == "run"
    assert verify(scheduler.store).ok


# A forest of running tasks (each owned by an earlier one or by none), then waits,
# reservations and `completed` finishes in any order; then every task is driven on.
# Slots wrap around the tasks; a wait names the tasks after its waiter (never itself).
_slot = st.integers(0, 4)
_forest = st.lists(st.none() | _slot, min_size=3, max_size=5)
_wait = st.tuples(
    st.just("wait"),
    _slot,
    st.lists(st.integers(0, 3), min_size=1, max_size=2),
    st.sampled_from(["all", "all", "failFast"]),  # failFast takes owned tasks only
)
_steps = st.lists(  # mostly waits: the drain below finishes every task anyway
    st.one_of(_wait, _wait, _wait, st.tuples(st.sampled_from(["finish", "reserve"]), _slot)),
    min_size=2,
    max_size=12,
)


def _command(step: tuple[Any, ...], tasks: int) -> Command:
    name, slot, *rest = step
    slot %= tasks
    if name == "wait":
        offsets, policy = rest
        return Command("wait", (slot, tuple((slot + 1 + o) % tasks for o in offsets), policy))
    return Command(name, (slot, "completed") if name == "finish" else (slot,))


def _no_wait_cycle(harness: Harness) -> None:
    cycles = [v for v in verify(harness.store).violations if v.check == "rule_07_waits"]
    assert not cycles, (harness.accepted, cycles)


@settings(max_examples=examples(15, 200))
@given(_forest, _steps)
# t0 owns t1; t1 waits on t2, t2 on t0 (running, so no edge yet): t0's finish would
# hold for t1 and close t0 -> t1 -> t2 -> t0.
@example([None, 0, None], [("wait", 1, [0], "all"), ("wait", 2, [0], "all")])
def test_rule_07_accepted_waits_and_completed_finishes_never_deadlock(
    owners: list[int | None], steps: list[tuple[Any, ...]]
) -> None:
    """pi-durable, seed 004 (`#validateWait`; `#commitState`: a finish with owned live
    work holds): whatever waits the check accepts, finishing ``completed`` never closes
    a cycle of waits and holds (``verify``'s ``rule_07_waits`` stays clean), so
    finishing what runs and running what woke ends every task."""
    with Harness.temporary() as harness:
        for slot, owner in enumerate(owners):
            owner_slot = None if owner is None or slot == 0 else owner % slot
            harness.apply(Command("submit", (owner_slot,)))
        for slot in range(len(owners)):
            harness.apply(Command("reserve", (slot,)))
        for step in steps:
            if harness.apply(_command(step, len(owners))):
                _no_wait_cycle(harness)
        moved = True
        while moved:  # every running task finishes; every woken waiter runs again
            moved = False
            for slot in range(len(owners)):
                moved |= harness.apply(Command("finish", (slot, "completed")))
                moved |= harness.apply(Command("reserve", (slot,)))
        _no_wait_cycle(harness)
        statuses = {t: harness.scheduler.task(t).status for t in harness.ids}
        assert set(statuses.values()) == {"terminal"}, (harness.accepted, statuses)
