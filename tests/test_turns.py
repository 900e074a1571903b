"""Turns (SPEC.md section 2): one active per role, stale completions, completion before
liveness, delivery retries, stalls, runtime-cleanup obligations."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import event_count
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Refused,
    Registry,
    RuleViolation,
    Scheduler,
    TaskEvent,
)
from tasktrail.domain.turns.events import (
    TurnCompleted,
    TurnCompletionRefused,
    TurnDeliveryFailed,
    TurnEvent,
    TurnExited,
    TurnFailed,
    TurnObservationDropped,
    TurnStalled,
    TurnStarted,
)
from tasktrail.domain.turns.keys import role_key
from tasktrail.domain.turns.refusals import StaleCompletion, TurnRuleViolation
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings, retry_delay_ms

ENDS = (TurnCompleted, TurnFailed, TurnExited, TurnStalled)


def events_of(scheduler: Scheduler) -> list[TaskEvent]:
    """Every event in the store, in log order (read back, not from memory)."""
    return [recorded.event for recorded in scheduler.store.read()]


def turn_events(scheduler: Scheduler, turn_id: str) -> list[TaskEvent]:
    return [e for e in events_of(scheduler) if isinstance(e, TurnEvent) and e.turn_id == turn_id]


def running_task(scheduler: Scheduler, task_id: str = "t1") -> str:
    """A task left pending (Turns do not need its invocation)."""
    return scheduler.submit("job", id=task_id)


def finished_task(scheduler: Scheduler, task_id: str) -> str:
    scheduler.reserve(task_id)
    scheduler.finish(task_id, "completed")
    return task_id


# ─── turns.one_active ───────────────────────────────────────────────────────


def test_turn_one_active_per_role_refuses_second(scheduler: Scheduler) -> None:
    task = running_task(scheduler)
    first = scheduler.start_turn(task, "leader")
    head = scheduler.store.head()
    with pytest.raises(TurnRuleViolation) as refused:
        scheduler.start_turn(task, "leader")
    assert refused.value.rule == "turns.one_active"
    assert first in str(refused.value) and task in str(refused.value)
    assert scheduler.store.head() == head  # a refused command appends nothing
    # Another role is another lane; after the Turn ends the role starts its next one.
    assert scheduler.start_turn(task, "worker") == "worker.1"
    scheduler.complete_turn(task, "leader", first)
    assert scheduler.start_turn(task, "leader") == "leader.2"


def test_turn_refused_on_terminal_and_completing_tasks(scheduler: Scheduler) -> None:
    done = finished_task(scheduler, running_task(scheduler, "done"))
    owner = running_task(scheduler, "owner")
    scheduler.reserve(owner)
    scheduler.submit("leaf", id="child", owner=owner)
    scheduler.finish(owner, "completed")
    assert scheduler.task(owner).status == "completing"
    head = scheduler.store.head()
    with pytest.raises(RuleViolation) as terminal:
        scheduler.start_turn(done, "leader")
    assert terminal.value.rule == 4
    with pytest.raises(TurnRuleViolation) as completing:
        scheduler.start_turn(owner, "leader")
    assert completing.value.rule == "turns.outcome_decided"
    assert scheduler.store.head() == head


# ─── turns.stale_completion ─────────────────────────────────────────────────


def test_turn_stale_completion_is_refused_recorded_and_never_applied(
    scheduler: Scheduler,
) -> None:
    task = running_task(scheduler)
    first = scheduler.start_turn(task, "worker")
    scheduler.complete_turn(task, "worker", first)
    second = scheduler.start_turn(task, "worker")
    with pytest.raises(StaleCompletion) as stale:
        scheduler.complete_turn(task, "worker", first)
    assert stale.value.rule == "turns.stale_completion"
    assert stale.value.active_turn_id == second
    # Never applied: the active Turn is untouched ...
    active = scheduler.active_turn(task, "worker")
    assert active is not None and active.turn_id == second and active.status == "started"
    # ... and recorded as refused, for the audit.
    refusal = scheduler.history(task)[-1]
    assert isinstance(refusal, TurnCompletionRefused)
    assert refusal.turn_id == first and refusal.active_turn_id == second
    assert refusal.cause == "turns.stale_completion"


def test_turn_stale_completion_on_terminal_task_records_nothing(scheduler: Scheduler) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    finished_task(scheduler, task)
    head = scheduler.store.head()
    with pytest.raises(RuleViolation) as refused:
        scheduler.complete_turn(task, "worker", turn)
    assert refused.value.rule == 4
    assert scheduler.store.head() == head


# ─── turns.completion_due: completion before liveness ───────────────────────


def test_turn_due_completion_wins_over_exit_in_one_pass(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    assert scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 2_000) == "pending"
    assert scheduler.observe_exit(task, "worker") == "observed"
    clock.advance(2_000)
    report = scheduler.controller_pass()
    assert report.turns == {task: {"worker": "completed"}}
    role = scheduler.roles(task)["worker"]
    assert role.active is None and role.last is not None and role.last.status == "completed"
    kinds = [type(e) for e in turn_events(scheduler, turn)]
    assert TurnExited not in kinds
    dropped = [e for e in turn_events(scheduler, turn) if isinstance(e, TurnObservationDropped)]
    assert [(d.kind, d.cause, d.pass_id) for d in dropped] == [
        ("exit", "turns.completion_wins", report.pass_id)
    ]


def test_turn_due_completion_wins_over_stall(scheduler: Scheduler, clock: ManualClock) -> None:
    scheduler.configure_turns(stall_window_ms=10_000)
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 10_000)
    scheduler.observe_stall(task, "worker")
    clock.advance(10_000)  # the stall window has passed too
    scheduler.controller_pass([role_key(task, "worker")])
    assert scheduler.roles(task)["worker"].last.status == "completed"  # type: ignore[union-attr]
    assert not any(isinstance(e, TurnStalled) for e in events_of(scheduler))


def test_turn_exit_without_due_completion_ends_exited(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 5_000)
    scheduler.observe_exit(task, "worker", turn)
    clock.advance(1_000)  # the completion is not due yet: liveness judges the exit
    report = scheduler.controller_pass()
    assert report.turns == {task: {"worker": "exited"}}
    # A later observation naming the ended Turn is dropped, and the drop recorded.
    assert scheduler.observe_exit(task, "worker", turn) == "dropped"
    last = scheduler.history(task)[-1]
    assert isinstance(last, TurnObservationDropped) and last.cause == "turns.not_active"


def test_turn_fail_refused_while_completion_due(scheduler: Scheduler, clock: ManualClock) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 100)
    clock.advance(100)
    head = scheduler.store.head()
    with pytest.raises(TurnRuleViolation) as refused:
        scheduler.fail_turn(task, "worker", turn)
    assert refused.value.rule == "turns.completion_wins"
    assert scheduler.store.head() == head
    # Starting the next Turn folds the due completion first.
    assert scheduler.start_turn(task, "worker") == "worker.2"
    assert scheduler.roles(task)["worker"].last.status == "completed"  # type: ignore[union-attr]


class Uncertain(Runtime):
    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        return "delivery-uncertain"


def test_turn_delivery_uncertain_is_exempt_from_exit_in_that_pass(
    scheduler: Scheduler,
) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.observe_exit(task, "worker", turn)
    first = scheduler.controller_pass(runtime=Uncertain())
    assert first.turns == {}
    assert scheduler.active_turn(task, "worker") is not None
    # A later pass offers the held Turn again (yui); answered otherwise, the exit stands.
    second = scheduler.controller_pass(runtime=Runtime())
    assert second.turns == {task: {"worker": "exited"}}


# ─── turns.delivery_retry / turns.delivery_exhausted ────────────────────────


def test_turn_delivery_retry_delay_is_capped_exponential() -> None:
    assert [retry_delay_ms(250, attempt) for attempt in range(6)] == [
        250,
        500,
        1000,
        2000,
        2000,
        2000,
    ]
    assert retry_delay_ms(100, 10) == 800  # 100 * 2**3: the exponent is capped at 3


def test_turn_retryable_delivery_is_retried_after_backoff(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    delays = []
    for outcome in ("not-ready", "runtime-unavailable", "not-ready", "not-ready", "not-ready"):
        decision = scheduler.deliver_turn(task, "worker", turn, outcome)
        assert decision.status == "retry" and decision.retry_at is not None
        delays.append(decision.retry_at - clock.now)
        clock.advance(decision.retry_at - clock.now)
    assert delays == [250, 500, 1000, 2000, 2000]
    assert scheduler.deliver_turn(task, "worker", turn, "delivered").status == "delivered"
    active = scheduler.active_turn(task, "worker")
    assert active is not None and active.status == "delivered" and active.retry_at is None


def test_turn_delivery_exhaustion_records_failure_and_ends_failed(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(delivery_retry_limit=3)
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    statuses = [scheduler.deliver_turn(task, "worker", turn, "not-ready").status for _ in range(4)]
    assert statuses == ["retry", "retry", "retry", "failed"]
    failure, ended = scheduler.history(task)[-2:]
    assert isinstance(failure, TurnDeliveryFailed) and failure.attempts == 4
    assert failure.cause == "turns.delivery_exhausted"
    assert isinstance(ended, TurnFailed) and ended.reason == "delivery_exhausted"
    last = scheduler.roles(task)["worker"].last
    assert last is not None and last.status == "failed" and last.end_reason == "delivery_exhausted"


class Flaky(Runtime):
    """Delivers ``not-ready`` forever, counting attempts."""

    def __init__(self) -> None:
        self.attempts: list[int] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.attempts.append(attempt)
        return "not-ready"


def test_turn_pass_delivers_when_retry_is_due(scheduler: Scheduler, clock: ManualClock) -> None:
    scheduler.configure_turns(delivery_retry_limit=2)
    task = running_task(scheduler)
    scheduler.start_turn(task, "worker")
    runtime = Flaky()
    scheduler.controller_pass(runtime=runtime)  # first try: not-ready, retry at +250
    scheduler.controller_pass(runtime=runtime)  # not due yet: no try
    assert runtime.attempts == [0]
    clock.advance(250)
    scheduler.controller_pass(runtime=runtime)
    clock.advance(500)
    report = scheduler.controller_pass(runtime=runtime)
    assert runtime.attempts == [0, 1, 2]
    assert report.turns == {task: {"worker": "failed"}}


def test_turn_delivered_and_held_outcomes(scheduler: Scheduler) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    held = scheduler.deliver_turn(task, "worker", turn, "writer-attached")
    assert held.status == "held"
    active = scheduler.active_turn(task, "worker")
    assert active is not None and active.delivery_held and active.retry_at is None
    assert scheduler.deliver_turn(task, "worker", turn, "already-delivered").status == "delivered"
    head = scheduler.store.head()
    assert scheduler.deliver_turn(task, "worker", turn, "delivered").status == "unchanged"
    assert scheduler.store.head() == head


# ─── turns.stall_window ─────────────────────────────────────────────────────


def test_turn_without_progress_for_stall_window_ends_stalled(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=60_000)
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    clock.advance(50_000)
    scheduler.progress_turn(task, "worker", turn)
    clock.advance(59_999)
    assert scheduler.controller_pass().turns == {}  # progress restarted the window
    clock.advance(1)
    report = scheduler.controller_pass()
    assert report.turns == {task: {"worker": "stalled"}}
    stalled = scheduler.history(task)[-1]
    assert isinstance(stalled, TurnStalled) and stalled.cause == "turns.stall_window"
    assert stalled.progress_at == clock.now - 60_000


def test_turn_stall_window_default_is_thirty_minutes() -> None:
    assert TurnSettings().stall_window_ms == 30 * 60_000


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


# ─── refusals append nothing ────────────────────────────────────────────────

REFUSED: dict[str, Callable[[Scheduler, str, str], object]] = {
    "second_active": lambda s, t, turn: s.start_turn(t, "worker"),
    "blank_role": lambda s, t, turn: s.start_turn(t, " worker"),
    "unknown_task": lambda s, t, turn: s.start_turn("nope", "worker"),
    "bad_outcome": lambda s, t, turn: s.deliver_turn(t, "worker", turn, "lost"),
    "deliver_not_active": lambda s, t, turn: s.deliver_turn(t, "worker", "worker.9", "delivered"),
    "fail_not_active": lambda s, t, turn: s.fail_turn(t, "worker", "worker.9"),
    "progress_not_active": lambda s, t, turn: s.progress_turn(t, "other", "other.1"),
    "observe_no_turn": lambda s, t, turn: s.observe_exit(t, "other"),
    "bad_due_at": lambda s, t, turn: s.complete_turn(t, "worker", turn, due_at=float("nan")),
    "settle_nothing": lambda s, t, turn: s.settle_cleanup(t, "worker"),
}


@pytest.mark.parametrize("command", sorted(REFUSED))
def test_turn_refused_commands_append_nothing(scheduler: Scheduler, command: str) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    head = scheduler.store.head()
    with pytest.raises(Refused):
        REFUSED[command](scheduler, task, turn)
    assert scheduler.store.head() == head


def test_turn_closed_scheduler_refuses_turn_commands(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task = running_task(scheduler)
    scheduler.close()
    with pytest.raises(RuleViolation) as refused:
        scheduler.start_turn(task, "worker")
    assert refused.value.rule == 2


def test_turn_settings_are_validated() -> None:
    with pytest.raises(InvalidArgument):
        TurnSettings(aggregation_window_ms=0)
    with pytest.raises(InvalidArgument):
        TurnSettings(aggregation_window_ms=10_000, force_window_ms=5_000)
    with pytest.raises(InvalidArgument):
        TurnSettings(delivery_retry_limit=0)


# ─── on every store ─────────────────────────────────────────────────────────


def test_turns_survive_reopen_on_every_store(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(store_url, clock=clock, registry=registry)
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "leader")
    scheduler.deliver_turn(task, "leader", turn, "not-ready")
    scheduler.complete_turn(task, "leader", turn, due_at=clock.now + 1_000)
    scheduler.observe_exit(task, "leader")
    clock.advance(1_000)
    scheduler.controller_pass()
    with pytest.raises(StaleCompletion):
        scheduler.complete_turn(task, "leader", turn)
    worker = scheduler.start_turn(task, "worker")
    state = scheduler.task(task)
    written = scheduler.events_written
    scheduler.close()
    assert event_count(store_url) == written
    reopened = Scheduler.open(store_url, clock=clock, registry=registry)
    assert reopened.task(task) == state
    assert reopened.store.aggregate(task).state == state
    assert reopened.active_turn(task, "worker").turn_id == worker  # type: ignore[union-attr]
    reopened.close()


# ─── property: one active Turn per role; a due completion beats an exit ─────

ROLES = ("leader", "worker")


class TurnMachine(RuleBasedStateMachine):
    """Random Turn commands and passes over one task with two roles."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp()
        self.clock = ManualClock(1_000_000)
        self.scheduler = Scheduler.open(
            str(Path(self.directory) / "trail.db"), clock=self.clock, durability="normal"
        )
        self.scheduler.configure_turns(stall_window_ms=5_000, delivery_retry_limit=2)
        self.task = self.scheduler.submit("job", phase="go", id="t1")
        self.last_turn: dict[str, str] = {}

    def teardown(self) -> None:
        self.scheduler.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _turn(self, role: str, stale: bool) -> str:
        active = self.scheduler.active_turn(self.task, role)
        if active is not None and not stale:
            return active.turn_id
        return self.last_turn.get(role, f"{role}.1")

    @rule(role=st.sampled_from(ROLES))
    def start(self, role: str) -> None:
        try:
            self.last_turn[role] = self.scheduler.start_turn(self.task, role)
        except TurnRuleViolation as refusal:
            assert refusal.rule == "turns.one_active"

    @rule(
        role=st.sampled_from(ROLES),
        outcome=st.sampled_from(
            ["delivered", "not-ready", "writer-attached", "delivery-uncertain"]
        ),
    )
    def deliver(self, role: str, outcome: str) -> None:
        with contextlib.suppress(TurnRuleViolation):
            self.scheduler.deliver_turn(self.task, role, self._turn(role, False), outcome)

    @rule(role=st.sampled_from(ROLES), stale=st.booleans(), delay=st.sampled_from([0, 500, 2000]))
    def complete(self, role: str, stale: bool, delay: int) -> None:
        due_at = self.clock.now + delay if delay else None
        with contextlib.suppress(StaleCompletion):
            self.scheduler.complete_turn(self.task, role, self._turn(role, stale), due_at=due_at)

    @rule(role=st.sampled_from(ROLES), delay=st.sampled_from([100, 1000]), wait=st.booleans())
    def completion_races_an_exit(self, role: str, delay: int, wait: bool) -> None:
        """The race the rule is about: a completion due soon, and the process seen gone."""
        active = self.scheduler.active_turn(self.task, role)
        if active is None:
            self.start(role)
            active = self.scheduler.active_turn(self.task, role)
            assert active is not None
        self.scheduler.complete_turn(self.task, role, active.turn_id, due_at=self.clock.now + delay)
        self.scheduler.observe_exit(self.task, role, active.turn_id)
        if wait:
            self.clock.advance(delay)

    @rule(role=st.sampled_from(ROLES))
    def fail(self, role: str) -> None:
        with contextlib.suppress(TurnRuleViolation):
            self.scheduler.fail_turn(self.task, role, self._turn(role, False))

    @rule(role=st.sampled_from(ROLES), kind=st.sampled_from(["exit", "stall"]))
    def observe(self, role: str, kind: str) -> None:
        observe = self.scheduler.observe_exit if kind == "exit" else self.scheduler.observe_stall
        with contextlib.suppress(TurnRuleViolation):
            observe(self.task, role)

    @rule(role=st.sampled_from(ROLES))
    def progress(self, role: str) -> None:
        with contextlib.suppress(TurnRuleViolation):
            self.scheduler.progress_turn(self.task, role, self._turn(role, False))

    @rule(ms=st.sampled_from([100, 500, 2000, 6000]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def controller_pass(self) -> None:
        now = self.clock.now
        due = {}
        for role, state in self.scheduler.roles(self.task).items():
            turn = state.active
            if turn is not None and turn.completion_due(now) and turn.exit_observed_at is not None:
                due[role] = turn.turn_id
        event("a due completion met an exit" if due else "no meeting in this pass")
        self.scheduler.controller_pass()
        for role, turn_id in due.items():
            # The completion wins: the Turn ended completed, its exit was dropped.
            last = self.scheduler.roles(self.task)[role].last
            assert last is not None and last.turn_id == turn_id and last.status == "completed"
            ends = [type(e) for e in turn_events(self.scheduler, turn_id) if isinstance(e, ENDS)]
            assert ends == [TurnCompleted]
            assert any(
                isinstance(e, TurnObservationDropped) and e.kind == "exit"
                for e in turn_events(self.scheduler, turn_id)
            )

    @invariant()
    def at_most_one_active_turn_per_role(self) -> None:
        # Counted from the stored log, not from the fold that enforces it.
        open_turns: dict[str, set[str]] = {role: set() for role in ROLES}
        for recorded in events_of(self.scheduler):
            if isinstance(recorded, TurnStarted):
                open_turns[recorded.role].add(recorded.turn_id)
            elif isinstance(recorded, ENDS):
                open_turns[recorded.role].discard(recorded.turn_id)
            assert all(len(turns) <= 1 for turns in open_turns.values())
        for role in ROLES:
            active = self.scheduler.active_turn(self.task, role)
            assert open_turns[role] == ({active.turn_id} if active else set())


TestTurnMachine = TurnMachine.TestCase
TestTurnMachine.settings = settings(stateful_step_count=25, deadline=None)
