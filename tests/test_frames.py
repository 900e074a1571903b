"""``tasktrail.replay.frames``: the same columns and dtypes for any log, an empty one too;
nullable ``Int64`` where a value can be missing; categoricals for statuses and event
types (issue 18); kinds, phases and triggers as categoricals, a missing task id as NA,
flags as booleans and a timezone-aware datetime beside every ms time (issue 29)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tasktrail.domain import (
    InMemoryExecutor,
    ManualClock,
    Registry,
    RunSettings,
    Scheduler,
    TaskDefinition,
)
from tasktrail.domain.tasks.events import EVENT_TYPES
from tasktrail.replay import frames, replay


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An empty store, and a busy one: live tasks of every kind of status, runs, Turns."""
    folder = tmp_path_factory.mktemp("frames")
    empty, busy = folder / "empty.db", folder / "busy.db"
    Scheduler.open(empty, clock=ManualClock(0)).close()
    clock = ManualClock(1_767_603_600_000)
    phases = {"start": lambda t: None, "gather": lambda t: None}
    s = Scheduler.open(busy, clock=clock, registry=Registry([TaskDefinition("job", 1, phases)]))
    owner = s.submit("job", phase="start", id="owner")
    child = s.submit("job", phase="start", owner=owner, id="child")
    s.reserve(owner)
    s.checkpoint(owner, "gather")
    s.wait(owner, on=[child], policy="all")
    sleeper = s.submit("job", phase="start", id="sleeper")
    s.reserve(sleeper)
    s.sleep(sleeper, until=clock.now + 60_000)
    done = s.submit("job", phase="start", id="done")
    s.reserve(done)
    s.finish(done, "failed", error={"message": "boom"})
    s.reserve(child)  # left running
    s.submit("job", phase="start", id="queued")  # left pending
    s.configure_restarts(5)  # an event of a settings stream: no task id
    s.start_turn(owner, "leader")
    s.configure_runs(executor=InMemoryExecutor(), settings=RunSettings(tz="UTC"))
    s.mint_run(sleeper)
    clock.advance(1_000)
    s.dispatch_due()
    s.store.close()  # a crash: the running task stays running in the log
    return {"empty": empty, "busy": busy}


FRAMES: dict[str, Callable[[Any], pd.DataFrame]] = {
    "events": frames.events,
    "audit": frames.audit,
    "live": frames.live,
    "ledger": frames.ledger,
    "tasks": frames.tasks,
    "phase_durations": frames.phase_durations,
}


OPEN_CATEGORICALS = {"kind", "phase"}  # their categories are the log's own values


def _schema(frame: pd.DataFrame) -> list[tuple[str, str, Any]]:
    return [
        (
            str(name),
            str(dtype),
            list(dtype.categories)
            if dtype == "category" and name not in OPEN_CATEGORICALS
            else None,
        )
        for name, dtype in frame.dtypes.items()
    ]


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_an_empty_log_has_the_columns_and_dtypes_of_a_busy_one(
    name: str, logs: dict[str, Path]
) -> None:
    make = FRAMES[name]
    empty, busy = make(logs["empty"]), make(logs["busy"])
    assert empty.empty and not busy.empty, name
    assert _schema(empty) == _schema(busy), name


def test_counts_that_can_be_missing_are_nullable_integers(logs: dict[str, Path]) -> None:
    audit = frames.audit(logs["busy"])
    assert audit.rule.dtype == "Int64" and audit.rule.isna().any()
    assert frames.events(logs["busy"]).rule.dtype == "Int64"
    live = frames.live(logs["busy"])
    assert live.attempt.dtype == "Int64"
    spans = frames.phase_durations(logs["busy"])
    assert spans.attempt.dtype == "Int64" and spans.resumed.dtype == "boolean"
    # Never missing: plain integers, so numpy arithmetic stays plain.
    assert audit.position.dtype == "int64" and live.restarts.dtype == "int64"


def test_statuses_and_event_types_are_categoricals_over_every_known_value(
    logs: dict[str, Path],
) -> None:
    types = {cls.__name__ for cls in EVENT_TYPES.values()}
    assert set(frames.events(logs["empty"]).type.cat.categories) == types
    audit = frames.audit(logs["busy"])
    assert set(audit.event_type.cat.categories) == types
    task_statuses = {"pending", "running", "waiting", "sleeping", "completing", "terminal"}
    assert task_statuses <= set(audit.status_after.cat.categories)
    assert "dispatching" in set(audit.status_after.cat.categories)  # a run's, on run events
    live = frames.live(logs["busy"])
    assert set(live.status.cat.categories) == task_statuses
    assert set(live.status) == {"pending", "running", "waiting", "sleeping"}
    tasks = frames.tasks(logs["busy"])
    assert tasks.outcome.dtype == "category" and set(tasks.outcome.dropna()) == {"failed"}
    ledger = frames.ledger(logs["busy"])
    assert set(ledger.status.cat.categories) == {
        "dispatching",
        "running",
        "done",
        "failed",
        "orphaned",
        "superseded",
    }


def test_casting_loses_no_value(logs: dict[str, Path]) -> None:
    state = replay(logs["busy"])
    audit = frames.audit(state)
    for row, expected in zip(audit.to_dict("records"), state.audit, strict=True):
        for column, value in expected.items():
            got = row[column]
            if column == "task_id" and value == "":
                value = None  # a settings event's: missing, not an empty id
            assert (got is pd.NA or got is None or got != got) if value is None else got == value
    live = frames.live(state).set_index("task_id")
    for row in state.table("live_tasks"):
        assert live.loc[row["task_id"], "status"] == row["status"]
        assert live.loc[row["task_id"], "events"] == row["events"]


def test_a_value_of_a_newer_release_is_kept_not_dropped(logs: dict[str, Path]) -> None:
    state = replay(logs["busy"])
    first = next(iter(state.tables["audit"].values()))
    first["status_after"] = "quarantined"  # a status this release does not know
    audit = frames.audit(state)
    assert audit.status_after.iloc[0] == "quarantined"
    assert "quarantined" in audit.status_after.cat.categories


def test_kinds_phases_modes_and_triggers_are_categoricals(logs: dict[str, Path]) -> None:
    for name in ("tasks", "live", "phase_durations"):
        frame = FRAMES[name](logs["busy"])
        for column in ("kind", "phase", "mode") if name != "tasks" else ("kind", "phase"):
            assert frame[column].dtype == "category", (name, column)
        assert set(frame.kind.cat.categories) == {"job"}, name
    assert set(frames.tasks(logs["busy"]).phase.cat.categories) == {"start", "gather"}
    ledger = frames.ledger(logs["busy"])
    assert list(ledger.trigger.cat.categories) == ["manual", "scheduled"]
    assert list(ledger.trigger) == ["manual"]


def test_a_missing_task_id_is_na_not_an_empty_string(logs: dict[str, Path]) -> None:
    events = frames.events(logs["busy"])
    settings = events[events.stream_id.str.startswith("settings:")]
    assert not settings.empty and settings.task_id.isna().all()
    assert not (events.task_id == "").any()
    audit = frames.audit(logs["busy"])
    assert audit.task_id.isna().sum() == len(settings)
    tasks = frames.tasks(logs["busy"]).set_index("task_id")
    assert tasks.loc["child", "owner_id"] == "owner" and pd.isna(tasks.loc["owner", "owner_id"])
    for name in ("events", "audit", "live", "ledger", "tasks", "phase_durations"):
        assert FRAMES[name](logs["busy"]).task_id.dtype == "string", name


def test_flags_are_booleans_in_every_frame(logs: dict[str, Path]) -> None:
    flags = {
        "audit": ["refused"],
        "live": ["abort_requested"],
        "ledger": ["catch_up"],
        "tasks": ["abort_requested"],
        "phase_durations": ["resumed"],
    }
    for name, columns in flags.items():
        for kind in ("empty", "busy"):
            frame = FRAMES[name](logs[kind])
            for column in columns:
                assert frame[column].dtype in ("bool", "boolean"), (name, column, kind)
    assert not frames.audit(logs["busy"]).refused.any()


def test_every_ms_time_has_a_timezone_aware_datetime_beside_it(logs: dict[str, Path]) -> None:
    beside = {
        "events": {"at": "at_time"},
        "audit": {"at": "at_time"},
        "live": {"submitted_at": "submitted_time", "until": "until_time"},
        "ledger": {"fired_at": "fired_time", "scheduled_for": "scheduled_for_time"},
        "tasks": {"updated_at": "updated_time"},
        "phase_durations": {"start_at": "start_time", "end_at": "end_time"},
    }
    for name, columns in beside.items():
        frame = FRAMES[name](logs["busy"])
        for ms, when in columns.items():
            assert frame[ms].dtype == "float64", (name, ms)  # the ms column stays
            assert str(frame[when].dt.tz) == "UTC", (name, when)
            known = frame[ms].notna()
            expected = pd.to_datetime(frame[ms][known], unit="ms", utc=True)
            assert (frame[when][known] == expected).all(), (name, when)
            assert frame[when][~known].isna().all(), (name, when)
    live = frames.live(logs["busy"]).set_index("task_id")
    assert live.loc["sleeper", "until_time"] == pd.Timestamp("2026-01-05T09:01:00Z")
