"""Turns (SPEC.md section 2): one active per role (turns.one_active) and stale
completions refused, recorded and never applied (turns.stale_completion), with the
property that holds one active Turn per role and a due completion beating an exit."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers.turns import events_of, finished_task, running_task, turn_events
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tasktrail.domain import ManualClock, RuleViolation, Scheduler
from tasktrail.domain.turns.events import (
    TurnCompleted,
    TurnCompletionRefused,
    TurnExited,
    TurnFailed,
    TurnObservationDropped,
    TurnStalled,
    TurnStarted,
)
from tasktrail.domain.turns.refusals import StaleCompletion, TurnRuleViolation

ENDS = (TurnCompleted, TurnFailed, TurnExited, TurnStalled)


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
