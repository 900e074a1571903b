"""The worker loop (issue 13): a tick's work, host callbacks, and stopping."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from tasktrail.domain import (
    CorruptEvent,
    ManualClock,
    Registry,
    Scheduler,
    StoreError,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.tasks.events import TaskReserved

LEASE = 10_000


def sleeper_registry() -> Registry:
    def nap(inv: Any) -> None:
        inv.sleep(inv.now() + 1_000, then="done")

    return Registry(
        [
            TaskDefinition("nap", 1, {"start": nap, "done": lambda inv: inv.finish()}),
            TaskDefinition("job", 1, {"start": lambda inv: inv.finish()}),
        ]
    )


def test_a_tick_runs_phases_and_reports_wake_changes(sqlite_url: str, clock: ManualClock) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=sleeper_registry(), worker="w")
    wakes: list[dict[str, Any]] = []
    worker = Worker(s, on_wake=wakes.append)
    task = s.submit("nap")
    report = worker.tick()
    assert report.reserved == [task]
    assert s.task(task).status == "sleeping"
    assert wakes == [{"active": False, "at": clock.now + 1_000}]
    assert (
        worker.next_deadline() == clock.now + 1_000 or worker.next_deadline() <= clock.now + 1_000
    )
    worker.tick()
    assert len(wakes) == 1  # unchanged: not reported again
    clock.advance(1_000)
    worker.tick()
    assert s.task(task).status == "terminal"
    assert wakes[-1] == {"active": False, "at": None}
    s.close()


def test_a_tick_recovers_a_lost_workers_task_and_runs_it(
    store_url: str, clock: ManualClock
) -> None:
    registry = sleeper_registry()
    lost = Scheduler.open(store_url, clock=clock, registry=registry, worker="lost", lease=LEASE)
    task = lost.submit("job")
    lost.reserve(task)  # then the process dies: no close, no more heartbeats
    survivor = Scheduler.open(store_url, clock=clock, registry=registry, worker="ok", lease=LEASE)
    worker = Worker(survivor)
    assert worker.tick().recovered == []
    clock.advance(LEASE + 1)
    report = worker.tick()
    assert report.recovered == [task]
    assert survivor.task(task).status == "terminal"
    reservations = [e.worker for e in survivor.history(task) if isinstance(e, TaskReserved)]
    assert reservations == ["lost", "ok"]
    survivor.close()
    lost.store.close()


def test_host_callbacks_report_blocked_and_parked_once(sqlite_url: str, clock: ManualClock) -> None:
    registry = sleeper_registry()
    first = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w", restart_limit=1)
    stuck = first.submit("job")
    orphan = first.submit("gone", phase="start")  # no definition of "gone" here
    first.reserve(stuck)
    first.store.close()  # a crash: restart of the same worker parks stuck at the limit
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w", restart_limit=1)
    blocked: list[tuple[str, str]] = []
    parked: list[tuple[str, str]] = []
    worker = Worker(
        s,
        on_blocked=lambda t, r: blocked.append((t, r)),
        on_parked=lambda t, r: parked.append((t, r)),
    )
    worker.tick()
    worker.tick()
    assert parked == [(stuck, "restart_limit")]
    assert sorted(blocked) == sorted([(stuck, "restart_limit"), (orphan, "missing_definition")])
    s.retry(stuck)
    worker.tick()
    assert s.task(stuck).status == "terminal"
    s.close()


def test_a_failing_callback_never_stops_the_worker(sqlite_url: str, clock: ManualClock) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=sleeper_registry(), worker="w")

    def broken(_: Any) -> None:
        raise RuntimeError("the host's callback is broken")

    worker = Worker(s, on_wake=broken)
    task = s.submit("job")
    worker.tick()
    assert s.task(task).status == "terminal"
    s.close()


def test_stop_ends_run_within_a_second_and_closes(sqlite_url: str) -> None:
    s = Scheduler.open(sqlite_url, registry=sleeper_registry(), worker="w")  # the system clock
    worker = Worker(s, poll_ms=50)
    thread = threading.Thread(target=worker.run)
    thread.start()
    time.sleep(0.3)
    assert worker.ticks >= 1
    stopped = time.monotonic()
    worker.stop()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert time.monotonic() - stopped < 1.0
    with pytest.raises(Exception, match="rule 2"):
        s.submit("job")  # closed (rule 2)


def test_an_idle_worker_wakes_for_another_writers_events(tmp_path: Any) -> None:
    path = str(tmp_path / "idle.db")
    s = Scheduler.open(path, registry=sleeper_registry(), worker="idle")
    worker = Worker(s, poll_ms=20)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        time.sleep(0.2)
        with Scheduler.open(path, registry=sleeper_registry(), worker="host") as host:
            task = host.submit("job")
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and host.task(task).status != "terminal":
                time.sleep(0.02)
            assert host.task(task).status == "terminal"
            assert [e.worker for e in host.history(task) if isinstance(e, TaskReserved)] == ["idle"]
    finally:
        worker.stop()
        thread.join(timeout=5)


def test_a_tick_the_store_failed_is_tried_again_after_a_backoff(
    sqlite_url: str, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker runs for months: a store away for a while (locked past its timeout, a
    server restarting) must not end it. The failed tick is logged and tried again,
    the waits doubling from ``poll_ms``; the work still in the log is done after."""
    s = Scheduler.open(sqlite_url, clock=clock, registry=sleeper_registry(), worker="w")
    task = s.submit("job")
    real_runnable = s.runnable
    failures = [StoreError("cannot write to store: database is locked")] * 2

    def flaky_runnable(*args: Any, **options: Any) -> Any:
        if failures:
            raise failures.pop()
        return real_runnable(*args, **options)

    s.runnable = flaky_runnable  # type: ignore[method-assign]
    worker = Worker(s, poll_ms=1)
    with caplog.at_level(logging.WARNING, logger="tasktrail.worker"):
        worker.run(max_ticks=3)
    assert "1 in a row); trying again in 1 ms" in caplog.text
    assert "2 in a row); trying again in 2 ms" in caplog.text
    reopened = Scheduler.open(sqlite_url, clock=clock, registry=sleeper_registry(), worker="x")
    assert reopened.task(task).status == "terminal"
    reopened.close()


def test_a_corrupt_event_ends_the_run_and_closes_the_scheduler(
    sqlite_url: str, clock: ManualClock
) -> None:
    """A corrupt event is the log itself: another tick would read it again."""
    s = Scheduler.open(sqlite_url, clock=clock, registry=sleeper_registry(), worker="w")

    def corrupt(*_: Any, **__: Any) -> Any:
        raise CorruptEvent(7, "damaged")

    s.runnable = corrupt  # type: ignore[method-assign]
    with pytest.raises(CorruptEvent):
        Worker(s, poll_ms=1).run(max_ticks=5)
    with pytest.raises(Exception, match="rule 2"):
        s.submit("job")  # closed


def test_a_store_failure_that_strands_a_running_task_ends_the_run(
    sqlite_url: str, clock: ManualClock
) -> None:
    """pi-durable 004, ``TaskScheduler`` (the step that writes the scheduler's own fault
    or terminal record: a throw there ``#failSession``s, since it "would otherwise leave
    the task running"). A phase's checkpoint and then its fault record both meet the
    store away: nothing of this process runs the task any more, yet the world holds it
    running here, and this worker's heartbeats keep its lease, so no other worker
    recovers it. Riding the failure out would strand it for the worker's whole life;
    the run ends instead, and the task is recovered (a restart) and runs to its end."""
    registry = Registry(
        [TaskDefinition("two", 1, {"start": lambda inv: "next", "next": lambda inv: inv.finish()})]
    )
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w")
    task = s.submit("two")
    real_append = s.store.append
    calls = {"n": 0}

    def flaky_append(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] in (2, 3):  # the checkpoint, then the fault record
            raise StoreError("cannot write to store: database is locked")
        return real_append(*args, **kwargs)

    s.store.append = flaky_append  # type: ignore[method-assign]
    worker = Worker(s, poll_ms=1)
    ended: list[BaseException | None] = []

    def run() -> None:
        try:
            worker.run(max_ticks=5)
            ended.append(None)
        except BaseException as error:  # the test reads what ended the run
            ended.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=3)
    if thread.is_alive():  # idle for good with the task stranded: stop it, then fail
        worker.stop()
        thread.join(timeout=5)
    assert calls["n"] >= 3
    assert ended and isinstance(ended[0], StoreError), ended
    reopened = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w")
    assert reopened.task(task).restarts == 1  # recovered as the crash it was
    reopened.run_until_idle()
    assert reopened.task(task).status == "terminal"
    reopened.close()


def test_a_worker_with_every_slot_taken_does_not_tick_on_its_own_appends(
    sqlite_url: str,
) -> None:
    """Its invocations' checkpoints are news, but news can bring no work while no slot
    is free (the worker has no runtime, executor or wake listener): it waits for a slot
    to free instead of ticking at every checkpoint."""
    rounds: dict[str, int] = {}

    def again(inv: Any) -> str | None:
        rounds[inv.task_id] = rounds.get(inv.task_id, 0) + 1
        time.sleep(0.01)
        return "again" if rounds[inv.task_id] < 30 else None  # None: it is done

    registry = Registry([TaskDefinition("loop", 1, {"again": again})])
    s = Scheduler.open(sqlite_url, registry=registry, worker="w")
    tasks = [s.submit("loop", phase="again") for _ in range(2)]
    worker = Worker(s, concurrency=2, poll_ms=5_000)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(s.task(t).status != "terminal" for t in tasks):
            time.sleep(0.02)
        assert sum(rounds.values()) == 60  # a checkpoint each round but the last: 58
        # A tick to start the two, one for each end (a slot frees), a few for the news
        # once a slot is free: not one for each of the 58 checkpoints.
        assert worker.ticks < 20, worker.ticks
    finally:
        worker.stop()
        thread.join(timeout=5)
