"""The dispatcher's behaviour where tasktrail once differed or had nothing (issue 16;
seed 003, glasses-server's task-dispatcher): each test names the behaviour and fails
when it breaks. The rules they hold are written down in docs/seed-fidelity.md."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from tasktrail.domain import ManualClock, Registry, RunSettings, Scheduler, TaskEvent
from tasktrail.domain.runs.events import RunSettingsChanged
from tasktrail.domain.runs.settings import run_settings_of
from tasktrail.domain.turns.events import TurnSettingsChanged
from tasktrail.domain.turns.settings import TurnSettings
from tasktrail.replay import replay


def of_type(scheduler: Scheduler, cls: type[TaskEvent]) -> list[Any]:
    return [r.event for r in scheduler.store.read() if isinstance(r.event, cls)]


# ─── defect 7: settings that decide are in the log ─────────────────────────────────


def test_dispatcher_run_settings_are_recorded_and_replayed(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    settings = RunSettings(tz="Europe/Berlin", runs_per_day=1, cap_per_day=5)
    s.configure_runs(settings=settings)
    s.configure_runs(settings=settings)
    assert len(of_type(s, RunSettingsChanged)) == 1
    s.close()
    assert run_settings_of(replay(sqlite_url).world) == settings
    reopened = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    assert reopened.run_settings == settings
    reopened.close()


def test_settings_events_carry_every_setting() -> None:
    base = {f.name for f in fields(TaskEvent)}
    for event, settings in ((RunSettingsChanged, RunSettings), (TurnSettingsChanged, TurnSettings)):
        assert {f.name for f in fields(event)} - base == {f.name for f in fields(settings)}
