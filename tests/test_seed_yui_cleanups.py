"""yui's runtime cleanups where tasktrail once differed (issue 16; seeds 000 and 001):
stopping idle roles of a live task gives each a cleanup obligation (seed 001,
stopTaskRoleSessions), and a failed cleanup leaves its role out of the rest of the pass
and holds back a Leader's wakeups (seed 000). Each test names the behaviour and fails
when it breaks. The rules they hold are written down in docs/seed-fidelity.md."""

from __future__ import annotations

import pytest
from helpers.probes import of_type
from helpers.seed_yui import AGGREGATION, Delivering

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import RuntimeCleanupFailed, RuntimeCleanupRequired
from tasktrail.domain.turns.refusals import TurnRuleViolation
from tasktrail.domain.turns.state import LEADER

# ─── stopping idle roles of a live task (seed 001, stopTaskRoleSessions) ───────────


class Cleaning(Delivering):
    """Cleans up role runtimes; those of ``fails`` raise."""

    def __init__(self, *fails: str) -> None:
        super().__init__()
        self.fails = set(fails)
        self.cleaned: list[tuple[str, str]] = []

    def cleanup(self, task_id: str, role: str) -> bool:
        if role in self.fails:
            raise OSError(f"the {role} session would not stop")
        self.cleaned.append((task_id, role))
        return True


def _idle_role(scheduler: Scheduler, task: str, role: str) -> None:
    turn = scheduler.start_turn(task, role)
    scheduler.complete_turn(task, role, turn)


def test_yui_stopping_idle_roles_gives_each_a_cleanup_obligation(scheduler: Scheduler) -> None:
    task = scheduler.submit("job", id="t1")
    _idle_role(scheduler, task, "worker")
    busy = scheduler.start_turn(task, LEADER)
    head = scheduler.store.head()
    for roles, rule in (
        ([LEADER], "cleanup.role_active"),
        (["worker", LEADER], "cleanup.role_active"),
        (["ghost"], "cleanup.no_role"),
    ):
        with pytest.raises(TurnRuleViolation) as refused:
            scheduler.stop_roles(task, roles)
        assert refused.value.rule == rule
    assert scheduler.store.head() == head  # refused whole: nothing, not even for worker
    assert scheduler.stop_roles(task, ["worker"]) == ["worker"]
    assert scheduler.stop_roles(task, ["worker"]) == []  # already open
    (required,) = of_type(scheduler, RuntimeCleanupRequired)
    assert (required.role, required.cause) == ("worker", "cleanup.role_stopped")
    runtime = Cleaning()
    scheduler.controller_pass(runtime=runtime)
    assert runtime.cleaned == [(task, "worker")]
    obligations = scheduler.cleanup_obligations(task)
    assert obligations is not None and obligations.open_roles() == []
    # Stopped again after a new Turn: a new obligation; the task completing owes one too.
    _idle_role(scheduler, task, "worker")
    assert scheduler.stop_roles(task, ["worker"]) == ["worker"]
    scheduler.complete_turn(task, LEADER, busy)
    scheduler.reserve(task)
    scheduler.finish(task, "completed")
    scheduler.controller_pass(runtime=runtime)
    assert runtime.cleaned == [(task, "worker"), (task, "worker"), (task, LEADER)]


# ─── a failed cleanup leaves its role out of the rest of the pass (seed 000) ───────


def test_yui_failed_cleanup_leaves_the_role_out_of_the_rest_of_the_pass(
    scheduler: Scheduler,
) -> None:
    task = scheduler.submit("job", id="t1")
    _idle_role(scheduler, task, "worker")
    scheduler.stop_roles(task, ["worker"])
    turn = scheduler.start_turn(task, "worker")  # a new Turn while the cleanup is open
    scheduler.start_turn(task, "reviewer")
    scheduler.observe_exit(task, "worker", turn)
    runtime = Cleaning("worker")
    report = scheduler.controller_pass(runtime=runtime)
    assert report.done == [task]
    assert [role for _, role, _ in runtime.delivered] == ["reviewer"]  # not the worker
    assert report.turns == {}  # its exit is not judged in this pass either
    assert scheduler.active_turn(task, "worker") is not None
    runtime.fails.clear()
    again = scheduler.controller_pass(runtime=runtime)
    assert again.turns == {task: {"worker": "exited"}}


def test_yui_failed_leader_cleanup_holds_back_the_tasks_wakeups(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    _idle_role(scheduler, task, LEADER)
    scheduler.stop_roles(task, [LEADER])
    scheduler.request_wakeup(task, "mail")
    clock.advance(AGGREGATION)
    runtime = Cleaning(LEADER)
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "held"}
    assert scheduler.active_turn(task, LEADER) is None and scheduler.pending_wakeup(task)
    (failed,) = of_type(scheduler, RuntimeCleanupFailed)
    assert failed.role == LEADER and "would not stop" in failed.error
    runtime.fails.clear()
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "dispatched"}
