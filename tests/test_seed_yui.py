"""yui's behaviour where tasktrail once differed (issue 16; seeds 000 and 001): each test
names the behaviour and fails when it breaks. The rules they hold are written down in
docs/seed-fidelity.md."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.probes import of_type
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    Scheduler,
    TaskDefinition,
    Worker,
    next_deadline,
)
from tasktrail.domain.turns.events import (
    RuntimeCleanupFailed,
    RuntimeCleanupRequired,
    TurnDelivered,
    TurnEvent,
    TurnSettingsChanged,
    TurnStallDiagnosed,
    WakeupDispatched,
    WakeupDropped,
    WakeupFoundBusy,
)
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import PassStarted, TaskPassRetryScheduled
from tasktrail.domain.turns.refusals import TurnRuleViolation
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings, turn_settings_of
from tasktrail.domain.turns.state import LEADER
from tasktrail.projections import Projector, ReadModel
from tasktrail.replay import replay

AGGREGATION = TurnSettings().aggregation_window_ms
FORCE = TurnSettings().force_window_ms
STALL = TurnSettings().stall_window_ms
DIAGNOSTIC = TurnSettings().diagnostic_after_ms


class Delivering(Runtime):
    """Delivers every Turn (``outcome``), remembering what it was handed."""

    def __init__(self, outcome: str = "delivered") -> None:
        self.outcome = outcome
        self.delivered: list[tuple[str, str, str]] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.delivered.append((task_id, role, turn_id))
        return self.outcome


# ─── defect 1: a dispatched wakeup is a delivered Leader input (seed 001) ──────────


def test_yui_dispatched_wakeup_turn_is_delivered_in_the_same_pass(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    scheduler.request_wakeup(task, "mail")
    clock.advance(AGGREGATION)
    runtime = Delivering()
    report = scheduler.controller_pass(runtime=runtime)
    assert report.wakeups == {task: "dispatched"}
    assert runtime.delivered == [(task, LEADER, "leader.1")]
    turn = scheduler.active_turn(task, LEADER)
    assert turn is not None and turn.status == "delivered"
    (delivered,) = of_type(scheduler, TurnDelivered)
    assert (delivered.turn_id, delivered.pass_id) == ("leader.1", report.pass_id)
    # Nothing is left for a later pass but the stall diagnostic (then the stall window).
    assert scheduler.next_turn_deadline() == clock.now + DIAGNOSTIC


def test_yui_undelivered_turn_is_due_now(scheduler: Scheduler, clock: ManualClock) -> None:
    task = scheduler.submit("job", id="t1")
    started_at = clock.now
    turn = scheduler.start_turn(task, "worker")
    clock.advance(5_000)
    # A host sleeping until the deadline delivers it now, not at the stall window's end.
    assert scheduler.next_turn_deadline() == started_at
    scheduler.controller_pass(runtime=Delivering())
    assert scheduler.active_turn(task, "worker").status == "delivered"  # type: ignore[union-attr]
    assert scheduler.next_turn_deadline() == clock.now + DIAGNOSTIC
    scheduler.complete_turn(task, "worker", turn)
    assert scheduler.next_turn_deadline() is None


def test_yui_wakeup_turn_a_pass_could_not_deliver_stays_due_now(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    scheduler.request_wakeup(task, "mail")
    clock.advance(AGGREGATION)
    scheduler.controller_pass()  # no runtime: the Leader Turn starts, undelivered
    assert scheduler.active_turn(task, LEADER) is not None
    assert of_type(scheduler, WakeupDispatched)
    assert scheduler.next_turn_deadline() == clock.now


# ─── defect 2: a forced wakeup is recorded only once handed off (seed 001) ─────────


class Steer(Runtime):
    """Steers forced wakeups into the busy Leader Turn; the first ``fails`` hand-offs
    raise. Notes whether the wakeup was still pending (nothing recorded) at each."""

    def __init__(self, scheduler: Scheduler, fails: int = 0, join: str | None = None) -> None:
        self.scheduler = scheduler
        self.fails = fails
        self.join = join
        self.steered: list[tuple[str, str, tuple[str, ...]]] = []
        self.pending_at_hand_off: list[bool] = []

    def steer(self, task_id: str, turn_id: str, reasons: tuple[str, ...]) -> None:
        self.pending_at_hand_off.append(self.scheduler.pending_wakeup(task_id) is not None)
        if self.join is not None:  # a request arrives while the hand-off is underway
            self.scheduler.request_wakeup(task_id, self.join)
            self.join = None
        if self.fails:
            self.fails -= 1
            raise ConnectionError("the Leader's socket went away")
        self.steered.append((task_id, turn_id, reasons))


def _busy_leader_past_force(scheduler: Scheduler, clock: ManualClock) -> tuple[str, str]:
    scheduler.configure_turns(stall_window_ms=FORCE * 4)
    task = scheduler.submit("job", id="t1")
    busy = scheduler.start_turn(task, LEADER)
    scheduler.deliver_turn(task, LEADER, busy, "delivered")
    scheduler.request_wakeup(task, "review-done")
    clock.advance(FORCE)
    return task, busy


def test_yui_forced_wakeup_whose_hand_off_fails_is_kept_and_retried(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task, busy = _busy_leader_past_force(scheduler, clock)
    runtime = Steer(scheduler, fails=1)
    first = scheduler.controller_pass(runtime=runtime)
    assert first.failed == [task]
    assert of_type(scheduler, WakeupDispatched) == []  # nothing claims the hand-off
    assert scheduler.pending_wakeup(task) is not None
    retry_at = first.retries[task]
    assert retry_at is not None
    clock.set(retry_at)
    second = scheduler.controller_pass(runtime=runtime)
    assert second.wakeups == {task: "steered"}
    assert runtime.steered == [(task, busy, ("review-done",))]
    assert runtime.pending_at_hand_off == [True, True]  # recorded only after each
    (dispatched,) = of_type(scheduler, WakeupDispatched)
    assert (dispatched.mode, dispatched.turn_id, dispatched.pass_id) == (
        "steered",
        busy,
        second.pass_id,
    )
    assert scheduler.pending_wakeup(task) is None


def test_yui_forced_wakeup_command_appends_nothing_when_the_hand_off_raises(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task, _ = _busy_leader_past_force(scheduler, clock)
    head = scheduler.store.head()
    with pytest.raises(ConnectionError):
        scheduler.dispatch_wakeup(task, runtime=Steer(scheduler, fails=1))
    assert scheduler.store.head() == head
    assert scheduler.dispatch_wakeup(task, runtime=Steer(scheduler)).status == "steered"


def test_yui_forced_wakeup_records_only_what_it_handed_off(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task, _ = _busy_leader_past_force(scheduler, clock)
    runtime = Steer(scheduler, join="late-news")
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "busy"}
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None and wakeup.reasons == ("review-done", "late-news")
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "steered"}
    assert [reasons for _, _, reasons in runtime.steered] == [
        ("review-done",),
        ("review-done", "late-news"),
    ]
    (dispatched,) = of_type(scheduler, WakeupDispatched)
    assert dispatched.reasons == ("review-done", "late-news")


# ─── defect 3: a busy Leader's wakeup answers its aggregation end first (seed 001) ──


def test_yui_busy_leader_wakeup_deadline_is_the_aggregation_end_first(
    scheduler: Scheduler, clock: ManualClock, tmp_path: Path
) -> None:
    # One delivery retry: the busy Leader is signalled again once (the re-signals are
    # tested below), and the pass that runs finds it busy still.
    scheduler.configure_turns(stall_window_ms=FORCE * 4, delivery_retry_limit=1)
    task = scheduler.submit("job", id="t1")
    busy = scheduler.start_turn(task, LEADER)
    scheduler.deliver_turn(task, LEADER, busy, "delivered")
    first_at = clock.now
    scheduler.request_wakeup(task, "mail")
    assert scheduler.next_turn_deadline() == first_at + AGGREGATION
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        model = ReadModel(projector)
        assert model.next_wakeup_deadline(now=clock.now) == {
            "task_id": task,
            "deadline": first_at + AGGREGATION,
            "window": "aggregation",
        }
        clock.set(first_at + AGGREGATION)
        assert scheduler.controller_pass().wakeups == {task: "busy"}
        assert scheduler.next_turn_deadline() == first_at + AGGREGATION + 250
        clock.set(first_at + AGGREGATION + 250)
        assert scheduler.controller_pass().wakeups == {task: "busy"}
        # Past the aggregation end with the Leader still busy: the force end.
        assert scheduler.next_turn_deadline() == first_at + FORCE
        projector.catch_up()
        assert model.next_wakeup_deadline(now=clock.now) == {
            "task_id": task,
            "deadline": first_at + FORCE,
            "window": "force",
        }


# ─── defect 7: settings that decide are in the log (seeds 000/001, 003) ────────────


def test_yui_turn_settings_are_recorded_and_replay_decides_with_them(
    sqlite_url: str, clock: ManualClock, registry: Registry, tmp_path: Path
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    # One delivery retry: a busy Leader is signalled again once, then the force end is next.
    settings = s.configure_turns(
        aggregation_window_ms=5_000, force_window_ms=20_000, delivery_retry_limit=1
    )
    head = s.store.head()
    assert s.configure_turns(aggregation_window_ms=5_000) == settings  # unchanged
    assert s.store.head() == head  # nothing recorded for settings already in force
    (changed,) = of_type(s, TurnSettingsChanged)
    assert (changed.aggregation_window_ms, changed.force_window_ms) == (5_000, 20_000)
    task = s.submit("job", id="t1")
    busy = s.start_turn(task, LEADER)
    s.deliver_turn(task, LEADER, busy, "delivered")
    first_at = clock.now
    s.request_wakeup(task, "mail")
    clock.advance(5_000)
    assert s.controller_pass().wakeups == {task: "busy"}  # the wake at the aggregation end
    clock.advance(250)
    assert s.controller_pass().wakeups == {task: "busy"}  # its one re-signal
    assert s.next_turn_deadline() == first_at + 20_000
    state = replay(sqlite_url)
    assert turn_settings_of(state.world) == settings
    assert next_deadline(state.world, turn_settings_of(state.world), clock.now) == first_at + 20_000
    (row,) = state.pending_wakeups
    assert (row["aggregation_deadline"], row["force_deadline"]) == (
        first_at + 5_000,
        first_at + 20_000,
    )
    # The settings change again: the read model's deadlines move with them.
    s.configure_turns(force_window_ms=30_000)
    with Projector(s.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        (row,) = ReadModel(projector).pending_wakeups()
        assert row["force_deadline"] == first_at + 30_000
    s.close()
    reopened = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    assert reopened.turn_settings == replace(settings, force_window_ms=30_000)
    reopened.close()


@given(
    aggregation=st.integers(1, 120_000),
    extra=st.integers(0, 600_000),
    steps=st.lists(
        st.tuples(st.sampled_from(["request", "pass", "busy"]), st.integers(0, 90_000)), max_size=12
    ),
)
@settings(max_examples=15)
def test_yui_replay_equals_live_under_any_turn_settings(
    aggregation: int, extra: int, steps: list[tuple[str, int]]
) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        clock = ManualClock(1_000_000)
        registry = Registry([TaskDefinition("job", 1, {"go": lambda inv: None})])
        s = Scheduler.open(f"{workdir}/t.db", clock=clock, registry=registry)
        s.configure_turns(aggregation_window_ms=aggregation, force_window_ms=aggregation + extra)
        task = s.submit("job", id="t1")
        for step, advance in steps:
            clock.advance(advance)
            if step == "request":
                s.request_wakeup(task, f"r{advance}")
            elif step == "pass":
                s.controller_pass(runtime=Delivering())
            elif s.active_turn(task, LEADER) is None:
                s.deliver_turn(task, LEADER, s.start_turn(task, LEADER), "delivered")
            state = replay(s.store)
            live = s.next_turn_deadline()
            assert next_deadline(state.world, turn_settings_of(state.world), clock.now) == live
            assert {r["task_id"]: r for r in state.pending_wakeups} == {
                w.task_id: {
                    "task_id": w.task_id,
                    "reasons": orjson.dumps(list(w.reasons)).decode(),
                    "request_count": w.request_count,
                    "first_requested_at": w.first_requested_at,
                    "last_requested_at": w.last_requested_at,
                    "aggregation_deadline": w.first_requested_at + aggregation,
                    "force_deadline": w.first_requested_at + aggregation + extra,
                    "resignal_at": w.resignal_at,
                    "busy_attempts": w.busy_attempts,
                    "busy_turn_id": w.busy_turn_id,
                }
                for w in s.pending_wakeups().values()
            }
        s.close()


# ─── a full pass takes over armed task-pass retries and queued dirty work (seed 000) ─


class FailingDelivery(Runtime):
    """Delivering a Turn of a task in ``fails`` raises; others are delivered."""

    def __init__(self, *fails: str, on_deliver: Any = None) -> None:
        self.fails = set(fails)
        self.on_deliver = on_deliver
        self.delivered: list[str] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if self.on_deliver is not None:
            self.on_deliver(task_id)
        if task_id in self.fails:
            raise RuntimeError("the runtime's socket went away")
        self.delivered.append(task_id)
        return "delivered"


def _with_worker_turns(scheduler: Scheduler, *ids: str) -> None:
    for task_id in ids:
        scheduler.submit("job", id=task_id)
        scheduler.start_turn(task_id, "worker")


def test_yui_full_pass_takes_over_an_armed_task_pass_retry(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    _with_worker_turns(scheduler, "t1", "t2")
    dirty = scheduler.controller_pass([role_key("t1", "worker")], runtime=FailingDelivery("t1"))
    assert dirty.failed == ["t1"]
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and retry.retry_at > clock.now  # armed, not due yet
    full = scheduler.controller_pass("full", runtime=FailingDelivery())
    assert full.retried == ["t1"]  # taken over before it was due, all its roles
    assert full.done == ["t1", "t2"]
    assert scheduler.task_pass_retry("t1") is None
    started = [e for e in of_type(scheduler, PassStarted) if e.pass_id == full.pass_id]
    assert started[0].retried == ("t1",)


def test_yui_full_pass_failing_a_taken_over_retry_uses_its_next_attempt(
    scheduler: Scheduler,
) -> None:
    _with_worker_turns(scheduler, "t1")
    runtime = FailingDelivery("t1")
    scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)  # attempt 0
    second = scheduler.controller_pass("full", runtime=runtime)  # the same work, failing
    (retry,) = [r for r in of_type(scheduler, TaskPassRetryScheduled) if r.attempt == 1]
    assert second.retries["t1"] == retry.retry_at
    third = scheduler.controller_pass("full", runtime=runtime)
    assert third.retries == {"t1": None}  # the limit (2) holds under full passes too
    assert scheduler.task_pass_retry("t1") is None


def test_yui_requested_full_pass_takes_over_queued_dirty_work(scheduler: Scheduler) -> None:
    _with_worker_turns(scheduler, "t1", "t2")
    scheduler.request_pass([task_key("t1")])
    scheduler.request_pass("full")
    scheduler.request_pass([task_key("t2")])  # part of the full pass already queued
    reports = scheduler.pump(runtime=FailingDelivery())
    assert [(r.scope, r.tasks) for r in reports] == [("full", ["t1", "t2"])]
    assert scheduler.pump() == [] and not scheduler.pass_queue
    scheduler.request_pass([task_key("t2")])
    scheduler.request_pass([role_key("t1", "worker")])
    (dirty,) = scheduler.pump()
    # In the order the tasks were asked for (round four: yui's ``partitionDirtyScope``).
    assert (dirty.scope, dirty.tasks) == ("dirty", ["t2", "t1"])
    with pytest.raises(InvalidArgument):
        scheduler.request_pass(["task:"])
    assert not scheduler.pass_queue


def test_yui_dirty_pass_yields_its_unstarted_tasks_to_a_requested_full_pass(
    scheduler: Scheduler,
) -> None:
    _with_worker_turns(scheduler, "t1", "t2")
    runtime = FailingDelivery(on_deliver=lambda task_id: scheduler.request_pass("full"))
    dirty = scheduler.controller_pass(
        [task_key("t1"), task_key("t2")], runtime=runtime, concurrency=1
    )
    assert (dirty.done, dirty.having("skipped")) == (["t1"], ["t2"])
    (full,) = scheduler.pump(runtime=FailingDelivery())
    assert full.scope == "full" and "t2" in full.done


# ─── a Leader wake fence pauses wakeup dispatch (seed 001) ─────────────────────────


class Fenced(Delivering):
    def __init__(self) -> None:
        super().__init__()
        self.fence = True

    def leader_wake_fenced(self) -> bool:
        return self.fence


def test_yui_leader_wake_fence_pauses_wakeup_dispatch(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    ended = scheduler.submit("leaf", id="ended")
    for task_id in (task, ended):
        scheduler.request_wakeup(task_id, "mail")
    scheduler.reserve(ended)
    scheduler.finish(ended, "completed")
    clock.advance(FORCE)
    runtime = Fenced()
    head = scheduler.store.head()
    report = scheduler.controller_pass(runtime=runtime)
    assert report.wakeups == {task: "fenced", ended: "fenced"}  # not even dropped
    assert of_type(scheduler, WakeupDispatched) == [] and of_type(scheduler, WakeupDropped) == []
    assert scheduler.active_turn(task, LEADER) is None
    assert set(scheduler.pending_wakeups()) == {task, ended}
    assert scheduler.store.head() > head  # the pass itself is recorded, nothing else
    runtime.fence = False
    assert scheduler.controller_pass(runtime=runtime).wakeups == {
        task: "dispatched",
        ended: "dropped",
    }


# ─── a wake that finds the Leader busy is re-signalled with the delivery backoff ───


def test_yui_busy_leader_wake_is_resignalled_with_the_delivery_backoff(
    scheduler: Scheduler, clock: ManualClock, tmp_path: Path
) -> None:
    scheduler.configure_turns(stall_window_ms=FORCE * 4, delivery_retry_limit=6)
    task = scheduler.submit("job", id="t1")
    busy = scheduler.start_turn(task, LEADER)
    scheduler.deliver_turn(task, LEADER, busy, "delivered")
    first_at = clock.now
    scheduler.request_wakeup(task, "mail")
    clock.set(first_at + AGGREGATION)
    gaps = []
    for _ in range(7):
        assert scheduler.controller_pass().wakeups == {task: "busy"}
        due = scheduler.next_turn_deadline()
        assert due is not None
        gaps.append(due - clock.now)
        clock.set(due)
    # min(2000, 250 * 2**min(attempt, 3)) between re-signals, six of them (the delivery
    # retry limit, as a delivery is retried six times); the pass the last one runs finds
    # the Leader busy still and gives up: only the force end is left.
    assert gaps[:6] == [250, 500, 1000, 2000, 2000, 2000]
    assert clock.now == first_at + FORCE
    found = of_type(scheduler, WakeupFoundBusy)
    assert [(f.attempt, f.turn_id, f.cause) for f in found][:2] == [
        (0, busy, "wakeups.resignal"),
        (1, busy, "wakeups.resignal"),
    ]
    assert len(found) == 7 and found[-1].resignal_at is None
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        assert ReadModel(projector).next_wakeup_deadline(now=clock.now) == {
            "task_id": task,
            "deadline": first_at + FORCE,
            "window": "force",
        }
    scheduler.complete_turn(task, LEADER, busy)
    assert scheduler.controller_pass().wakeups == {task: "dispatched"}
    assert len(of_type(scheduler, WakeupFoundBusy)) == 7


def test_yui_busy_resignal_is_not_recorded_before_it_is_due(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    busy = scheduler.start_turn(task, LEADER)
    scheduler.deliver_turn(task, LEADER, busy, "delivered")
    scheduler.request_wakeup(task, "mail")
    clock.advance(AGGREGATION)
    scheduler.controller_pass()
    clock.advance(100)  # before the re-signal (at +250)
    scheduler.controller_pass()
    assert len(of_type(scheduler, WakeupFoundBusy)) == 1


# ─── Turns held by writer-attached / delivery-uncertain are offered again (001) ────


class Scripted(Runtime):
    """Answers each delivery with the next outcome of ``outcomes``."""

    def __init__(self, *outcomes: str) -> None:
        self.outcomes = list(outcomes)
        self.offered: list[tuple[str, int]] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.offered.append((turn_id, attempt))
        return self.outcomes.pop(0)


@pytest.mark.parametrize("held", ["writer-attached", "delivery-uncertain"])
def test_yui_held_turn_is_offered_for_delivery_again_by_a_later_pass(
    scheduler: Scheduler, held: str
) -> None:
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = Scripted(held, held, "delivered")
    first = scheduler.controller_pass(runtime=runtime)
    assert runtime.offered == [(turn, 0)]  # offered once in the pass that held it
    state = scheduler.active_turn(task, "worker")
    assert state is not None and state.delivery_held and state.held_by_pass == first.pass_id
    scheduler.controller_pass([role_key(task, "worker")], runtime=runtime)
    scheduler.controller_pass([role_key(task, "worker")], runtime=runtime)
    assert runtime.offered == [(turn, 0)] * 3
    assert scheduler.active_turn(task, "worker").status == "delivered"  # type: ignore[union-attr]


def test_yui_turn_held_by_a_command_is_offered_by_the_next_pass(scheduler: Scheduler) -> None:
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    scheduler.deliver_turn(task, "worker", turn, "writer-attached")
    assert scheduler.next_turn_deadline() is not None  # the stall window only, not now
    runtime = Scripted("delivered")
    scheduler.controller_pass(runtime=runtime)
    assert runtime.offered == [(turn, 0)]


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


# ─── a stall diagnostic before a Turn is declared stalled (seed 001) ───────────────


class Diagnosing(Delivering):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def diagnose_stall(self, task_id: str, role: str, turn_id: str) -> str | None:
        self.asked.append(turn_id)
        return f"{turn_id}: no output, process alive"


def test_yui_stall_diagnostic_comes_before_the_stall(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=60_000, stall_diagnostic_ms=20_000)
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = Diagnosing()
    scheduler.controller_pass(runtime=runtime)  # delivered: progress now
    progress_at = clock.now
    assert scheduler.next_turn_deadline() == progress_at + 20_000
    clock.advance(20_000)
    report = scheduler.controller_pass(runtime=runtime)
    assert report.diagnosed == {task: {"worker": f"{turn}: no output, process alive"}}
    assert report.turns == {} and scheduler.active_turn(task, "worker") is not None
    assert scheduler.next_turn_deadline() == progress_at + 60_000
    scheduler.controller_pass(runtime=runtime)  # diagnosed once per stretch without progress
    assert runtime.asked == [turn]
    clock.set(progress_at + 60_000)
    assert scheduler.controller_pass(runtime=runtime).turns == {task: {"worker": "stalled"}}
    kinds = [type(e).__name__ for e in of_type(scheduler, TurnEvent) if e.turn_id == turn]
    assert kinds.index("TurnStallDiagnosed") < kinds.index("TurnStalled")
    (diagnosed,) = of_type(scheduler, TurnStallDiagnosed)
    assert (diagnosed.progress_at, diagnosed.cause) == (progress_at, "turns.stall_diagnostic")


def test_yui_late_pass_diagnoses_then_stalls_and_progress_restarts_the_diagnostic(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=60_000)  # diagnostic: half of it
    task = scheduler.submit("job", id="t1")
    first = scheduler.start_turn(task, "worker")
    scheduler.deliver_turn(task, "worker", first, "delivered")
    clock.advance(30_000)
    scheduler.controller_pass()
    clock.advance(10_000)
    scheduler.progress_turn(task, "worker", first)  # progress answers the diagnostic
    turn = scheduler.active_turn(task, "worker")
    assert turn is not None and not turn.stall_diagnosed
    assert scheduler.next_turn_deadline() == clock.now + 30_000
    clock.advance(90_000)  # the next pass only comes after the whole stall window
    report = scheduler.controller_pass()
    assert report.diagnosed == {task: {"worker": None}}
    assert report.turns == {task: {"worker": "stalled"}}
    assert len(of_type(scheduler, TurnStallDiagnosed)) == 2


def test_yui_worker_retries_a_pass_it_could_not_resolve_with_the_delivery_backoff(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("crew", id="t1", phase="lead")  # no phases here to run
    scheduler.request_wakeup(task, "mail")
    clock.advance(AGGREGATION)
    runtime = Fenced()
    worker = Worker(scheduler, runtime=runtime)
    for _ in range(5):  # the fence holds the wakeup: not a pass at every tick
        worker.tick()
    assert len(of_type(scheduler, PassStarted)) == 1
    assert worker.next_deadline() == clock.now + 250
    clock.advance(250)
    worker.tick()
    assert len(of_type(scheduler, PassStarted)) == 2
    assert worker.next_deadline() == clock.now + 500  # backing off, as yui's timers do
    runtime.fence = False
    clock.advance(500)
    worker.tick()
    assert scheduler.active_turn(task, LEADER) is not None
