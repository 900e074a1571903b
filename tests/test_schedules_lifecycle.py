"""Schedules (issue 42 item 6, rule 27): a schedule's life and its record. Recording the
same schedule again appends nothing and a change is recorded; a kind without a
definition needs a phase; unschedule stops it and an unknown name is refused by rule
27; a removed schedule is read back when set up again; replay equals live, a snapshot
keeps the schedules, and the schedule commands write and ``tasktrail schedules``
lists them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import event_count
from helpers.schedules import MINUTE, T0
from helpers.schedules import clock as clock  # a fixture, overriding the suite's
from helpers.schedules import registry as registry  # a fixture, overriding the suite's

from tasktrail.domain import InvalidArgument, ManualClock, Registry, RuleViolation, Scheduler
from tasktrail.replay import replay
from tasktrail.replay.cli import main


def test_unschedule_stops_it_and_an_unknown_name_is_refused_by_rule_27(
    fleet: Any, clock: ManualClock
) -> None:
    s = fleet()
    s.schedule("beat", "report", cron="* * * * *")
    clock.advance(MINUTE)
    assert len(s.submit_due_schedules()) == 1
    s.unschedule("beat", actor="ana", reason="not needed")
    assert s.schedules() == [] and s.next_schedule_due() is None
    clock.advance(10 * MINUTE)
    assert s.submit_due_schedules() == []
    before = event_count(s.store)
    for name in ("beat", "never"):
        with pytest.raises(RuleViolation, match="rule 27") as refused:
            s.unschedule(name)
        assert refused.value.rule == 27
    assert event_count(s.store) == before
    # Set up again, it ticks from then on (its stream goes on).
    s.schedule("beat", "report", cron="* * * * *")
    clock.advance(MINUTE)
    assert s.submit_due_schedules() == [f"sched:beat:{T0 + 12 * MINUTE}"]


def test_recording_the_same_schedule_again_appends_nothing_and_a_change_is_recorded(
    fleet: Any, clock: ManualClock
) -> None:
    s = fleet()
    s.schedule("beat", "report", cron="*/5 * * * *", memos={"n": 1})
    before = event_count(s.store)
    s.schedule("beat", "report", cron="*/5 * * * *", memos={"n": 1})  # each worker's start
    assert event_count(s.store) == before
    clock.advance(MINUTE)
    changed = s.schedule("beat", "report", cron="0 * * * *", memos={"n": 2})
    assert event_count(s.store) == before + 1
    assert (changed.cron, changed.next_at) == ("0 * * * *", T0 + 60 * MINUTE)


def test_a_kind_without_a_definition_needs_a_phase(fleet: Any) -> None:
    s = fleet()
    with pytest.raises(InvalidArgument, match="phase"):
        s.schedule("beat", "unknown-kind")
    assert s.schedule("beat", "unknown-kind", phase="start").phase == "start"


def test_replay_equals_live_for_schedule_streams(fleet: Any, clock: ManualClock) -> None:
    s = fleet()
    s.schedule("a", "report", cron="* * * * *", memos={"k": [1, 2]}, catch_up=True)
    s.schedule("b", "report", cron="*/2 * * * *", tz="America/New_York")
    for _ in range(4):
        clock.advance(3 * MINUTE)
        s.submit_due_schedules()
    s.unschedule("b")
    state = replay(s.store, snapshots=False)
    streams = {k: v for k, v in state.world.streams.items() if k.startswith("cron:")}
    live = {k: v for k, v in s.world.streams.items() if k.startswith("cron:")}
    assert streams == live and set(streams) == {"cron:a", "cron:b"}
    assert state.world.indexes["cron_schedules"] == s.world.indexes["cron_schedules"]
    assert set(s.world.indexes["cron_schedules"]) == {"a"}


def test_a_snapshot_keeps_the_schedules(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        s.schedule("beat", "report", cron="* * * * *", memos={"k": {"deep": [1]}})
        clock.advance(MINUTE)
        s.submit_due_schedules()
        s.snapshot()
        kept = s.schedules()
    with Scheduler.open(store_url, clock=clock, registry=registry) as again:
        assert again.snapshot_at > 0 and again.snapshot_problems == []
        assert again.schedules() == kept
        clock.advance(MINUTE)
        assert again.submit_due_schedules() == [f"sched:beat:{T0 + 2 * MINUTE}"]


def test_the_schedule_commands_write_and_tasktrail_schedules_lists(
    store_url: str, clock: ManualClock, registry: Registry, capsys: Any
) -> None:
    Scheduler.open(store_url, clock=clock, registry=registry).close()
    argv = ["schedule", store_url, "digest", "report", "--phase", "go", "--cron", "0 9 * * 1-5"]
    assert main([*argv, "--tz", "Europe/Paris", "--memo", 'to="ops"', "--actor", "ana"]) == 0
    assert "scheduled digest: report at '0 9 * * 1-5' (Europe/Paris)" in capsys.readouterr().out
    assert main(["schedule", store_url, "beat", "report", "--phase", "go", "--catch-up"]) == 0
    capsys.readouterr()
    assert main(["schedules", store_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "KIND", "CRON"]
    assert [line.split()[0] for line in lines[1:]] == ["beat", "digest"]
    assert main(["schedules", store_url, "--json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(s["name"], s["tz"], s["memos"]) for s in listed] == [
        ("beat", "UTC", None),
        ("digest", "Europe/Paris", {"to": "ops"}),
    ]
    assert listed[0]["catch_up"] is True
    assert main(["unschedule", store_url, "beat", "--reason", "done"]) == 0
    assert main(["unschedule", store_url, "beat"]) == 2  # rule 27: no live schedule
    assert "rule 27" in capsys.readouterr().err
    assert main(["schedule", store_url, "x", "report", "--phase", "go", "--tz", "Nowhere/X"]) == 2
    assert "rule 26" in capsys.readouterr().err
    assert main(["schedules", store_url]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["digest"]


def test_a_removed_schedule_leaves_memory_and_is_read_back_when_set_up_again(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        s.schedule("x", "report", cron="* * * * *")
        clock.advance(MINUTE)
        s.submit_due_schedules()
        s.unschedule("x")
        s.snapshot()  # compacts: a removed schedule is retired
        assert "cron:x" not in s.world.streams
    with Scheduler.open(store_url, clock=clock, registry=registry) as again:
        assert "cron:x" not in again.world.streams and again.schedules() == []
        with pytest.raises(RuleViolation, match="rule 27"):
            again.unschedule("x")
        assert again.schedule("x", "report", cron="*/2 * * * *").events == 4  # its stream goes on
        clock.advance(2 * MINUTE)
        assert again.submit_due_schedules() == [f"sched:x:{T0 + 2 * MINUTE}"]
        replayed = replay(again.store, snapshots=False).world.streams["cron:x"]
        assert replayed == again.world.stream("cron:x")
