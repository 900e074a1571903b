"""yui's Turns, fourth round (seed 001, yui 0.13.9 -> 0.14.0: Runs renamed Turns): one
active Turn per role, due completions before liveness, which delivery outcomes fence
exit liveness, delivery retries to exhaustion and what follows it, completions of
Turns already ended. Each test names the seed behaviour and fails when it breaks.
docs/seed-fidelity.md, "Round four (Turns)", says what changed."""

from __future__ import annotations

import pytest
from helpers.probes import Answers, of_type

from tasktrail.domain import ManualClock, Scheduler, Worker
from tasktrail.domain.turns.events import (
    RuntimeCleanupRequired,
    TurnCompleted,
    TurnCompletionRefused,
    TurnDeliveryFailed,
    TurnExited,
    TurnFailed,
    TurnStalled,
)
from tasktrail.domain.turns.refusals import StaleCompletion, TurnRuleViolation
from tasktrail.domain.turns.state import LEADER

AGGREGATION = 60_000  # yui's LEADER_WAKE_AGGREGATION_MS, tasktrail's default


# ─── one active Turn per role ───────────────────────────────────────────────────


def test_yui_second_start_of_a_role_is_refused_until_its_turn_is_judged_ended(
    scheduler: Scheduler,
) -> None:
    # yui: ``getActiveTurn(task, role) !== null`` means the role is busy (a wake finds
    # the Leader ``busy``); an exit the runtime saw ends the Turn only when liveness
    # judges it in a pass, so until then the role has its one active Turn.
    task = scheduler.submit("job", id="t1")
    first = scheduler.start_turn(task, LEADER)
    assert scheduler.start_turn(task, "reviewer") == "reviewer.1"  # another role: its own lane
    scheduler.observe_exit(task, LEADER, first)
    head = scheduler.store.head()
    with pytest.raises(TurnRuleViolation) as refused:
        scheduler.start_turn(task, LEADER)
    assert refused.value.rule == "turns.one_active"
    assert scheduler.store.head() == head
    assert scheduler.controller_pass().turns == {task: {LEADER: "exited"}}
    assert scheduler.start_turn(task, LEADER) == "leader.2"
    reviewer = scheduler.active_turn(task, "reviewer")
    assert reviewer is not None and reviewer.turn_id == "reviewer.1"  # left alone


def test_yui_second_start_folds_the_first_turns_due_completion(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # Due native Turn completions are folded first: a completion that is due ends the
    # Turn, so the role is idle and its next Turn starts.
    task = scheduler.submit("job", id="t1")
    first = scheduler.start_turn(task, "worker")
    assert scheduler.complete_turn(task, "worker", first, due_at=clock.now + 100) == "pending"
    with pytest.raises(TurnRuleViolation):  # not due yet: still the active Turn
        scheduler.start_turn(task, "worker")
    clock.advance(100)
    assert scheduler.start_turn(task, "worker") == "worker.2"
    (completed,) = of_type(scheduler, TurnCompleted)
    assert (completed.turn_id, completed.cause) == (first, "turns.completion_due")


def test_yui_every_due_completion_of_a_task_is_folded_before_any_liveness(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # The pass folds due Turn completions as a phase before its exit and stall
    # reconciliation, across roles: the log shows the completions first.
    task = scheduler.submit("job", id="t1")
    exiting = scheduler.start_turn(task, "builder")  # the first role the task has
    finishing = scheduler.start_turn(task, "reviewer")
    scheduler.complete_turn(task, "reviewer", finishing, due_at=clock.now + 100)
    scheduler.observe_exit(task, "builder", exiting)
    clock.advance(100)
    report = scheduler.controller_pass()
    assert report.turns == {task: {"reviewer": "completed", "builder": "exited"}}
    ends = [
        (type(r.event).__name__, r.event.turn_id)  # type: ignore[attr-defined]
        for r in scheduler.store.read()
        if isinstance(r.event, TurnCompleted | TurnExited)
    ]
    assert ends == [("TurnCompleted", finishing), ("TurnExited", exiting)]


# ─── which delivery outcomes fence exit liveness ─────────────────────────────────


@pytest.mark.parametrize(
    "outcome",
    ["delivered", "already-delivered", "not-ready", "runtime-unavailable", "writer-attached"],
)
def test_yui_only_delivery_uncertain_exempts_a_turn_from_exit_liveness(
    scheduler: Scheduler, outcome: str
) -> None:
    # yui 0.14.0 keeps out of exit liveness only the Turns whose delivery in the pass
    # was ``delivery-uncertain`` (0.13.9 also kept a prepared Turn with a terminal
    # failure). A Turn answered otherwise, with an exit seen, ends ``exited``.
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    scheduler.observe_exit(task, "worker", turn)
    report = scheduler.controller_pass(runtime=Answers(outcome))
    assert report.turns == {task: {"worker": "exited"}}
    (exited,) = of_type(scheduler, TurnExited)
    assert exited.turn_id == turn


def test_yui_delivery_uncertain_turn_is_still_judged_by_stall_liveness(
    scheduler: Scheduler,
) -> None:
    # The unsettled Turns are handed to the exit reconciliation only; the stall
    # reconciliation that follows judges them like any other.
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    scheduler.observe_exit(task, "worker", turn)
    scheduler.observe_stall(task, "worker", turn)
    report = scheduler.controller_pass(runtime=Answers("delivery-uncertain"))
    assert report.turns == {task: {"worker": "stalled"}}
    assert of_type(scheduler, TurnExited) == []


# ─── delivery retries and their exhaustion ──────────────────────────────────────


def test_yui_delivery_retries_back_off_then_exhaustion_fails_the_turn(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # ``not-ready`` / ``runtime-unavailable`` put the role on the retry timer,
    # min(2000, base * 2**min(attempt, 3)) ms; past the limit the delivery failure is
    # recorded and the Turn ends failed.
    scheduler.configure_turns(delivery_retry_limit=4)
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = Answers("runtime-unavailable")
    waits = []
    started = clock.now
    while scheduler.active_turn(task, "worker") is not None:
        report = scheduler.controller_pass(runtime=runtime)
        due = scheduler.next_turn_deadline()
        if scheduler.active_turn(task, "worker") is None:
            break
        assert due is not None
        waits.append(due - clock.now)
        clock.set(due)
    assert runtime.tried == [(turn, attempt) for attempt in range(5)]
    assert waits == [250, 500, 1000, 2000]
    assert clock.now == started + 3750
    assert report.turns == {task: {"worker": "failed"}}
    (failure,) = of_type(scheduler, TurnDeliveryFailed)
    assert (failure.attempts, failure.outcome) == (5, "runtime-unavailable")
    (ended,) = of_type(scheduler, TurnFailed)
    assert (ended.turn_id, ended.reason) == (turn, "delivery_exhausted")


def test_yui_leader_turn_failed_by_exhaustion_lets_its_wakeup_start_the_next_turn(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # A terminalized delivery settles the role's retry and signals the role again:
    # the wakeup that waited for the busy Leader starts the next Turn, whose
    # delivery attempts are its own (the retry's identity is the Turn).
    scheduler.configure_turns(delivery_retry_limit=1)
    task = scheduler.submit("job", id="t1")
    first = scheduler.start_turn(task, LEADER)
    runtime = Answers("not-ready")
    scheduler.controller_pass(runtime=runtime)  # attempt 0: retry at +250
    scheduler.request_wakeup(task, "operator wrote")
    clock.advance(AGGREGATION)
    report = scheduler.controller_pass(runtime=runtime)  # attempt 1: exhausted
    assert report.turns == {task: {LEADER: "failed"}}
    assert report.wakeups == {task: "dispatched"}
    leader = scheduler.active_turn(task, LEADER)
    assert leader is not None and leader.turn_id == "leader.2"
    assert runtime.tried == [(first, 0), (first, 1), ("leader.2", 0)]
    assert leader.delivery_attempts == 1 and leader.retry_at == clock.now + 250


def test_yui_due_completion_wins_over_delivery_exhaustion(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # Terminalizing a Turn whose retries ran out is destructive; a completion due by
    # then was folded first, so the Turn ends completed and no delivery failure is
    # recorded.
    scheduler.configure_turns(delivery_retry_limit=1)
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = Answers("not-ready")
    scheduler.controller_pass(runtime=runtime)  # attempt 0: retry at +250
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 100)
    clock.advance(250)
    report = scheduler.controller_pass(runtime=runtime)  # attempt 1 would exhaust
    assert report.turns == {task: {"worker": "completed"}}
    assert of_type(scheduler, TurnDeliveryFailed) == [] and of_type(scheduler, TurnFailed) == []
    (completed,) = of_type(scheduler, TurnCompleted)
    assert (completed.turn_id, completed.cause) == (turn, "turns.completion_due")


# ─── completions of Turns already ended ─────────────────────────────────────────


def _ended_turn(scheduler: Scheduler, clock: ManualClock, task: str, how: str) -> str:
    turn = scheduler.start_turn(task, "worker")
    if how == "exited":
        scheduler.observe_exit(task, "worker", turn)
        scheduler.controller_pass()
    elif how == "stalled":
        scheduler.configure_turns(stall_window_ms=1_000, stall_diagnostic_ms=1_000)
        clock.advance(1_000)
        scheduler.controller_pass()
    elif how == "failed":
        scheduler.fail_turn(task, "worker", turn, reason="runtime crashed")
    else:
        scheduler.complete_turn(task, "worker", turn)
    last = scheduler.roles(task)["worker"].last
    assert last is not None and last.status == how
    return turn


@pytest.mark.parametrize("how", ["exited", "stalled", "failed", "completed"])
def test_yui_completion_of_an_ended_turn_is_refused_and_recorded(
    scheduler: Scheduler, clock: ManualClock, how: str
) -> None:
    task = scheduler.submit("job", id="t1")
    turn = _ended_turn(scheduler, clock, task, how)
    with pytest.raises(StaleCompletion) as stale:
        scheduler.complete_turn(task, "worker", turn)
    assert stale.value.active_turn_id is None
    (refusal,) = of_type(scheduler, TurnCompletionRefused)
    assert (refusal.turn_id, refusal.active_turn_id) == (turn, None)
    last = scheduler.roles(task)["worker"].last
    assert last is not None and last.status == how  # never applied


def test_yui_completion_not_yet_due_does_not_fence_an_exit(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # Only a *due* completion fences destructive liveness. One reported for later
    # does not; once the Turn has exited it is never applied, and makes no deadline.
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    scheduler.deliver_turn(task, "worker", turn, "delivered")
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 5_000)
    scheduler.observe_exit(task, "worker", turn)
    assert scheduler.controller_pass().turns == {task: {"worker": "exited"}}
    clock.advance(5_000)
    assert scheduler.controller_pass().turns == {}
    assert of_type(scheduler, TurnCompleted) == []
    assert scheduler.next_turn_deadline() is None


# ─── idle-role stop ─────────────────────────────────────────────────────────────


def test_yui_stopping_a_role_named_twice_stops_it_once(scheduler: Scheduler) -> None:
    # ``stopTaskRoleSessions`` walks the distinct role names (``new Set(roleNames)``):
    # one cleanup per role, in the order first named.
    task = scheduler.submit("job", id="t1")
    for role in ("worker", "reviewer"):
        scheduler.complete_turn(task, role, scheduler.start_turn(task, role))
    assert scheduler.stop_roles(task, ["reviewer", "worker", "reviewer"]) == ["reviewer", "worker"]
    required = of_type(scheduler, RuntimeCleanupRequired)
    assert [(r.role, r.cause) for r in required] == [
        ("reviewer", "cleanup.role_stopped"),
        ("worker", "cleanup.role_stopped"),
    ]


# ─── an observed exit or stall is work for the next pass ────────────────────────


@pytest.mark.parametrize("kind", ["exit", "stall"])
def test_yui_worker_judges_an_observed_turn_end_at_its_next_tick(
    scheduler: Scheduler, clock: ManualClock, kind: str
) -> None:
    # yui reconciles liveness in every pass it runs; tasktrail's Worker runs a
    # controller pass only when Turn work is due. A recorded exit or stall is such
    # work: the pass ends the Turn (and frees the role for its next Turn).
    task = scheduler.submit("crew", id="t1", phase="lead")  # no phases here to run
    turn = scheduler.start_turn(task, "worker")
    worker = Worker(scheduler, runtime=Answers("delivered"))
    worker.tick()  # delivered: nothing due until its stall diagnostic
    due = scheduler.next_turn_deadline()
    assert due is not None and due > clock.now
    clock.advance(1_000)
    if kind == "exit":
        scheduler.observe_exit(task, "worker", turn)
    else:
        scheduler.observe_stall(task, "worker", turn)
    assert scheduler.next_turn_deadline() == clock.now
    worker.tick()
    assert scheduler.active_turn(task, "worker") is None
    ended = of_type(scheduler, TurnExited if kind == "exit" else TurnStalled)
    assert [e.turn_id for e in ended] == [turn]


def test_yui_exit_of_a_turn_held_delivery_uncertain_makes_no_pass_due(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # The edge of the rule above: ``delivery-uncertain`` fences the exit, and a held
    # Turn makes no pass due by itself (round two), so its exit waits for a pass run
    # for another reason instead of a Worker polling it.
    task = scheduler.submit("crew", id="t1", phase="lead")
    turn = scheduler.start_turn(task, "worker")
    scheduler.observe_exit(task, "worker", turn)
    assert scheduler.controller_pass(runtime=Answers("delivery-uncertain")).turns == {}
    due = scheduler.next_turn_deadline()
    assert due is not None and due > clock.now
    # Offered again by a later pass and answered otherwise, the exit ends it.
    assert scheduler.controller_pass(runtime=Answers("not-ready")).turns == {
        task: {"worker": "exited"}
    }
