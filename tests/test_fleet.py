"""A fleet on one store (issue 13, SPEC section 8): worker identity, leases, scoped
recovery (rule 9 for a fleet), close per worker (rule 10), fencing, and decisions on
the store's current state. Each test drives the workers with one ManualClock."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.checks import stale

from tasktrail.domain import (
    AdmissionRefused,
    ConflictError,
    InMemoryExecutor,
    LeaseLost,
    ManualClock,
    Registry,
    RuleViolation,
    RunSettings,
    Scheduler,
    TaskDefinition,
)
from tasktrail.domain.runs.events import RunMinted
from tasktrail.domain.tasks.events import TaskRecovered, TaskStopped

LEASE = 10_000


@pytest.fixture
def fleet(fleet: Any) -> Any:
    """The suite's ``fleet`` (conftest), each worker with a lease of :data:`LEASE`."""

    def open_worker(name: str, **options: Any) -> Scheduler:
        options.setdefault("lease", LEASE)
        return fleet(name, **options)

    return open_worker


def recoveries(s: Scheduler, task_id: str) -> list[TaskRecovered]:
    return [e for e in s.history(task_id) if isinstance(e, TaskRecovered)]


# ─── identity ───────────────────────────────────────────────────────────────


def test_a_reservation_records_its_worker(fleet: Any) -> None:
    a = fleet("a")
    task = a.submit("job")
    a.reserve(task)
    assert a.task(task).worker == "a"
    a.checkpoint(task, "end")
    a.finish(task)
    assert a.task(task).worker is None  # a worker holds running tasks only


def test_worker_names_default_unique_and_env_overrides(
    sqlite_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = Scheduler.open(sqlite_url, clock=clock), Scheduler.open(sqlite_url, clock=clock)
    with one, two:
        assert one.worker and two.worker and one.worker != two.worker
    monkeypatch.setenv("TASKTRAIL_WORKER", "from-env")
    with Scheduler.open(sqlite_url, clock=clock) as named:
        assert named.worker == "from-env"


# ─── rule 9 for a fleet: scoped recovery ──────────────────────────────────────


def test_rule_09_fleet_a_second_open_leaves_a_live_workers_task_running(fleet: Any) -> None:
    a = fleet("a")
    task = a.submit("job")
    a.reserve(task)
    b = fleet("b")
    assert b.task(task).status == "running"
    assert b.task(task).worker == "a"
    assert recoveries(b, task) == []
    a.checkpoint(task, "end")  # a still owns it
    assert a.task(task).restarts == 0


def test_rule_09_fleet_reopening_the_same_worker_recovers_its_tasks_at_once(
    fleet: Any, store_url: str, clock: ManualClock, registry: Registry
) -> None:
    a = Scheduler.open(store_url, clock=clock, registry=registry, worker="a", lease=LEASE)
    task = a.submit("job")
    a.reserve(task)
    a.store.close()  # a crash: no close() decision, the lease still current
    again = fleet("a")
    assert again.task(task).status == "pending"
    assert again.task(task).restarts == 1
    assert [e.worker for e in recoveries(again, task)] == ["a"]


def test_rule_09_fleet_heartbeat_recovers_tasks_of_an_expired_lease(
    fleet: Any, clock: ManualClock
) -> None:
    a = fleet("a")
    task = a.submit("job")
    a.reserve(task)
    b = fleet("b")
    clock.advance(LEASE // 2)
    assert b.heartbeat().recovered == []  # a's lease is still current
    clock.advance(LEASE)
    beat = b.heartbeat()
    assert beat.recovered == [task]
    assert beat.lost == {task: "a"}
    state = b.task(task)
    assert (state.status, state.restarts, state.worker) == ("pending", 1, None)
    assert [e.worker for e in recoveries(b, task)] == ["a"]


def test_rule_09_fleet_a_heartbeating_worker_keeps_its_tasks(
    fleet: Any, clock: ManualClock
) -> None:
    a = fleet("a")
    task = a.submit("job")
    a.reserve(task)
    b = fleet("b")
    for _ in range(5):
        clock.advance(LEASE // 2)
        a.heartbeat()
        assert b.heartbeat().recovered == []
    assert b.task(task).worker == "a"


def test_rule_09_fleet_racing_recoveries_recover_each_task_once(
    fleet: Any, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = fleet("a")
    tasks = [a.submit("job") for _ in range(3)]
    for task in tasks:
        a.reserve(task)
    b, c = fleet("b"), fleet("c")
    clock.advance(LEASE + 1)
    # c decides on the view it had before b's recovery: its append must conflict,
    # and deciding again on the fresh state finds nothing left to recover.
    real_refresh = c.refresh
    calls = {"n": 0}

    def stale_once() -> int:
        calls["n"] += 1  # the first look and the decision both miss b's recovery
        return 0 if calls["n"] <= 2 else real_refresh()

    assert b.heartbeat().recovered == sorted(tasks)
    monkeypatch.setattr(c, "refresh", stale_once)
    assert c.heartbeat().recovered == []
    assert calls["n"] > 2  # c's stale append conflicted, and it decided again
    for task in tasks:
        assert len(recoveries(c, task)) == 1
        assert c.task(task).restarts == 1


def test_rule_09_fleet_restarts_count_and_park_as_in_rule_9(fleet: Any, clock: ManualClock) -> None:
    a = fleet("a", restart_limit=2)
    task = a.submit("job")
    for expected in (1, 2):
        a.reserve(task)
        clock.advance(LEASE + 1)
        b = fleet(f"b{expected}", restart_limit=2)
        b.heartbeat()
        assert b.task(task).restarts == expected
        a = b
    assert a.blocked_reason(task) == "restart_limit"


# ─── rule 10 per worker ───────────────────────────────────────────────────────


def test_rule_10_fleet_close_returns_only_its_own_tasks(fleet: Any) -> None:
    a, b = fleet("a"), fleet("b")
    mine, theirs = a.submit("job"), a.submit("job")
    a.reserve(mine)
    b.reserve(theirs)
    a.close()
    assert b.task(mine).status == "pending"
    assert b.task(mine).restarts == 0
    assert any(isinstance(e, TaskStopped) for e in b.history(mine))
    assert b.task(theirs).status == "running"
    assert b.task(theirs).worker == "b"


def test_rule_10_fleet_close_never_fails_when_another_worker_took_its_task(
    fleet: Any, clock: ManualClock
) -> None:
    a = fleet("a")
    task = a.submit("job")
    a.reserve(task)
    clock.advance(LEASE + 1)
    b = fleet("b")
    b.heartbeat()
    b.reserve(task)
    a.close()  # no ConflictError, and b's task is left alone
    assert b.task(task).worker == "b"
    assert not any(isinstance(e, TaskStopped) for e in b.history(task))


# ─── fencing ──────────────────────────────────────────────────────────────────


def test_fencing_a_worker_that_lost_its_lease_is_refused_and_appends_nothing(
    fleet: Any, clock: ManualClock
) -> None:
    a = fleet("a")
    task = a.submit("job")
    a.reserve(task)
    clock.advance(LEASE + 1)  # a paused past its lease
    b = fleet("b")
    b.heartbeat()
    b.reserve(task)
    head = b.store.head()
    with pytest.raises(LeaseLost) as refused:
        a.checkpoint(task, "end")
    assert refused.value.rule == 9
    assert "b" in str(refused.value)
    assert b.store.head() == head
    b.checkpoint(task, "end")  # b owns it


def test_fencing_the_phase_handler_learns_it_lost_the_task(
    store_url: str, clock: ManualClock
) -> None:
    seen: dict[str, Any] = {}
    other: dict[str, Scheduler] = {}

    def slow(inv: Any) -> None:
        # While this phase runs, the worker is paused past its lease and b takes over.
        clock.advance(LEASE + 1)
        b = other["b"]
        b.heartbeat()
        b.reserve(inv.task_id)
        try:
            inv.checkpoint("end")
        except LeaseLost as lost:
            seen["error"] = lost
        seen["lost"] = inv.lost

    registry = Registry([TaskDefinition("job", 1, {"start": slow, "end": lambda i: None})])
    a = Scheduler.open(store_url, clock=clock, registry=registry, worker="a", lease=LEASE)
    other["b"] = Scheduler.open(store_url, clock=clock, registry=registry, worker="b", lease=LEASE)
    try:
        task = a.submit("job")
        a.run_pass()
        assert isinstance(seen["error"], LeaseLost) and seen["lost"] is True
        assert other["b"].task(task).worker == "b"
        assert a.task(task).status == "running"  # b's, not faulted by a
    finally:
        other["b"].close()
        a.close()


# ─── no decision on a stale view ─────────────────────────────────────────────


def test_every_command_decides_on_the_stores_current_state(fleet: Any) -> None:
    a, b = fleet("a"), fleet("b")
    parent = a.submit("job")
    a.reserve(parent)
    child = b.submit("leaf")  # a has not read it yet
    a.wait(parent, [child])
    b.reserve(child)
    b.finish(child)
    a.reserve(parent)  # decided on b's finish: the wait is met
    assert a.task(parent).worker == "a"


def test_mint_run_and_the_daily_cap_decide_on_fresh_state(fleet: Any, clock: ManualClock) -> None:
    a, b = fleet("a"), fleet("b")
    settings = RunSettings(cap_per_day=2, run_spacing_ms=0)
    for s in (a, b):
        s.configure_runs(executor=InMemoryExecutor(), settings=settings)
    first, second, third = a.submit("job"), a.submit("job"), a.submit("job")
    run = b.mint_run(first, trigger="scheduled")
    assert b.run(run).status in ("dispatching", "running")
    a.mint_run(second, trigger="scheduled")  # a sees b's run: the cap has one left
    with pytest.raises(AdmissionRefused) as refused:
        b.mint_run(third, trigger="scheduled")  # b sees a's run: the cap is reached
    assert getattr(refused.value, "code", None) == "cap_reached"


def test_a_stale_mint_past_the_daily_cap_is_refused_by_the_store(
    fleet: Any, clock: ManualClock
) -> None:
    """The daily cap counts every run of the day, of every task: two workers minting
    runs of different tasks write different streams, so no version key settles the
    race. The store does: a decision that counted runs is refused if a run was minted
    since the log position it had folded (its workers on other machines, say)."""
    a, b = fleet("a"), fleet("b")
    settings = RunSettings(cap_per_day=2, run_spacing_ms=0)
    for s in (a, b):
        s.configure_runs(executor=InMemoryExecutor(), settings=settings)
    first, second, third = a.submit("job"), a.submit("job"), a.submit("job")
    a.mint_run(first, trigger="scheduled")
    b.refresh()  # b has seen one run today
    a.mint_run(second, trigger="scheduled")  # the cap is reached
    head = b.store.head()
    with stale(b), pytest.raises(ConflictError):
        b.mint_run(third, trigger="scheduled")  # b's view still has one run: a race
    assert b.store.head() == head  # the loser appended nothing
    with pytest.raises(AdmissionRefused) as refused:
        b.mint_run(third, trigger="scheduled")  # decided again on fresh state
    assert getattr(refused.value, "code", None) == "cap_reached"
    minted = [r.event for r in b.store.read() if isinstance(r.event, RunMinted)]
    assert [e.task_id for e in minted] == [first, second]
    # A manual run ignores the cap: it is not refused for a run minted since.
    fourth = b.submit("job")
    with stale(b):
        a.mint_run(third, trigger="manual")
        assert b.run(b.mint_run(fourth, trigger="manual")).trigger == "manual"


def test_a_batch_that_counted_runs_is_refused_whole_after_another_mint(
    fleet: Any, clock: ManualClock
) -> None:
    a, b = fleet("a"), fleet("b")
    settings = RunSettings(cap_per_day=2, run_spacing_ms=0)
    for s in (a, b):
        s.configure_runs(executor=InMemoryExecutor(), settings=settings)
    first, second = a.submit("job"), a.submit("job")
    b.refresh()
    a.mint_run(first, trigger="scheduled")
    head = b.store.head()
    with stale(b), pytest.raises(ConflictError), b.batch():
        b.submit("job")  # another command of the batch
        b.mint_run(second, trigger="scheduled")  # counted no run today: stale
    assert b.store.head() == head  # the whole batch was refused
    b.mint_run(second, trigger="scheduled")  # fresh: the cap has one left
    assert b.store.head() > head


def test_a_refused_mint_is_not_refused_for_a_run_another_worker_ended(
    fleet: Any, clock: ManualClock
) -> None:
    a, b = fleet("a"), fleet("b")
    executor = InMemoryExecutor()
    for s in (a, b):
        s.configure_runs(executor=executor, settings=RunSettings(run_spacing_ms=0))
    task = a.submit("job")
    run = a.mint_run(task)
    job = a.run(run).job_id
    assert job is not None
    executor.finish(job, "completed")
    b.reconcile()
    assert b.run(run).status == "done"
    again = a.mint_run(task)  # a must not answer task_running from its old view
    assert again.endswith("|2")


def test_rule_violation_is_still_the_base_of_lease_lost() -> None:
    assert issubclass(LeaseLost, RuleViolation)


def test_a_controller_pass_plans_on_the_stores_current_state(fleet: Any) -> None:
    """A pass's plan (which tasks it covers) reads what other writers appended first: a
    task with Turn work that another worker submitted is in a's very next full pass, not
    in the pass after."""
    a, b = fleet("a"), fleet("b")
    a.controller_pass()  # a has read the store as it stood
    b.submit("job", id="t1")
    b.start_turn("t1", "worker")
    report = a.controller_pass()
    assert "t1" in report.tasks


def test_a_controller_pass_inside_a_batch_plans_on_the_world_as_it_stands(fleet: Any) -> None:
    """Inside a batch a pass folds nothing of other writers' (it would fold them under
    the batch's own unappended events); the batch's append still meets what they wrote."""
    a, b = fleet("a"), fleet("b")
    a.controller_pass()
    b.submit("job", id="t1")
    b.start_turn("t1", "worker")
    with a.batch():
        report = a.controller_pass()
        assert "t1" not in report.tasks
    assert "t1" in a.controller_pass().tasks
