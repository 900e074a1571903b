"""pi-durable's behaviour, third round (seed 004, `TaskScheduler`): orders of checks and
exact outcomes the earlier rounds left unpinned. Each test names the behaviour; the
fixes it holds are written down in docs/seed-fidelity.md ("Round three")."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import crash, finishing, reopen

from tasktrail.domain import (
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.tasks.events import TaskEnded


def faults(scheduler: Scheduler, task_id: str) -> list[TaskEnded]:
    return [
        e for e in scheduler.history(task_id) if isinstance(e, TaskEnded) and e.status == "faulted"
    ]


# ─── a phase's failure after its task stopped running, or was abort-marked ─────────
# pi-durable (`#step`, then `#decide`): rules 1 and 2, then "3. abort mark: end", come
# before the phase's failure is looked at, so a throw after any of them writes nothing.


@pytest.mark.parametrize("before_the_throw", ["abort_mark", "sleep", "finish"])
def test_pi_durable_a_phase_that_throws_after_its_task_was_decided_is_not_faulted(
    sqlite_url: str, clock: ManualClock, before_the_throw: str
) -> None:
    aborts: list[str] = []

    def work(inv: Any) -> None:
        if before_the_throw == "abort_mark":
            inv.scheduler.abort(inv.task_id)  # an operator's abort arrives mid-phase
        elif before_the_throw == "sleep":
            inv.sleep(inv.now() + 1_000, then="done")
        else:
            inv.finish("completed")
        raise RuntimeError("cancelled")  # the phase notices and gives up

    def on_abort(inv: Any) -> None:
        aborts.append(inv.task_id)
        inv.finish("aborted", reason="cleaned up")

    registry = Registry(
        [TaskDefinition("job", 1, {"work": work, "done": finishing()}, abort=on_abort)]
    )
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task = s.submit("job")
    s.run_until_idle()
    assert faults(s, task) == []
    state = s.task(task)
    if before_the_throw == "abort_mark":
        # The run invocation ended at the mark; the abort handler ran next.
        assert aborts == [task]
        assert state.outcome is not None
        assert (state.outcome.status, state.outcome.reason) == ("aborted", "cleaned up")
    elif before_the_throw == "sleep":
        assert state.status == "sleeping" and state.checkpoint.phase == "done"  # type: ignore[union-attr]
    else:
        assert state.outcome is not None and state.outcome.status == "completed"
    s.close()


# ─── rule 12 before rule 3: a cut-off abort handler is faulted at once ─────────────
# pi-durable (`#reserve`): "An abort handler cut off `restartLimit` times in a row would
# run forever" is checked before the reservation is resolved, where an abort invocation
# waits for the live work below it. The outcome is decided then (held, rule 5).


def test_pi_durable_cut_off_abort_handler_is_faulted_before_its_owned_work_ends(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    owner = s.submit("job")
    s.abort(owner)
    assert s.reserve(owner) == "abort"
    child = s.submit("leaf", owner=owner)  # the abort handler starts owned work...
    crash(s)  # ...and is cut off
    s = reopen(sqlite_url, clock, registry, limit=1)
    assert s.task(owner).restarts == 1 and s.task(child).abort_requested
    assert s.run_pass().progressed
    # One pass: the owner's fault was decided first and held while the child was live,
    # then the child's abort ended it, which ended the holder.
    assert [(type(e).__name__, e.rule) for e in s.history(owner)[-2:]] == [
        ("OutcomeHeld", 12),
        ("TaskEnded", 5),
    ]
    ended = s.task(owner)
    assert ended.outcome is not None
    assert (ended.outcome.status, ended.outcome.reason) == ("faulted", "restart_limit")
    assert s.task(child).outcome.status == "aborted"  # type: ignore[union-attr]
    s.close()


def test_pi_durable_cut_off_abort_handler_with_owned_work_is_reserved_into_its_fault(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    owner = s.submit("job")
    s.abort(owner)
    s.reserve(owner)
    child = s.submit("leaf", owner=owner)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    assert s.reserve(owner) is None  # not refused for its owned work (rule 3): faulted
    held = s.task(owner)
    assert held.status == "completing" and held.outcome.reason == "restart_limit"  # type: ignore[union-attr]
    assert s.task(child).live and s.task(child).abort_requested
    s.close()


# ─── an abort reservation resolves the definition as a run reservation does ───────
# pi-durable (`#reserve`): `#resolve` takes both modes alike, so a task recorded under
# an older version reaches its abort handler through the newer definition's migration;
# tasktrail ran `migrate` there and dropped what it returned.


def test_pi_durable_abort_handler_runs_on_the_migrated_record(
    sqlite_url: str, clock: ManualClock
) -> None:
    registry = Registry([TaskDefinition("job", 1, {"start": finishing()})])
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task = s.submit("job")
    s.abort(task)
    seen: list[tuple[int, str | None]] = []

    def on_abort(inv: Any) -> None:
        seen.append((inv.task.version, inv.phase))
        inv.finish("aborted")

    registry.register(
        TaskDefinition("job", 2, {"v2": finishing()}, abort=on_abort, migrate=lambda old: "v2")
    )
    s.run_until_idle()
    assert seen == [(2, "v2")]
    assert [type(e).__name__ for e in s.history(task)][-3:] == [
        "TaskMigrated",
        "TaskReserved",
        "TaskEnded",
    ]
    assert s.task(task).version == 2 and s.task(task).outcome.status == "aborted"  # type: ignore[union-attr]
    s.close()


# ─── close is not a crash: the count and the memos are kept as they were ──────────
# pi-durable (`join`): a task a close stopped is written back `pending` with its record
# otherwise as it was (`withState`): no restart counted, none cleared, memos kept.


def test_pi_durable_close_keeps_the_restart_count_and_the_memos(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = s.submit("job")
    s.reserve(task)
    s.memo(task, "draft", {"words": 120})
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=3)
    assert s.task(task).restarts == 1 and s.task(task).memos == {"draft": {"words": 120}}
    assert s.reserve(task) == "run"  # a reservation is no progress either
    s.close()
    s = reopen(sqlite_url, clock, registry, limit=3)
    stopped = s.task(task)
    assert (stopped.status, stopped.restarts) == ("pending", 1)
    assert stopped.memos == {"draft": {"words": 120}}
    s.close()


def test_pi_durable_an_abort_handler_stopped_by_close_is_not_cut_off(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    task = s.submit("job")
    s.abort(task)
    for _ in range(3):
        assert s.reserve(task) == "abort"
        s.close()
        s = reopen(sqlite_url, clock, registry, limit=1)
        assert s.task(task).restarts == 0  # rule 12 counts crashes, not closes
    assert s.reserve(task) == "abort"
    s.finish(task, "aborted")
    assert s.task(task).outcome.status == "aborted"  # type: ignore[union-attr]
    s.close()


# ─── the restart limit is read at each decision ────────────────────────────────────
# pi-durable (`#parked`, `#reserve`, `retry`): parking compares the count with the limit
# in force, so a lowered limit parks without a commit ("Newly parked without a commit");
# `retry()` clears a parked task's count and leaves any other task's count alone.


def test_pi_durable_lowered_limit_parks_without_an_event_and_retry_clears_only_parked(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = s.submit("job")
    s.reserve(task)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=3)
    assert s.task(task).restarts == 1 and s.blocked_reason(task) is None
    head = s.store.head()
    assert s.retry(task) is False  # below the limit: not parked, so its count stays
    assert s.task(task).restarts == 1 and s.store.head() == head
    s.restart_limit = 1  # the limit is recorded (one event); parking itself is not
    assert s.store.head() == head + 1
    assert s.blocked_reason(task) == "restart_limit"
    assert s.wake() == {"active": False, "at": None}
    assert s.run_pass().reserved == [] and s.store.head() == head + 1  # parked, unwritten
    assert s.retry(task) is True
    assert s.task(task).restarts == 0 and s.blocked_reason(task) is None
    s.run_until_idle()
    assert s.task(task).outcome.status == "completed"  # type: ignore[union-attr]
    s.close()


# ─── rule 11: the whole checkpoint is compared, attempt included ──────────────────
# pi-durable (`#commitState`): `jsonEqual(current.state, next)`; a checkpoint carries
# `{phase, attempt}`, so a new attempt of the same phase is a different state.


def test_pi_durable_new_attempt_of_the_same_phase_is_progress(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=5)
    task = s.submit("job")
    s.reserve(task)
    s.checkpoint(task, "start", attempt=1)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=5)
    s.reserve(task)
    s.checkpoint(task, "start", attempt=1)  # the same checkpoint again: no progress
    assert s.task(task).restarts == 1
    s.checkpoint(task, "start", attempt=2)  # the next attempt: progress
    assert s.task(task).restarts == 0
    s.close()


# ─── rule 13: which reason, and what a restart mark waits for ─────────────────────
# pi-durable (`blockedReason`): parked is answered before the definition is read; "An
# abort request runs its handler or orphans the task; a `restart` mark waits for the
# definition, blocked" (and `wake()` does not count it as work).


def test_pi_durable_parked_is_named_before_a_missing_definition(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    task = s.submit("job")
    s.reserve(task)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    registry.unregister("job")
    assert s.blocked_reason(task) == "restart_limit"
    s.retry(task)
    assert s.blocked_reason(task) == "missing_definition"
    s.close()


def test_pi_durable_restart_mark_waits_blocked_for_its_definition(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    aborts: list[str] = []

    def on_abort(inv: Any) -> None:
        aborts.append(inv.task_id)
        inv.finish("aborted")

    s = reopen(sqlite_url, clock, registry, limit=3)
    abandoned = s.submit("job", abandon_on_restart=True)
    s.close()
    registry.unregister("job")
    s = reopen(sqlite_url, clock, registry, limit=3)
    assert s.task(abandoned).abort_reason == "restart"
    assert s.blocked_reason(abandoned) == "missing_definition"
    assert s.wake() == {"active": False, "at": None}
    head = s.store.head()
    assert s.run_pass().progressed is False and s.store.head() == head  # not orphaned
    with pytest.raises(RuleViolation) as refused:
        s.reserve(abandoned)
    assert refused.value.rule == 13 and s.store.head() == head
    registry.register(
        TaskDefinition("job", 1, {"start": finishing(), "end": finishing()}, abort=on_abort)
    )
    assert s.wake()["active"] is True
    s.run_until_idle()
    assert aborts == [abandoned] and s.task(abandoned).outcome.status == "aborted"  # type: ignore[union-attr]
    s.close()


# ─── rule 15: what wake() counts ──────────────────────────────────────────────────
# pi-durable (`wake`): a held outcome is no work; a sleep counts toward `at` only
# while not due and not abort-marked (an abort mark ends a sleep: it is work now);
# `at` is answered whether or not something is active.


def test_pi_durable_wake_skips_holders_and_abort_marked_sleepers(
    tmp_path: Any, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(tmp_path / "wake.db", clock=clock, registry=registry)
    holder = s.submit("job")
    s.reserve(holder)
    near = s.submit("leaf", owner=holder)
    s.reserve(near)
    s.sleep(near, until=clock.now + 1_000)
    far = s.submit("leaf")
    s.reserve(far)
    s.sleep(far, until=clock.now + 5_000)
    s.finish(holder, "completed")
    assert s.task(holder).status == "completing"
    assert s.wake() == {"active": False, "at": clock.now + 1_000}  # the holder is no work
    s.abort(near)
    assert s.wake() == {"active": True, "at": clock.now + 5_000}
    s.run_until_idle()  # the marked sleeper aborts now, long before its time
    assert s.task(near).outcome.status == "aborted"  # type: ignore[union-attr]
    assert s.task(holder).status == "terminal"
    assert s.wake() == {"active": False, "at": clock.now + 5_000}
    s.close()


# ─── the host hears of each fault the scheduler decides ──────────────────────────
# pi-durable reports `task_faulted` once a fault it decided is durable ("a host may
# count it, for example toward a breaker"): reason `threw` from `#step` (a phase or an
# abort handler that failed or gave no outcome) and `restart_limit` from `#reserve`.
# A task's own faulted outcome is the task's decision, not a report.


def test_pi_durable_host_hears_of_each_fault_the_scheduler_decides(
    sqlite_url: str, clock: ManualClock
) -> None:
    def boom(inv: Any) -> None:
        raise ValueError("boom")

    def hold_then_throw(inv: Any) -> None:
        inv.submit("leaf")
        raise ValueError("boom, with owned work live")

    registry = Registry(
        [
            TaskDefinition("boom", 1, {"go": boom}),
            TaskDefinition("holder", 1, {"go": hold_then_throw}),
            TaskDefinition("mute", 1, {"go": finishing()}, abort=lambda inv: None),
            TaskDefinition("selfish", 1, {"go": finishing("faulted")}),
            TaskDefinition("cut", 1, {"go": finishing()}),
            TaskDefinition("leaf", 1, {"go": lambda inv: inv.sleep(inv.now() + 60_000)}),
        ]
    )
    s = reopen(sqlite_url, clock, registry, limit=1)
    cut = s.submit("cut", id="cut")
    s.abort(cut)
    s.reserve(cut)
    crash(s)  # its abort handler is cut off once: the limit
    s = reopen(sqlite_url, clock, registry, limit=1)
    for kind in ("boom", "holder", "mute", "selfish"):
        s.submit(kind, id=kind)
    s.abort("mute")
    heard: list[tuple[str, str]] = []
    worker = Worker(s, on_faulted=lambda task_id, why: heard.append((task_id, why)))
    for _ in range(3):
        worker.tick()
    assert sorted(heard) == [
        ("boom", "threw"),
        ("cut", "restart_limit"),
        ("holder", "threw"),  # held while its owned task was live: reported all the same
        ("mute", "no_outcome"),
    ]
    assert s.task("selfish").outcome.status == "faulted"  # type: ignore[union-attr]
    s.close()
