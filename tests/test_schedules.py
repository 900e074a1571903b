"""Schedules (issue 42 item 6): a cron schedule submits one task a tick, with its kind
and memos, on the scheduler clock, exactly once across a fleet (of threads and of
worker processes); an idle worker sleeps until the next tick; a tick whose task
exists, no tick due, or a tick the rules refuse costs no further decision. When a
schedule ticks (catch-up after downtime, time zones across a DST change, rule 26) is
tests/test_schedules_cron.py's; a schedule's life and record (rule 27, replay equals
live, snapshots, the commands) tests/test_schedules_lifecycle.py's."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers.schedules import MINUTE, T0
from helpers.schedules import clock as clock  # a fixture, overriding the suite's
from helpers.schedules import registry as registry  # a fixture, overriding the suite's
from helpers.worker_processes import of, processes, wait_for
from helpers.worker_workload import registry as workload

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler, Worker
from tasktrail.domain.schedules.events import ScheduleTicked
from tasktrail.domain.tasks.events import TaskSubmitted


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
