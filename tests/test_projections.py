"""Read models: exactly-once catch-up, rebuild equals incremental, and the queries."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_properties import SEED_TASKS, apply, command, registry

from tasktrail.domain import ManualClock, Refused, Registry, Scheduler, TaskDefinition
from tasktrail.projections import Projector, ReadModel
from tasktrail.replay import replay
from tasktrail.replay.harness import crash as drop_scheduler


class SimulatedCrash(Exception):
    pass


def crash_at(point: str, batch: int):
    seen = {"batches": 0}

    def hook(where: str) -> None:
        if where == point:
            seen["batches"] += 1
            if seen["batches"] == batch:
                raise SimulatedCrash(f"crash at {where} of batch {batch}")

    return hook


@given(
    steps=st.lists(command, min_size=1, max_size=25),
    cuts=st.lists(st.integers(0, 30), max_size=4),
    crash=st.none() | st.tuples(st.sampled_from(["rows", "positions"]), st.integers(1, 3)),
    batch_size=st.integers(1, 7),
)
def test_incremental_with_crashes_equals_rebuild(steps, cuts, crash, batch_size) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store_path = Path(folder) / "trail.db"
        views = Path(folder) / "views.db"
        clock = ManualClock(0)
        scheduler = Scheduler.open(store_path, clock=clock, registry=registry())
        ids: list[str] = []
        projector = Projector(scheduler.store, views, batch_size=batch_size)
        if crash is not None:
            projector.crash_hook = crash_at(*crash)
        for index, step in enumerate(SEED_TASKS + steps):
            if step[0] in ("crash", "close"):
                continue
            with contextlib.suppress(Refused):
                apply(scheduler, ids, clock, step)
            if index in cuts:
                try:
                    projector.catch_up()
                except SimulatedCrash:
                    # The projecting process died mid-batch: a new one takes over.
                    projector = Projector(scheduler.store, views, batch_size=batch_size)
        projector = Projector(scheduler.store, views, batch_size=batch_size)
        projector.catch_up()
        assert projector.catch_up().noop  # a second run is a no-op
        assert set(projector.positions().values()) == {scheduler.store.head()}
        incremental = projector.table_checksums()
        rebuilt = Projector(scheduler.store, Path(folder) / "rebuilt.db")
        rebuilt.rebuild()
        assert rebuilt.table_checksums() == incremental
        audit_rows = rebuilt.db.execute("SELECT count(*) FROM audit").fetchone()[0]
        assert audit_rows == scheduler.store.head()  # one row per event, no gap or duplicate
        drop_scheduler(scheduler)


@pytest.fixture
def history(tmp_path: Path) -> tuple[Scheduler, ManualClock, dict[str, str]]:
    """A hand-built history with known answers."""
    clock = ManualClock(10_000)
    reg = Registry(
        [
            TaskDefinition("job", 1, {"start": lambda inv: "end", "end": lambda inv: None}),
            TaskDefinition("leaf", 1, {"go": lambda inv: inv.finish("completed")}),
        ]
    )
    s = Scheduler.open(tmp_path / "trail.db", clock=clock, registry=reg, restart_limit=2)
    ids = {}
    ids["owner"] = s.submit("job", id="owner")
    clock.advance(1)
    ids["a"] = s.submit("leaf", id="a", owner="owner")
    clock.advance(1)
    ids["b"] = s.submit("leaf", id="b", owner="owner")
    clock.advance(1)
    s.reserve("owner")
    s.wait("owner", ["a", "b"], "failFast", phase="end")
    ids["watcher"] = s.submit("job", id="watcher")
    clock.advance(1)
    s.reserve("watcher")
    s.wait("watcher", ["a"], "all")
    ids["early"] = s.submit("job", id="early")
    clock.advance(1)
    s.reserve("early")
    s.sleep("early", until=12_000)
    ids["late"] = s.submit("job", id="late")
    clock.advance(1)
    s.reserve("late")
    s.sleep("late", until=15_000)
    ids["ghost"] = s.submit("ghost", id="ghost", phase="x")
    clock.advance(1)
    s.reserve("a")
    s.finish("a", "completed")
    ids["done"] = s.submit("leaf", id="done")
    clock.advance(1)
    s.reserve("done")
    s.finish("done", "completed")
    return s, clock, ids


def test_queries_answer_a_known_history(history, tmp_path: Path) -> None:
    scheduler, clock, _ = history
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        model = ReadModel(projector)
        assert [t["task_id"] for t in model.live_tasks()] == [
            "owner",
            "b",
            "watcher",
            "early",
            "late",
            "ghost",
        ]
        assert [t["task_id"] for t in model.live_tasks("sleeping")] == ["early", "late"]
        assert model.counts_by_status() == {"waiting": 2, "pending": 2, "sleeping": 2}
        assert model.waiters("a") == [
            {"waiter_id": "owner", "policy": "failFast"},
            {"waiter_id": "watcher", "policy": "all"},
        ]
        assert model.waiters("b") == [{"waiter_id": "owner", "policy": "failFast"}]
        assert [t["task_id"] for t in model.owned("owner")] == ["b"]
        assert model.next_sleep_due() == {"task_id": "early", "until": 12_000}
        assert model.next_sleep_due(after=12_000) == {"task_id": "late", "until": 15_000}
        assert model.blocked(scheduler.registry) == [
            {"task_id": "ghost", "kind": "ghost", "reason": "missing_definition"}
        ]
        assert model.blocked() == []
        audit = model.audit("a")
        assert [r["event_type"] for r in audit] == ["TaskSubmitted", "TaskReserved", "TaskEnded"]
        assert [(r["status_before"], r["status_after"]) for r in audit] == [
            (None, "pending"),
            ("pending", "running"),
            ("running", "terminal"),
        ]
        assert [r["command"] for r in audit] == ["submit", "reserve", "finish"]
        assert model.wake(clock.now) == {"active": True, "at": 12_000}
    scheduler.close()


def test_audit_names_the_rule_that_applied(history, tmp_path: Path) -> None:
    scheduler, _, _ = history
    scheduler.abort("owner")  # cascades to b (rule 6)
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        rows = ReadModel(projector).audit("b")
    cascade = rows[-1]
    assert cascade["event_type"] == "AbortMarked"
    assert cascade["rule"] == 6 and cascade["command"] == "cascade"
    assert cascade["detail"] == {"reason": None, "by": "owner"}
    scheduler.close()


def test_terminal_tasks_leave_the_live_mirror(history, tmp_path: Path) -> None:
    scheduler, _, _ = history
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        assert "a" not in {t["task_id"] for t in ReadModel(projector).live_tasks()}
        scheduler.reserve("b")
        scheduler.finish("b", "failed")
        projector.catch_up()
        model = ReadModel(projector)
        assert model.waiters("b") == [{"waiter_id": "owner", "policy": "failFast"}]
        scheduler.reserve("owner")  # failFast woke: the waiters rows go
        projector.catch_up()
        assert model.waiters("b") == [] and model.waiters("a")[0]["waiter_id"] == "watcher"
    scheduler.close()


def test_projections_follow_a_postgres_store(
    postgres_url: str, tmp_path: Path, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(postgres_url, clock=clock, registry=registry)
    for _ in range(5):
        scheduler.submit("job")
    with Projector(postgres_url, tmp_path / "views.db", batch_size=3) as projector:
        assert projector.catch_up().read == 5
        scheduler.run_until_idle()
        report = projector.catch_up()
        assert report.read == scheduler.store.head() - 5
        assert ReadModel(projector).live_tasks() == []
        incremental = projector.table_checksums()
    with Projector(postgres_url, tmp_path / "rebuilt.db") as rebuilt:
        rebuilt.rebuild()
        assert rebuilt.table_checksums() == incremental
    scheduler.close()


def test_pending_wakeups_and_active_turns(tmp_path: Path, registry: Registry) -> None:
    clock = ManualClock(100_000)
    s = Scheduler.open(tmp_path / "t.db", clock=clock, registry=registry)
    s.submit("job", id="a")
    s.submit("job", id="b")
    s.request_wakeup("a", "mail")
    clock.advance(10)
    s.request_wakeup("a", "review")
    clock.advance(5)
    s.request_wakeup("b", "ping")
    turn = s.start_turn("b", "leader")  # b's leader is busy: its wakeup waits for the force window
    with Projector(s.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        model = ReadModel(projector)
        wakeups = {w["task_id"]: w for w in model.pending_wakeups()}
        assert wakeups["a"]["reasons"] == ["mail", "review"]
        assert wakeups["a"]["first_requested_at"] == 100_000
        assert wakeups["a"]["request_count"] == 2
        assert wakeups["b"]["reasons"] == ["ping"]
        assert [(t["task_id"], t["role"], t["turn_id"]) for t in model.active_turns()] == [
            ("b", "leader", turn)
        ]
        assert model.next_wakeup_deadline() == {
            "task_id": "a",
            "deadline": 160_000,
            "window": "aggregation",
        }
        clock.set(160_000)
        s.controller_pass()  # a's wakeup is dispatched: it starts a Leader Turn
        projector.catch_up()
        assert [w["task_id"] for w in model.pending_wakeups()] == ["b"]
        assert {t["task_id"] for t in model.active_turns()} == {"a", "b"}
        # b's Leader is busy, but its aggregation end (100_015 + 60_000) comes first.
        assert model.next_wakeup_deadline(now=clock.now) == {
            "task_id": "b",
            "deadline": 160_015,
            "window": "aggregation",
        }
        # Past it, b stays due there until a pass finds its Leader busy (yui's wake at
        # the aggregation end); then it is signalled again after the delivery backoff.
        assert model.next_wakeup_deadline(now=160_016)["deadline"] == 160_015  # type: ignore[index]
        clock.set(160_015)
        assert s.controller_pass().wakeups == {"b": "busy"}
        projector.catch_up()
        assert model.next_wakeup_deadline(now=160_015) == {
            "task_id": "b",
            "deadline": 160_015 + 250,
            "window": "resignal",
        }
        state_tables = replay(s.store).tables
        assert state_tables["pending_wakeups"].keys() == {"b"}
    s.close()
