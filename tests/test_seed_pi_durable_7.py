"""pi-durable's behaviour, seventh round (seed 004, `TaskScheduler`): restart counting and
the restart limit, close-is-not-a-crash, blocked reasons and `wake()`, at the edges the
earlier rounds left unpinned. Each test names the behaviour and the seed's code it comes
from; docs/seed-fidelity.md ("Round seven") says what was fixed and what is reported."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from conftest import crash, finishing, reopen

from tasktrail.domain import ManualClock, Registry, RuleViolation, Scheduler, TaskDefinition, Worker


def _running(scheduler: Scheduler, kind: str = "job", **options: Any) -> str:
    task_id = scheduler.submit(kind, **options)
    assert scheduler.reserve(task_id) == "run"
    return task_id


def _events(scheduler: Scheduler, task_id: str) -> list[str]:
    return [type(e).__name__ for e in scheduler.history(task_id)]


# ─── rule 9: what counts as a restart ─────────────────────────────────────────────
# pi-durable (`open`): only a record whose status is `running` is written back `pending`
# with `restarts + 1`; a pending, waiting, sleeping or held task is loaded as it was.


def test_pi_durable_a_crash_counts_a_restart_only_for_running_tasks(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    pending = s.submit("job")
    sleeping = _running(s)
    s.sleep(sleeping, until=clock.now + 100)
    waiting = _running(s)
    s.wait(waiting, on=[pending])
    holder = _running(s)
    s.submit("leaf", owner=holder)
    s.finish(holder, "completed")
    running = _running(s)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    loaded = [s.task(t) for t in (pending, sleeping, waiting, holder)]
    statuses = ["pending", "sleeping", "waiting", "completing"]
    assert [(t.status, t.restarts) for t in loaded] == [(status, 0) for status in statuses]
    assert s.task(running).restarts == 1 and s.parked == [running]
    s.close()


# ─── rule 11: a wait or a sleep is progress; a memo is not ────────────────────────
# pi-durable (`#commitState`): a committed state that differs drops the count, as a
# waiting or sleeping one always does; a memo is not written through `#commitState`.


def test_pi_durable_a_wait_or_a_sleep_is_progress_a_memo_is_not(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=5)
    sleeper, waiter = _running(s), _running(s)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=5)
    for task_id in (sleeper, waiter):
        assert s.reserve(task_id) == "run"
        s.memo(task_id, "seen", True)
        assert s.task(task_id).restarts == 1
    s.sleep(sleeper, until=clock.now + 10)
    s.wait(waiter, on=[s.submit("leaf")])
    assert (s.task(sleeper).restarts, s.task(waiter).restarts) == (0, 0)
    s.close()


# ─── rule 9: parking is reported by the open that parks ───────────────────────────
# pi-durable (`open`): `task_parked` is reported for the records `running` at that open;
# a task parked before is `pending`: a later open neither counts nor reports it. The
# limit is read live (`#parked`), so an open with a higher limit runs it.


def test_pi_durable_a_task_parked_earlier_is_not_reported_again_at_a_later_open(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    task = _running(s)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    assert s.parked == [task]
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    assert s.parked == [] and s.task(task).restarts == 1
    assert s.blocked_reason(task) == "restart_limit"
    s.close()
    s = reopen(sqlite_url, clock, registry, limit=2)
    assert s.blocked_reason(task) is None
    s.run_until_idle()
    assert s.task(task).outcome.status == "completed"  # type: ignore[union-attr]
    s.close()


# ─── rule 12: an abandoned task's abort handler counts its cut-offs too ───────────
# pi-durable (`withAbortMark` drops `restarts`; `#abandoned`: "already marked ... done
# with them"; `#reserve` faults a cut-off abort handler before `#resolve` reads the
# definition): the restart mark starts the count over once, later opens count the
# handler's cut-offs, and at the limit it ends `faulted`, with or without a definition.


def test_pi_durable_an_abandoned_tasks_abort_handler_cut_off_at_the_limit_ends_faulted(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=2)
    task = _running(s, abandon_on_restart=True)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=2)
    assert s.task(task).abort_reason == "restart" and s.task(task).restarts == 0
    for cut_off in (1, 2):
        assert s.reserve(task) == "abort"
        crash(s)
        s = reopen(sqlite_url, clock, registry, limit=2)
        assert (s.task(task).abort_reason, s.task(task).restarts) == ("restart", cut_off)
    registry.unregister("job")
    assert s.blocked_reason(task) == "missing_definition"
    assert s.run_pass().faulted == {task: "restart_limit"}
    assert _events(s, task).count("AbortMarked") == 1
    s.close()


# ─── rule 10: close is not a crash ────────────────────────────────────────────────
# pi-durable (`join`): the stopped invocations' tasks are written back `pending` as they
# are after the commits before the seal ("such as an abort mark"); a sleeping or waiting
# task is left as it was.


def test_pi_durable_close_stops_only_running_tasks_and_keeps_their_marks(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    sleeper = _running(s)
    s.sleep(sleeper, until=clock.now + 500)
    waiter = _running(s)
    awaited = s.submit("leaf")
    s.wait(waiter, on=[awaited])
    marked = _running(s)
    s.abort(marked)  # an operator's abort while it runs
    head = s.store.head()
    s.close()
    s = reopen(sqlite_url, clock, registry, limit=1)
    assert s.store.head() == head + 1  # the one task that ran is stopped; nothing else
    stopped = s.task(marked)
    assert (stopped.status, stopped.abort_requested, stopped.restarts) == ("pending", True, 0)
    assert _events(s, marked)[-2:] == ["AbortMarked", "TaskStopped"]
    assert (s.task(sleeper).status, s.task(sleeper).until) == ("sleeping", clock.now + 500)
    assert (s.task(waiter).status, s.task(waiter).on) == ("waiting", (awaited,))
    assert s.wake() == {"active": True, "at": clock.now + 500}
    assert s.reserve(marked) == "abort"
    s.close()


def test_pi_durable_a_phase_that_closes_its_scheduler_writes_nothing_after_the_stop(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    def closing(inv: Any) -> str:
        inv.scheduler.close()  # the host shuts down while the phase runs
        return "end"  # the phase's decision comes after the seal: rule 2

    registry.register(TaskDefinition("closer", 1, {"start": closing, "end": finishing()}))
    s = reopen(sqlite_url, clock, registry, limit=1)
    task = s.submit("closer")
    assert s.run_pass().reserved == [task]
    s = reopen(sqlite_url, clock, registry, limit=1)
    assert _events(s, task) == ["TaskSubmitted", "TaskReserved", "TaskStopped"]
    stopped = s.task(task)
    assert (stopped.status, stopped.restarts, s.parked) == ("pending", 0, [])
    assert stopped.checkpoint is not None and stopped.checkpoint.phase == "start"
    s.close()


# ─── rule 13: which reasons, for which statuses ───────────────────────────────────
# pi-durable (`blockedReason`): only a running, held or terminal task and a request mark
# are never blocked; a waiting or sleeping task is asked of its definition.


def test_pi_durable_a_waiting_or_sleeping_task_is_blocked_by_its_definition(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    waiter = _running(s)
    s.wait(waiter, on=[_running(s, "leaf")])
    sleeper = _running(s)
    s.sleep(sleeper, until=clock.now + 1_000)
    registry.unregister("job")
    assert s.blocked_reason(waiter) == s.blocked_reason(sleeper) == "missing_definition"
    registry.register(TaskDefinition("job", 2, {"start": finishing()}))  # no migrate
    assert s.blocked_reason(waiter) == "migration_failed"
    assert s.wake() == {"active": True, "at": clock.now + 1_000}  # the running leaf
    s.close()


# ─── rule 13: a migration that throws blocks the task and idles `wake()` ─────────
# pi-durable (`#resolve`): a throwing `migrate` blocks the task without a commit, "the
# graph and the host's wake must hear it"; a registry change lets a pass try again.


def test_pi_durable_a_failed_migration_idles_wake_until_another_definition(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    def refuse(_: Any) -> str:
        raise ValueError("cannot read a version 1 record")

    s = reopen(sqlite_url, clock, registry, limit=1)
    task = s.submit("job")
    registry.register(TaskDefinition("job", 2, {"start": finishing()}, migrate=refuse))
    heard: list[Any] = []
    worker = Worker(s, on_wake=heard.append, on_blocked=lambda t, why: heard.append((t, why)))
    assert s.wake()["active"] is True  # not tried yet: a pass would try it
    worker.tick()
    assert heard == [(task, "migration_failed"), {"active": False, "at": None}]
    assert _events(s, task) == ["TaskSubmitted"]
    registry.register(TaskDefinition("job", 2, {"start": finishing()}, migrate=lambda t: None))
    assert s.blocked_reason(task) is None and s.wake()["active"] is True
    worker.tick()
    assert s.task(task).version == 2 and s.task(task).status == "terminal"
    s.close()


# ─── rule 13: the host hears when a blocked task can run again ────────────────────
# pi-durable (`#unparkRaised` "and tell the graph"; `registry.subscribe` calls
# `#notifyBlocked`): an unblocking change is told to the blocked listeners, as a
# blocking one is. The Worker reports `on_blocked` and `on_unblocked(id, reason_it_had)`.


def test_pi_durable_host_hears_when_a_blocked_task_can_run_again(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = _running(s, "leaf")
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=3)
    heard: set[tuple[str, str, str]] = set()
    worker = Worker(
        s,
        on_blocked=lambda t, why: heard.add(("blocked", t, why)),
        on_unblocked=lambda t, why: heard.add(("unblocked", t, why)),
    )
    s.restart_limit = 1  # parked without a commit
    registry.unregister("leaf")
    ghost = s.submit("ghost", phase="x")
    worker.tick()
    assert heard == {("blocked", ghost, "missing_definition"), ("blocked", task, "restart_limit")}
    heard.clear()
    s.restart_limit = 3  # let go without a commit: blocked by its definition now
    worker.tick()
    assert heard == {("blocked", task, "missing_definition")}
    heard.clear()
    registry.register(TaskDefinition("leaf", 1, {"go": finishing()}))
    registry.register(TaskDefinition("ghost", 1, {"x": finishing()}))
    worker.tick()
    unblocked = {("unblocked", t, "missing_definition") for t in (ghost, task)}
    assert heard == unblocked
    assert s.task(task).status == s.task(ghost).status == "terminal"
    s.close()


# ─── rule 13: only a reservation that goes ahead runs `migrate` ───────────────────
# pi-durable (`#reserve`): a sleep not due, a parked task and a cut-off abort handler
# are dealt with before `#resolve`, where `migrate` runs: none of them is migrated.


def test_pi_durable_a_parked_sleeping_or_cut_off_task_is_not_migrated(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    parked, cut_off = _running(s), s.submit("job")
    s.abort(cut_off)
    assert s.reserve(cut_off) == "abort"
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    sleeper = _running(s)
    s.sleep(sleeper, until=clock.now + 1_000)
    migrated: list[str] = []

    def migrate(task: Any) -> None:
        migrated.append(task.id)
        raise ValueError("refused")

    registry.register(TaskDefinition("job", 2, {"start": finishing()}, migrate=migrate))
    for task_id, rule in ((parked, 9), (sleeper, 8)):
        with pytest.raises(RuleViolation) as refused:
            s.reserve(task_id)
        assert refused.value.rule == rule
    assert s.run_pass().faulted == {cut_off: "restart_limit"}
    assert migrated == [] and s.failed_migrations == frozenset()
    assert s.blocked_reason(parked) == "restart_limit"
    s.close()


# ─── rule 15: which waiters and sleepers are work ─────────────────────────────────
# pi-durable (`wake`): a waiter is held back only while a task it names is live, then it
# is work unless no definition takes it; a sleep is in `at` only while `until > now`.


def test_pi_durable_wake_which_waiters_and_sleepers_are_work(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    past = _running(s)
    s.sleep(past, until=0)  # due already when committed
    assert s.wake() == {"active": True, "at": None}
    s.run_until_idle()
    sleeper = _running(s)
    s.sleep(sleeper, until=clock.now + 100)
    clock.advance(99)
    assert s.wake() == {"active": False, "at": clock.now + 1}
    clock.advance(1)
    assert s.wake() == {"active": True, "at": None}
    s.run_until_idle()
    assert s.task(sleeper).status == s.task(past).status == "terminal"
    waiter = _running(s)
    awaited = _running(s, "leaf")
    s.wait(waiter, on=[awaited])
    s.finish(awaited, "failed")
    assert s.task(waiter).status == "waiting" and s.wake()["active"] is True
    registry.unregister("job")
    assert s.wake() == {"active": False, "at": None}
    s.close()


# ─── rule 15: the limit in force decides, and a running task is work ──────────────
# pi-durable (`wake`: `#invocations.size > 0`, then `#parked` with the limit read at
# each call): a raised or lowered limit changes the answer before any pass.


def test_pi_durable_wake_follows_the_restart_limit_in_force(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = _running(s)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=3)
    s.restart_limit = 1  # recorded (a RestartLimitChanged); wake itself appends nothing
    head = s.store.head()
    assert s.wake() == {"active": False, "at": None} and s.store.head() == head
    s.restart_limit = 2
    head = s.store.head()
    assert s.wake() == {"active": True, "at": None} and s.store.head() == head
    assert s.reserve(task) == "run"
    registry.unregister("job")
    assert s.wake()["active"] is True and s.blocked_reason(task) is None
    s.close()


# ─── rule 15: `wake()` answers from the log as it stands ──────────────────────────
# pi-durable (`wake`): "from memory", `#live`, which the commit listener keeps equal to
# every committed record; in a fleet those include what other workers appended.


def test_pi_durable_wake_counts_what_another_writer_recorded(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    here = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="here")
    there = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="there")
    assert here.wake() == {"active": False, "at": None}
    task = there.submit("job")
    assert here.wake() == {"active": True, "at": None}
    assert there.reserve(task) == "run"
    there.sleep(task, until=clock.now + 500)
    assert here.wake() == {"active": False, "at": clock.now + 500}
    there.close()
    here.close()


# ─── rule 9: each parking is reported ────────────────────────────────────────────
# pi-durable (`open`) reports `task_parked` for each task it parks, also one parked
# before and let go by `retry()`; in a fleet, a heartbeat's recovery is that open.


def test_pi_durable_a_task_parked_again_after_retry_is_reported_again(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    worker = partial(Scheduler.open, sqlite_url, clock=clock, registry=registry, lease=1_000)
    s = worker(worker="survivor", restart_limit=1)
    parked: list[str] = []
    host = Worker(s, on_parked=lambda t, _: parked.append(t))
    task = s.submit("job")
    for lost in ("first", "second"):
        other = worker(worker=lost, restart_limit=1)
        assert other.reserve(task) == "run"
        crash(other)
        clock.advance(1_001)
        host.tick()  # the heartbeat recovers it, at the limit
        assert s.blocked_reason(task) == "restart_limit"
        s.retry(task)
    assert parked == [task, task]
    s.close()
