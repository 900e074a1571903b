"""Schedules (issue 42 item 6, rules 26 and 27): a cron schedule submits one task a tick,
on the scheduler clock, exactly once across a fleet; catch-up after downtime; time
zones across a DST change; refusals that append nothing; replay equals live."""

from __future__ import annotations

import itertools
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from conftest import event_count
from helpers.worker_processes import of, processes, wait_for
from helpers.worker_workload import registry as workload

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.schedules.cron import CATCH_UP_LIMIT
from tasktrail.domain.schedules.events import ScheduleTicked, schedule_stream_id
from tasktrail.domain.tasks.events import TaskSubmitted
from tasktrail.replay import replay
from tasktrail.replay.cli import main

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
MINUTE = 60_000


def ms(text: str) -> int:
    """An ISO time with its offset, as scheduler ms."""
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def registry() -> Registry:
    return Registry([TaskDefinition("report", 1, {"go": lambda inv: inv.finish("completed")})])


def ticked(s: Scheduler) -> list[str]:
    """The ids of the tasks schedules submitted, in submission order."""
    s.refresh()
    return [t.id for t in s.tasks() if t.id.startswith("sched:")]


def test_a_schedule_submits_one_task_a_tick_with_its_kind_and_memos(
    fleet: Any, clock: ManualClock
) -> None:
    s = fleet()
    recorded = s.schedule("digest", "report", memos={"to": "ops"}, actor="ana", reason="daily")
    assert (recorded.cron, recorded.tz, recorded.next_at) == ("*/5 * * * *", "UTC", T0 + 5 * MINUTE)
    worker = Worker(s)
    assert worker.tick().scheduled == []  # nothing due yet: nothing submitted
    for n in range(1, 4):
        clock.advance(5 * MINUTE)
        report = worker.tick()
        tick = T0 + 5 * MINUTE * n
        assert report.scheduled == [f"sched:digest:{tick}"]
        task = s.task(report.scheduled[0])
        assert (task.kind, task.status, task.outcome.status) == ("report", "terminal", "completed")
        assert task.submitted_at == tick
        submitted = s.history(task.id)[0]
        assert submitted.memos == {"to": "ops"}
        assert submitted.actor == "schedule:digest"
    assert s.schedules()[0].submitted == 3
    assert s.next_schedule_due() == T0 + 20 * MINUTE


def test_an_idle_worker_sleeps_until_the_next_tick(fleet: Any, clock: ManualClock) -> None:
    s = fleet(lease=3 * 60 * MINUTE)  # its next heartbeat an hour away
    worker = Worker(s)
    worker.tick()
    assert worker.next_deadline() == T0 + 60 * MINUTE  # the heartbeat
    s.schedule("digest", "report")
    assert worker.next_deadline() == T0 + 5 * MINUTE  # the tick, before it


def tick_at_once(workers: list[Worker]) -> list[str]:
    """Every worker's tick started at the same moment, each in a thread; the tasks the
    schedules submitted, all workers together."""
    start = threading.Barrier(len(workers))
    scheduled: list[str] = []
    errors: list[BaseException] = []

    def tick(worker: Worker) -> None:
        start.wait()
        try:
            scheduled.extend(worker.tick().scheduled)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=tick, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return scheduled


def test_four_workers_on_one_store_submit_one_task_a_tick(fleet: Any, clock: ManualClock) -> None:
    schedulers = [fleet(name) for name in "abcd"]
    schedulers[0].schedule("beat", "report", cron="* * * * *")
    workers = [Worker(s) for s in schedulers]
    for n in range(1, 6):
        clock.advance(MINUTE)
        assert tick_at_once(workers) == [f"sched:beat:{T0 + MINUTE * n}"]
    expected = [f"sched:beat:{T0 + MINUTE * n}" for n in range(1, 6)]
    for s in schedulers:
        assert ticked(s) == expected
    ticks = [e for e in schedulers[0].store.stream("cron:beat") if isinstance(e, ScheduleTicked)]
    assert [e.tick_at for e in ticks] == [T0 + MINUTE * n for n in range(1, 6)]


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


@pytest.mark.parametrize("catch_up", [False, True])
def test_after_downtime_catch_up_submits_the_latest_tick_or_each(
    fleet: Any, clock: ManualClock, catch_up: bool
) -> None:
    s = fleet()
    s.schedule("beat", "report", cron="*/10 * * * *", catch_up=catch_up)
    clock.advance(10 * MINUTE)
    assert s.submit_due_schedules() == [f"sched:beat:{T0 + 10 * MINUTE}"]
    clock.advance(45 * MINUTE)  # down: the ticks at +20, +30, +40 and +50 are missed
    missed = [f"sched:beat:{T0 + n * 10 * MINUTE}" for n in (2, 3, 4, 5)]
    assert s.submit_due_schedules() == (missed if catch_up else missed[-1:])
    stream = s.store.stream(schedule_stream_id("beat"))
    (tick,) = [e for e in stream if getattr(e, "due_at", None) == T0 + 20 * MINUTE]
    assert (tick.tick_at, tick.next_at) == (T0 + 50 * MINUTE, T0 + 60 * MINUTE)
    assert s.submit_due_schedules() == []


def test_catch_up_is_bounded(fleet: Any, clock: ManualClock) -> None:
    s = fleet()
    s.schedule("beat", "report", cron="* * * * *", catch_up=True)
    clock.advance(3 * CATCH_UP_LIMIT * MINUTE)  # down three times longer than the bound
    submitted = s.submit_due_schedules()
    assert len(submitted) == CATCH_UP_LIMIT
    assert submitted[-1] == f"sched:beat:{T0 + 3 * CATCH_UP_LIMIT * MINUTE}"


@pytest.mark.parametrize(
    ("cron", "tz"),
    [
        ("61 * * * *", "UTC"),
        ("* * * *", "UTC"),
        ("0 0 30 2 *", "UTC"),  # never ticks: February has no 30th
        ("every minute", "UTC"),
        ("*/5 * * * *", "Mars/Olympus_Mons"),
        ("*/5 * * * *", ""),
        ("*/5 * * * *", "../etc/passwd"),
    ],
)
def test_a_bad_cron_or_an_unknown_zone_is_refused_by_rule_26_and_appends_nothing(
    fleet: Any, cron: str, tz: str
) -> None:
    s = fleet()
    before = event_count(s.store)
    with pytest.raises(RuleViolation, match="rule 26") as refused:
        s.schedule("bad", "report", cron=cron, tz=tz)
    assert refused.value.rule == 26
    assert event_count(s.store) == before and s.schedules() == []


def test_a_daily_schedule_keeps_nine_oclock_paris_time_across_the_dst_change(
    fleet: Any, clock: ManualClock
) -> None:
    clock.set(ms("2026-03-27T12:00:00+01:00"))  # Paris moves to summer time on the 29th
    s = fleet()
    s.schedule("morning", "report", cron="0 9 * * *", tz="Europe/Paris")
    seen = []
    for _ in range(4):
        due = s.next_schedule_due()
        assert due is not None
        clock.set(due)
        (task_id,) = s.submit_due_schedules()
        seen.append(int(task_id.rsplit(":", 1)[1]))
    paris = ZoneInfo("Europe/Paris")
    local = [datetime.fromtimestamp(t / 1000, UTC).astimezone(paris) for t in seen]
    assert [(d.day, d.hour, d.minute) for d in local] == [
        (28, 9, 0),
        (29, 9, 0),
        (30, 9, 0),
        (31, 9, 0),
    ]
    # In UTC: 08:00 before the change, 07:00 after it.
    assert [datetime.fromtimestamp(t / 1000, UTC).hour for t in seen] == [8, 7, 7, 7]


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


def test_a_tick_whose_task_exists_is_not_submitted_again(fleet: Any, clock: ManualClock) -> None:
    s = fleet()
    s.schedule("beat", "report", cron="* * * * *")
    s.submit("report", id=f"sched:beat:{T0 + MINUTE}")  # e.g. a worker that ticked, then lost
    clock.advance(MINUTE)
    assert s.submit_due_schedules() == []
    assert s.schedules()[0].next_at == T0 + 2 * MINUTE


def test_no_schedule_due_costs_no_decision(fleet: Any, clock: ManualClock) -> None:
    """The worker's look at the schedules reads the world's index of next ticks; it
    decides (a store turn, a refresh) only when one is due."""
    s = fleet()
    s.schedule("beat", "report", cron="0 * * * *")
    decided = []
    real = s._decide
    s._decide = lambda fn, *a, **k: decided.append(fn) or real(fn, *a, **k)  # type: ignore[method-assign]
    for _ in range(50):
        assert s.submit_due_schedules() == []
    assert decided == []
    clock.advance(60 * MINUTE)
    assert len(s.submit_due_schedules()) == 1
    assert len(decided) == 1


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


def test_four_worker_processes_submit_each_tick_once(store_url: str, tmp_path: Path) -> None:
    """Real processes on the real clock, a tick a second: each tick's task is submitted
    once, and the ticks' events cover the seconds one after another, none twice."""
    with Scheduler.open(store_url, registry=workload, worker="setup") as s:
        s.schedule("pulse", "sync", cron="* * * * * *", catch_up=True)  # cronsim: every second
    with processes(store_url, tmp_path) as started:
        for name in "abcd":
            started.worker(name, phase_s=0.0)
        wait_for(lambda: len(of(ScheduleTicked, store_url)) >= 3, 20.0)
        started.kill_all()
    ticks = of(ScheduleTicked, store_url)
    for before, after in itertools.pairwise(ticks):
        assert after.due_at == before.next_at and after.tick_at > before.tick_at
    covered = range(int(ticks[0].due_at), int(ticks[-1].tick_at) + 1, 1000)
    assert sum(t.submitted for t in ticks) == len(covered)  # each second's once
    submitted = [e.task_id for e in of(TaskSubmitted, store_url)]
    assert sorted(submitted) == sorted(f"sched:pulse:{tick}" for tick in covered)


def test_a_refused_tick_is_passed_over_here_and_the_others_go_on(
    fleet: Any, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schedule whose tick the rules refuse neither stops the worker nor has it poll
    that tick without pause: it is passed over until the schedule changes."""
    from tasktrail.domain.schedules import rules

    s = fleet(lease=3 * 60 * MINUTE)
    s.schedule("bad", "report", cron="* * * * *")
    s.schedule("good", "report", cron="*/2 * * * *")
    real = rules.submit

    def refusing(draft: Any, ctx: Any, **submission: Any) -> Any:
        if submission["task_id"].startswith("sched:bad:"):
            raise InvalidArgument("refused for the test")
        return real(draft, ctx, **submission)

    monkeypatch.setattr(rules, "submit", refusing)
    worker = Worker(s)
    clock.advance(2 * MINUTE)
    assert worker.tick().scheduled == [f"sched:good:{T0 + 2 * MINUTE}"]
    assert s.next_schedule_due() == T0 + 4 * MINUTE  # not the refused tick, now
    s.schedule("bad", "report", cron="*/3 * * * *")  # changed: tried again at its tick
    monkeypatch.setattr(rules, "submit", real)
    clock.advance(MINUTE)
    assert worker.tick().scheduled == [f"sched:bad:{T0 + 3 * MINUTE}"]


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


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        # Spring: 02:30 does not exist on the 29th; Debian's cron runs it at 03:00.
        ("2026-03-28T12:00:00+01:00", ["03-29T03:00+02:00", "03-30T02:30+02:00"]),
        # Autumn: 02:30 comes twice on the 25th; it runs once, at the first.
        ("2026-10-24T12:00:00+02:00", ["10-25T02:30+02:00", "10-26T02:30+01:00"]),
    ],
)
def test_a_tick_in_an_hour_a_dst_change_skips_or_repeats_runs_once(
    fleet: Any, clock: ManualClock, start: str, expected: list[str]
) -> None:
    clock.set(ms(start))
    s = fleet()
    s.schedule("night", "report", cron="30 2 * * *", tz="Europe/Paris")
    paris = ZoneInfo("Europe/Paris")
    seen = []
    for _ in expected:
        due = s.next_schedule_due()
        assert due is not None
        clock.set(due)
        (task_id,) = s.submit_due_schedules()
        when = datetime.fromtimestamp(int(task_id.rsplit(":", 1)[1]) / 1000, UTC).astimezone(paris)
        seen.append(when.strftime("%m-%dT%H:%M%z"))
    assert seen == [e.replace("+02:00", "+0200").replace("+01:00", "+0100") for e in expected]
