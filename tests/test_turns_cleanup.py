"""Turns (SPEC.md section 2): runtime-cleanup obligations of a completed task's roles
(cleanup.completed_task), settled by an event."""

from __future__ import annotations

import pytest
from helpers.turns import finished_task, running_task

from tasktrail.domain import Scheduler
from tasktrail.domain.turns.refusals import TurnRuleViolation
from tasktrail.domain.turns.runtime import Runtime

# ─── cleanup.completed_task ─────────────────────────────────────────────────


class Cleaner(Runtime):
    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.fail = fail
        self.cleaned: list[tuple[str, str]] = []

    def cleanup(self, task_id: str, role: str) -> bool:
        if role in self.fail:
            raise RuntimeError(f"{role} runtime will not stop")
        self.cleaned.append((task_id, role))
        return True


def test_completed_task_roles_get_a_cleanup_obligation_settled_by_an_event(
    scheduler: Scheduler,
) -> None:
    task = running_task(scheduler)
    for role in ("leader", "worker"):
        scheduler.complete_turn(task, role, scheduler.start_turn(task, role))
    other = running_task(scheduler, "t2")
    scheduler.start_turn(other, "leader")  # not completed: no obligation
    finished_task(scheduler, task)
    scheduler.controller_pass()
    obligations = scheduler.cleanup_obligations(task)
    assert obligations is not None and obligations.open_roles() == ["leader", "worker"]
    assert scheduler.cleanup_obligations(other) is None
    # Settled by an event, on a stream that outlives the terminal task.
    assert scheduler.settle_cleanup(task, "leader") == "settled"
    runtime = Cleaner(fail=frozenset({"worker"}))
    scheduler.controller_pass(runtime=runtime)
    obligations = scheduler.cleanup_obligations(task)
    assert obligations is not None and obligations.open_roles() == ["worker"]
    assert obligations.obligations["worker"].failures == 1
    scheduler.controller_pass(runtime=Cleaner())
    assert scheduler.cleanup_obligations(task).open_roles() == []  # type: ignore[union-attr]
    head = scheduler.store.head()
    with pytest.raises(TurnRuleViolation) as refused:
        scheduler.settle_cleanup(task, "worker")
    assert refused.value.rule == "cleanup.no_obligation"
    assert scheduler.store.head() == head


def test_cleanup_of_a_completing_task_waits_for_the_active_turn(scheduler: Scheduler) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.reserve(task)
    scheduler.submit("leaf", id="child", owner=task)
    scheduler.finish(task, "completed")  # completing: its Turns can still end
    scheduler.controller_pass()
    assert scheduler.cleanup_obligations(task) is None
    scheduler.complete_turn(task, "worker", turn)
    scheduler.controller_pass()
    assert scheduler.cleanup_obligations(task).open_roles() == ["worker"]  # type: ignore[union-attr]
