"""``tasktrail.replay.frames``: the same columns and dtypes for any log, an empty one too;
nullable ``Int64`` where a value can be missing; categoricals for statuses and event
types (issue 18)."""

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


def _schema(frame: pd.DataFrame) -> list[tuple[str, str, Any]]:
    return [
        (str(name), str(dtype), list(dtype.categories) if dtype == "category" else None)
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
