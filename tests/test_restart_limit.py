"""The restart limit decides (rules 9 and 12), so it is recorded: a ``RestartLimitChanged``
on the ``settings:restarts`` stream, folded like the Turn and run settings. Every worker
of a fleet and every replay measure parked tasks against the limit the log recorded by
their position; an old log (none recorded) folds to the default, 3."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import crash
from fixtures.make_first_release import STORE

from tasktrail.domain import (
    ConflictError,
    InvalidArgument,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
)
from tasktrail.domain.tasks.restart_limit import RestartLimitChanged
from tasktrail.projections import Projector, ReadModel
from tasktrail.replay import explain, replay
from tasktrail.replay.cli import main
from tasktrail.replay.report import gather


def opened(url: str, clock: ManualClock, registry: Registry, worker: str, **kw: Any) -> Scheduler:
    return Scheduler.open(url, clock=clock, registry=registry, worker=worker, **kw)


def limit_changes(location: str | Scheduler) -> list[int]:
    """The limits recorded, in log order."""
    state = replay(location.store if isinstance(location, Scheduler) else location)
    return [orjson.loads(row["detail"])["limit"] for row in state.audit if row["task_id"] == ""]


def crashed_twice(url: str, clock: ManualClock, registry: Registry, **kw: Any) -> tuple[Any, str]:
    """Worker ``w`` with a task cut off twice (restarts 2), open again."""
    s = opened(url, clock, registry, "w", **kw)
    task = s.submit("job")
    for _ in range(2):
        s.reserve(task)
        crash(s)
        s = opened(url, clock, registry, "w", **kw)
    assert s.task(task).restarts == 2
    return s, task


def test_workers_opened_with_different_limits_decide_the_same_at_the_limit(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    a, task = crashed_twice(store_url, clock, registry, restart_limit=2)
    assert a.parked == [task] and a.blocked_reason(task) == "restart_limit"
    b = opened(store_url, clock, registry, "b", restart_limit=5)  # recorded: one event
    try:
        # Both decide with the limit recorded last: the task is not parked for either.
        assert a.restart_limit == b.restart_limit == 5
        assert a.blocked_reason(task) is None and b.blocked_reason(task) is None
        assert a.reserve(task) == "run"
        assert limit_changes(b) == [2, 5]
        c = opened(store_url, clock, registry, "c", restart_limit=5)  # the same: nothing
        assert limit_changes(c) == [2, 5] and c.restart_limit == 5
        c.close()
    finally:
        b.close()
        a.close()


def test_a_limit_one_worker_lowers_parks_for_another_and_a_raised_one_unparks(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    w, task = crashed_twice(store_url, clock, registry)
    other = opened(store_url, clock, registry, "other")  # no limit: the store's
    try:
        assert other.blocked_reason(task) is None
        w.configure_restarts(2)
        assert other.blocked_reason(task) == "restart_limit"
        with pytest.raises(RuleViolation) as refused:
            other.reserve(task)
        assert refused.value.rule == 9
        assert other.run_pass().reserved == []
        w.restart_limit = 4  # the setter records too
        # A raised limit unparks at the next pass, for every worker.
        assert other.run_pass().reserved == [task]
        assert other.task(task).outcome.status == "completed"  # type: ignore[union-attr]
        assert limit_changes(other) == [2, 4]
    finally:
        other.close()
        w.close()


def test_rule_12_an_abort_handler_ends_faulted_at_the_limit_another_worker_recorded(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    w, task = crashed_twice(store_url, clock, registry, restart_limit=5)
    w.abort(task)  # the mark resets restarts: cut-offs of the handler count from 0
    w.reserve(task)
    crash(w)
    w = opened(store_url, clock, registry, "w")
    other = opened(store_url, clock, registry, "other")
    try:
        assert w.task(task).restarts == 1 and w.task(task).status == "pending"
        w.configure_restarts(1)
        other.run_pass()
        outcome = other.task(task).outcome
        assert outcome is not None and (outcome.status, outcome.reason) == (
            "faulted",
            "restart_limit",
        )
    finally:
        other.close()
        w.close()


def test_replay_tasks_report_explain_and_the_live_mirror_tell_parked_as_of_their_position(
    sqlite_url: str,
    clock: ManualClock,
    registry: Registry,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    s, task = crashed_twice(sqlite_url, clock, registry, restart_limit=2)
    parked_at = s.store.head()
    s.configure_restarts(3)
    s.close()

    before, after = replay(sqlite_url, until=parked_at), replay(sqlite_url)
    assert (before.restart_limit, before.parked) == (2, [task])
    assert (after.restart_limit, after.parked) == (3, [])
    assert gather(sqlite_url, task, until=parked_at).blocked == {task: "restart_limit"}
    data = gather(sqlite_url, task)
    assert data.blocked == {} and data.restart_limit == 3
    assert gather(sqlite_url).restart_limit == 3
    parked_steps = [step for step in explain(sqlite_url, task) if step.why.endswith("parked")]
    assert [step.position for step in parked_steps] == [parked_at]  # the second recovery
    assert "restart_limit 2" in parked_steps[0].why

    assert main(["replay", sqlite_url, "--until", str(parked_at)]) == 0
    assert "parked (restart_limit 2)" in capsys.readouterr().out
    assert main(["replay", sqlite_url, "--json"]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert (shown["restart_limit"], shown["parked"]) == (3, [])
    assert main(["tasks", sqlite_url]) == 0
    assert "parked" not in capsys.readouterr().out

    with Projector(sqlite_url, tmp_path / "views.db") as projector:
        projector.catch_up()
        model = ReadModel(projector)
        assert model.restart_limit() == 3 and model.blocked() == []
        assert model.blocked(restart_limit=2) == [
            {"task_id": task, "kind": "job", "reason": "restart_limit"}
        ]

    s = opened(sqlite_url, clock, registry, "w", restart_limit=1)
    s.close()  # its snapshot holds the limit: tasks reads the snapshot and the tail
    assert main(["tasks", sqlite_url]) == 0
    assert "parked (restart_limit 1)" in capsys.readouterr().out
    assert main(["tasks", sqlite_url, "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["blocked"] == "restart_limit"
    with Projector(sqlite_url, tmp_path / "views.db") as projector:
        projector.catch_up()
        model = ReadModel(projector)
        assert model.restart_limit() == 1 and [row["task_id"] for row in model.blocked()] == [task]


def test_the_limit_survives_a_snapshot(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = opened(store_url, clock, registry, "w", restart_limit=7)
    s.submit("job")
    s.snapshot()
    s.close()
    s = opened(store_url, clock, registry, "w")
    try:
        assert s.snapshot_at > 0 and s.restart_limit == 7
    finally:
        s.close()


def test_an_old_store_opened_without_a_limit_uses_3_and_records_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    copy = tmp_path / "first-release.db"
    shutil.copy(STORE, copy)
    s = Scheduler.open(str(copy), clock=clock, registry=Registry(), worker="w")
    try:
        assert s.restart_limit == 3
        assert not [e for e in replay(s.store).audit if e["event_type"] == "RestartLimitChanged"]
    finally:
        s.close()
    assert replay(str(copy)).restart_limit == 3
    again = Scheduler.open(str(copy), clock=clock, worker="w", restart_limit=3)  # the default
    head = again.store.head()
    again.close()
    assert limit_changes(str(copy)) == [] and head > 0


def test_a_refused_limit_appends_nothing(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = opened(store_url, clock, registry, "w")
    try:
        head = s.store.head()
        for bad in (0, -1, True, 2.0, "3", None):
            with pytest.raises(InvalidArgument, match="restart_limit must be an int >= 1"):
                s.configure_restarts(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="restart_limit must be an int >= 1"):
            s.restart_limit = 0
        assert s.configure_restarts(3) == 3  # the one in force: nothing to record
        assert s.store.head() == head and s.restart_limit == 3
    finally:
        s.close()
    with pytest.raises(InvalidArgument, match="restart_limit must be an int >= 1, not 0"):
        opened(store_url, clock, registry, "w", restart_limit=0)
    assert limit_changes(store_url) == []


def test_a_recorded_limit_a_tasktrail_would_not_record_is_a_corrupt_event() -> None:
    from tasktrail.domain import World
    from tasktrail.domain.errors import CorruptEvent

    world = World()
    world.apply_stored(1, RestartLimitChanged(task_id="", at=0, limit=4), 1)
    with pytest.raises(CorruptEvent, match="position 2"):
        world.apply_stored(2, RestartLimitChanged(task_id="", at=0, limit=0), 2)


def refused_on_a_stale_limit(
    w: Scheduler,
    other: Scheduler,
    limit: int,
    command: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``other`` runs ``command`` on the limit it folded while ``w`` records ``limit`` (the
    window between a decision's refresh and its append, which no turn closes on
    PostgreSQL): refused, nothing appended; then ``other`` folds again as usual."""
    monkeypatch.setattr(other, "refresh", lambda: 0)
    w.configure_restarts(limit)
    head = w.store.head()
    with pytest.raises(ConflictError):
        command()
    assert w.store.head() == head
    monkeypatch.undo()


def test_a_reservation_on_a_limit_another_writer_lowered_meanwhile_is_refused(
    store_url: str, clock: ManualClock, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, task = crashed_twice(store_url, clock, registry)
    other = opened(store_url, clock, registry, "other")
    try:
        assert other.restart_limit == 3
        # Lowered to 2, the task is parked: decided with 3, it would run.
        refused_on_a_stale_limit(w, other, 2, lambda: other.reserve(task), monkeypatch)
        with pytest.raises(RuleViolation) as refused:
            other.reserve(task)
        assert refused.value.rule == 9 and other.task(task).status == "pending"
    finally:
        other.close()
        w.close()


def test_a_retry_on_a_limit_another_writer_raised_meanwhile_is_refused(
    store_url: str, clock: ManualClock, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, task = crashed_twice(store_url, clock, registry, restart_limit=2)
    other = opened(store_url, clock, registry, "other")
    try:
        # Raised to 5, the task is not parked: a retry has nothing to clear.
        refused_on_a_stale_limit(w, other, 5, lambda: other.retry(task), monkeypatch)
        assert other.retry(task) is False and other.task(task).restarts == 2
    finally:
        other.close()
        w.close()


def test_rule_12_on_a_limit_another_writer_raised_meanwhile_is_refused(
    store_url: str, clock: ManualClock, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, task = crashed_twice(store_url, clock, registry, restart_limit=5)
    w.abort(task)
    w.reserve(task)
    crash(w)
    w = opened(store_url, clock, registry, "w", restart_limit=1)
    other = opened(store_url, clock, registry, "other")
    try:
        assert other.task(task).restarts == 1 and other.restart_limit == 1
        # Raised to 5, the handler may run again: decided with 1, it would end faulted.
        refused_on_a_stale_limit(w, other, 5, lambda: other.reserve(task), monkeypatch)
        assert other.reserve(task) == "abort" and other.task(task).outcome is None
    finally:
        other.close()
        w.close()


def test_explain_does_not_call_an_abandoned_task_parked(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = opened(sqlite_url, clock, registry, "w", restart_limit=1)
    task = s.submit("job", abandon_on_restart=True)
    s.reserve(task)
    crash(s)
    s = opened(sqlite_url, clock, registry, "w")
    try:
        # Recovered at the limit (restarts 1), but abandoned (abort-marked): not parked.
        assert s.parked == [] and s.task(task).abort_requested
    finally:
        s.close()
    steps = explain(sqlite_url, task)
    assert [step for step in steps if step.why.endswith("parked")] == []
    assert replay(sqlite_url).parked == []
