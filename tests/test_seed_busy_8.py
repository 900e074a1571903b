"""Round eight of the yui Leader wakeup audit (seeds 000 and 001): a wake that finds the
Leader busy is re-signalled per busy Leader Turn. yui puts such a wake on the Leader's
delivery retry timer with the busy Turn as the retry's identity (001,
``#scheduleDeliveryRetries``), and its controller starts a retry whose identity changed
over from attempt 0 (000, ``#scheduleTaskPassRetry``). docs/seed-fidelity.md, "Round
eight (a busy Leader's re-signals, per Leader Turn)", says what changed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers.checks import folded_rows
from helpers.probes import Answers, busy_leader, of_type

from tasktrail.domain import ManualClock, Registry, Scheduler
from tasktrail.domain.turns.events import WakeupFoundBusy, wakeup_stream_id
from tasktrail.domain.turns.settings import TurnSettings
from tasktrail.domain.turns.state import LEADER
from tasktrail.projections import Projector, ReadModel
from tasktrail.replay import replay

AGGREGATION = TurnSettings().aggregation_window_ms  # yui's LEADER_WAKE_AGGREGATION_MS
FORCE = TurnSettings().force_window_ms  # yui's LEADER_WAKE_FORCE_MS


def _found_busy_twice(scheduler: Scheduler, clock: ManualClock) -> tuple[str, str]:
    """A task whose wakeup found its Leader Turn busy at the aggregation end and at the
    first re-signal (attempts 0 and 1); returns the task and that Turn."""
    task = scheduler.submit("job", id="t1")
    busy = busy_leader(scheduler, task)
    first_at = clock.now
    scheduler.request_wakeup(task, "mail")
    clock.set(first_at + AGGREGATION)
    assert scheduler.controller_pass().wakeups == {task: "busy"}
    clock.set(first_at + AGGREGATION + 250)
    assert scheduler.controller_pass().wakeups == {task: "busy"}
    return task, busy


def _found(scheduler: Scheduler) -> list[tuple[str, int, float | None]]:
    return [(f.turn_id, f.attempt, f.resignal_at) for f in of_type(scheduler, WakeupFoundBusy)]


def test_yui_wakeup_finding_a_new_busy_leader_turn_resignals_it_at_the_first_backoff(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries`` (a busy wake's retry has the busy Turn as its
    identity) and 000 ``#scheduleTaskPassRetry`` (a retry whose identity changed starts
    over at attempt 0): Turn A found busy twice ends, Turn B starts before any pass
    saw the Leader idle; the pass that A's re-signal runs finds B busy and signals it
    again after the first backoff (250 ms), not the third (1000 ms)."""
    task, turn_a = _found_busy_twice(scheduler, clock)
    second_at = clock.now
    clock.advance(10)
    scheduler.complete_turn(task, LEADER, turn_a)
    turn_b = busy_leader(scheduler, task)  # a host's own start, before the next pass
    # A's re-signal is still the one armed (yui's timer of identity A fires then).
    assert scheduler.next_turn_deadline() == second_at + 500
    clock.set(second_at + 500)
    assert scheduler.controller_pass().wakeups == {task: "busy"}
    assert _found(scheduler)[-1] == (turn_b, 0, clock.now + 250)
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None
    assert (wakeup.busy_turn_id, wakeup.busy_attempts) == (turn_b, 1)
    assert scheduler.next_turn_deadline() == clock.now + 250
    clock.set(clock.now + 250)  # B stays busy: it counts on, 500 ms next
    assert scheduler.controller_pass().wakeups == {task: "busy"}
    assert _found(scheduler)[-1] == (turn_b, 1, clock.now + 500)


def test_yui_new_busy_leader_turn_resignals_from_attempt_zero_after_the_limit_was_used(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries`` / 000 ``#scheduleTaskPassRetry``: the retries of
    Turn A ran out (only the force end was left); the pass that delivers the next Leader
    Turn B finds it busy, and B gets its own re-signals from attempt 0."""
    scheduler.configure_turns(delivery_retry_limit=2)
    task, turn_a = _found_busy_twice(scheduler, clock)
    clock.advance(500)  # A's second re-signal, the last the limit allows
    assert scheduler.controller_pass().wakeups == {task: "busy"}
    assert _found(scheduler)[-1] == (turn_a, 2, None)  # the limit is used up on A
    first_at = clock.now - AGGREGATION - 750
    assert scheduler.next_turn_deadline() == first_at + FORCE
    clock.advance(10)
    scheduler.complete_turn(task, LEADER, turn_a)
    turn_b = scheduler.start_turn(task, LEADER)  # undelivered: due now
    assert scheduler.next_turn_deadline() == clock.now
    assert scheduler.controller_pass(runtime=Answers("delivered")).wakeups == {task: "busy"}
    assert _found(scheduler)[-1] == (turn_b, 0, clock.now + 250)
    assert scheduler.next_turn_deadline() == clock.now + 250


def test_yui_wakeup_that_keeps_finding_the_same_turn_busy_keeps_counting(
    scheduler: Scheduler, clock: ManualClock, tmp_path: Path
) -> None:
    """001 ``#scheduleDeliveryRetries``: while the busy Turn (the retry's identity) stays
    the same, its re-signals back off 250, 500, 1000, 2000 ms, a pass run for another
    reason before the re-signal is due records nothing (yui's timer is armed), and a
    request joining the wakeup keeps the Turn it found busy."""
    task, busy = _found_busy_twice(scheduler, clock)
    clock.advance(100)
    assert scheduler.request_wakeup(task, "review") == "aggregated"
    assert scheduler.controller_pass().wakeups == {task: "busy"}  # not due: nothing new
    for _ in range(2):
        due = scheduler.next_turn_deadline()
        assert due is not None
        clock.set(due)
        assert scheduler.controller_pass().wakeups == {task: "busy"}
    found = of_type(scheduler, WakeupFoundBusy)
    assert [(f.turn_id, f.attempt) for f in found] == [(busy, n) for n in range(4)]
    assert [f.resignal_at - f.at for f in found if f.resignal_at] == [250, 500, 1000, 2000]
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None and (wakeup.busy_turn_id, wakeup.busy_attempts) == (busy, 4)
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        (row,) = ReadModel(projector).pending_wakeups()
        assert (row["busy_turn_id"], row["busy_attempts"]) == (busy, 4)


def test_yui_replay_and_the_live_scheduler_agree_on_a_new_busy_leader_turn(
    scheduler: Scheduler, clock: ManualClock, registry: Registry, sqlite_url: str, tmp_path: Path
) -> None:
    """001 ``#scheduleDeliveryRetries``: what a new busy Leader Turn restarts is folded
    from the log alike by the live scheduler, its live read model, a replay and a
    scheduler opened from a snapshot."""
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        model = ReadModel(projector)
        task, turn_a = _found_busy_twice(scheduler, clock)
        projector.catch_up()
        clock.advance(10)
        scheduler.complete_turn(task, LEADER, turn_a)
        turn_b = busy_leader(scheduler, task)
        clock.advance(490)
        assert scheduler.controller_pass().wakeups == {task: "busy"}
        projector.catch_up()
        (live,) = folded_rows(projector, "pending_wakeups")
        assert (live["busy_turn_id"], live["busy_attempts"], live["resignal_at"]) == (
            turn_b,
            1,
            clock.now + 250,
        )
        assert model.next_wakeup_deadline(clock.now) == {
            "task_id": task,
            "deadline": scheduler.next_turn_deadline(),
            "window": "resignal",
        }
    state = replay(scheduler.store)
    assert state.pending_wakeups == [live]
    assert state.world.streams[wakeup_stream_id(task)] == scheduler.pending_wakeup(task)
    scheduler.snapshot()
    reopened = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    try:
        assert reopened.pending_wakeup(task) == scheduler.pending_wakeup(task)
        assert reopened.next_turn_deadline() == scheduler.next_turn_deadline()
    finally:
        reopened.close()


def test_yui_pending_wakeup_row_an_earlier_release_wrote_still_reads(
    scheduler: Scheduler, clock: ManualClock, tmp_path: Path
) -> None:
    """A read-model file whose ``pending_wakeups`` table an earlier release made (no
    ``busy_turn_id``): opened by this release, its row reads, the Turn it found busy
    unknown, its deadline as it was; the row's next change writes the Turn."""
    task, busy = _found_busy_twice(scheduler, clock)
    views = tmp_path / "views.db"
    with Projector(scheduler.store, views) as projector:
        projector.catch_up()
    with sqlite3.connect(views) as conn:  # as the earlier release left the table
        conn.execute("ALTER TABLE pending_wakeups DROP COLUMN busy_turn_id")
    with Projector(scheduler.store, views) as projector:
        model = ReadModel(projector)
        assert projector.catch_up().noop  # the row stays as the earlier release wrote it
        (row,) = model.pending_wakeups()
        assert (row["busy_turn_id"], row["busy_attempts"]) == (None, 2)
        assert model.next_wakeup_deadline(clock.now) == {
            "task_id": task,
            "deadline": clock.now + 500,
            "window": "resignal",
        }
        clock.advance(500)
        assert scheduler.controller_pass().wakeups == {task: "busy"}
        projector.catch_up()
        (row,) = model.pending_wakeups()
        assert (row["busy_turn_id"], row["busy_attempts"]) == (busy, 3)
