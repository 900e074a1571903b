"""Rules 5, 6, 7 and 14 of SPEC.md section 1: a task and the tasks it owns or waits for.

One test per numbered rule; each fails if its rule is broken. An outcome waits for
owned work (rule 5), cancellation cascades down the ownership tree (rule 6), waits name
real tasks, fail fast only on their own and never in a cycle (rule 7), and memos end
with the outcome, held or not (rule 14).
"""

from __future__ import annotations

from helpers.probes import refused, running

from tasktrail.domain import ManualClock, Registry, Scheduler

# 5 ──────────────────────────────────────────────────────────────────────────


def test_rule_05_finish_with_live_owned_tasks_holds_outcome(scheduler: Scheduler) -> None:
    owner = running(scheduler)
    first = scheduler.submit("leaf", owner=owner)
    second = scheduler.submit("leaf", owner=owner)
    scheduler.finish(owner, "completed")
    held = scheduler.task(owner)
    assert held.status == "completing" and held.outcome.status == "completed"
    scheduler.reserve(first)
    scheduler.finish(first, "completed")
    assert scheduler.task(owner).status == "completing"
    scheduler.reserve(second)
    scheduler.finish(second, "failed")
    ended = scheduler.task(owner)
    assert ended.status == "terminal" and ended.outcome.status == "completed"
    assert scheduler.history(owner)[-1].rule == 5


def test_rule_05_release_climbs_the_ownership_tree(scheduler: Scheduler) -> None:
    root = running(scheduler)
    middle = running(scheduler, owner=root)
    leaf = scheduler.submit("leaf", owner=middle)
    scheduler.finish(middle, "completed")
    scheduler.finish(root, "completed")
    assert scheduler.task(root).status == "completing"
    scheduler.reserve(leaf)
    scheduler.finish(leaf, "completed")
    assert scheduler.task(middle).status == "terminal"
    assert scheduler.task(root).status == "terminal"


# 6 ──────────────────────────────────────────────────────────────────────────


def test_rule_06_cascade_marks_live_descendants(scheduler: Scheduler) -> None:
    root = running(scheduler)
    child = scheduler.submit("job", owner=root)
    grandchild = scheduler.submit("leaf", owner=child)
    done = running(scheduler, "leaf", owner=root)
    scheduler.finish(done, "completed")
    scheduler.abort(root)
    assert scheduler.task(child).abort_requested
    assert scheduler.task(grandchild).abort_requested
    assert not scheduler.task(done).abort_requested
    cascade = [e for e in scheduler.history(grandchild) if type(e).__name__ == "AbortMarked"]
    assert cascade and cascade[0].rule == 6 and cascade[0].by == root


def test_rule_06_held_failure_cascades_and_new_work_is_marked(scheduler: Scheduler) -> None:
    owner = running(scheduler)
    child = scheduler.submit("job", owner=owner)
    scheduler.finish(owner, "failed", error="boom")
    assert scheduler.task(owner).status == "completing"
    assert scheduler.task(child).abort_requested
    # A descendant waits for its cascade mark instead of running a phase.
    assert scheduler.reserve(child) == "abort"


def test_rule_06_held_completion_does_not_cascade(scheduler: Scheduler) -> None:
    owner = running(scheduler)
    child = scheduler.submit("job", owner=owner)
    scheduler.finish(owner, "completed")
    assert not scheduler.task(child).abort_requested
    assert scheduler.reserve(child) == "run"


def test_rule_06_recovery_marks_a_restart_marked_owner_below_another(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Found by the long profile's kills (test_many_kills_lose_nothing_acknowledged):
    at open, abandon_on_restart marks two owners, one below the other, with restart
    marks (no request mark); the cascades then ran in id order, the lower one's first,
    and the upper one's passed over the lower owner as walked already, leaving a live
    descendant of a cancelling owner without its rule 6 mark."""
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    upper = scheduler.submit("job", id="z-upper", abandon_on_restart=True)
    lower = scheduler.submit("job", id="a-lower", owner=upper, abandon_on_restart=True)
    below = scheduler.submit("leaf", id="m-below", owner=lower)
    scheduler.close()
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    assert scheduler.task(upper).abort_reason == "restart"
    assert scheduler.task(lower).request_marked  # rule 6, by its cancelling owner
    assert scheduler.task(below).request_marked
    scheduler.close()


def test_rule_06_submit_below_cancelling_owner_is_marked(scheduler: Scheduler) -> None:
    owner = scheduler.submit("job")
    scheduler.abort(owner)
    child = scheduler.submit("leaf", owner=owner)
    assert scheduler.task(child).abort_requested


# 7 ──────────────────────────────────────────────────────────────────────────


def test_rule_07_wait_names_existing_tasks(scheduler: Scheduler) -> None:
    waiter = running(scheduler)
    refused(scheduler, 7, scheduler.wait, waiter, ["no-such-task"])
    refused(scheduler, 7, scheduler.wait, waiter, [])


def test_rule_07_fail_fast_names_only_owned_tasks(scheduler: Scheduler) -> None:
    waiter = running(scheduler)
    stranger = scheduler.submit("leaf")
    refused(scheduler, 7, scheduler.wait, waiter, [stranger], "failFast")
    own = scheduler.submit("leaf", owner=waiter)
    scheduler.wait(waiter, [own], "failFast")
    assert scheduler.task(waiter).status == "waiting"


def test_rule_07_wait_cycle_refused(scheduler: Scheduler) -> None:
    a, b, c = (running(scheduler) for _ in range(3))
    scheduler.wait(a, [b])
    scheduler.wait(b, [c])
    error = refused(scheduler, 7, scheduler.wait, c, [a])
    assert "cycle" in str(error)
    refused(scheduler, 7, scheduler.wait, c, [c])


def test_rule_07_fail_fast_wakes_on_first_failure_all_waits_for_all(
    scheduler: Scheduler,
) -> None:
    fast = running(scheduler)
    patient = running(scheduler)
    f1, f2 = scheduler.submit("leaf", owner=fast), scheduler.submit("leaf", owner=fast)
    scheduler.wait(fast, [f1, f2], "failFast", phase="end")
    scheduler.wait(patient, [f1, f2], "all", phase="end")
    refused(scheduler, 7, scheduler.reserve, fast)
    scheduler.reserve(f1)
    scheduler.finish(f1, "failed")
    assert scheduler.reserve(fast) == "run"
    refused(scheduler, 7, scheduler.reserve, patient)
    scheduler.reserve(f2)
    scheduler.finish(f2, "completed")
    assert scheduler.reserve(patient) == "run"


def test_rule_07_fail_fast_wakes_on_a_held_failure(scheduler: Scheduler) -> None:
    waiter = running(scheduler)
    child = running(scheduler, owner=waiter)
    scheduler.submit("leaf", owner=child)
    scheduler.wait(waiter, [child], "failFast")
    scheduler.finish(child, "failed")
    assert scheduler.task(child).status == "completing"
    assert scheduler.reserve(waiter) == "run"


# 14 ─────────────────────────────────────────────────────────────────────────


def test_rule_14_memos_disappear_when_outcome_is_decided(scheduler: Scheduler) -> None:
    task_id = running(scheduler)
    scheduler.memo(task_id, "draft", {"words": 120})
    assert scheduler.memo(task_id, "draft") == {"words": 120}
    scheduler.finish(task_id, "completed")
    assert scheduler.task(task_id).memos == {}

    holder = running(scheduler)
    scheduler.memo(holder, "k", 1)
    scheduler.submit("leaf", owner=holder)
    scheduler.finish(holder, "completed")
    assert scheduler.task(holder).status == "completing"
    assert scheduler.task(holder).memos == {}
