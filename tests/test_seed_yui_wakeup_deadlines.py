"""yui's Leader wakeup deadlines where tasktrail once differed (issue 16; seeds 000/001
and 003): a busy Leader's wakeup answers its aggregation end first (defect 3), the Turn
settings that decide are in the log and replay decides with them (defect 7), and a wake
that finds the Leader busy is re-signalled with the delivery backoff. Each test names the
behaviour and fails when it breaks. The rules they hold are written down in
docs/seed-fidelity.md."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import orjson
from helpers.probes import of_type
from helpers.seed_yui import AGGREGATION, FORCE, Delivering
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition, next_deadline
from tasktrail.domain.turns.events import TurnSettingsChanged, WakeupFoundBusy
from tasktrail.domain.turns.settings import turn_settings_of
from tasktrail.domain.turns.state import LEADER
from tasktrail.projections import Projector, ReadModel
from tasktrail.replay import replay

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
