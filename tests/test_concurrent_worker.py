"""A worker runs many invocations at once (issue 27): the bound holds, one task never
has two invocations, async and sync phases mix, an async phase that raises is handled
as a sync one that raised, other threads submit while it runs, and a decision that
loses a race is taken again. A stop's grace (rule 10) and fencing are
tests/test_concurrent_worker_stop.py's."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.concurrent_worker import run_in_thread, wait_until

from tasktrail.domain import (
    ConflictError,
    ManualClock,
    Registry,
    Scheduler,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.tasks.events import TaskEnded, TaskRecovered


class Intervals:
    """Phases record when they start and end; the test reads the overlaps."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: dict[tuple[str, str], float] = {}
        self.spans: list[tuple[str, str, float, float, str]] = []
        self.in_flight = 0
        self.peak = 0

    def start(self, inv: Any) -> None:
        with self.lock:
            self.open[(inv.task_id, inv.worker)] = time.monotonic()
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def end(self, inv: Any) -> None:
        with self.lock:
            started = self.open.pop((inv.task_id, inv.worker))
            self.spans.append((inv.task_id, inv.phase or "", started, time.monotonic(), inv.worker))
            self.in_flight -= 1

    def overlapping_invocations_of_one_task(self) -> list[str]:
        by_task: dict[str, list[tuple[float, float]]] = {}
        for task_id, _, start, end, _ in self.spans:
            by_task.setdefault(task_id, []).append((start, end))
        problems = []
        for task_id, spans in by_task.items():
            spans.sort()
            for (_, end_a), (start_b, _) in itertools.pairwise(spans):
                if start_b < end_a:
                    problems.append(task_id)
        return problems


def waiting_registry(log: Intervals, wait_s: float = 0.05) -> Registry:
    """``mixed``: a sync phase, an async phase, a sync phase that finishes."""

    def first(inv: Any) -> str:
        log.start(inv)
        time.sleep(wait_s)
        log.end(inv)
        return "second"

    async def second(inv: Any) -> str:
        log.start(inv)
        await asyncio.sleep(wait_s)
        log.end(inv)
        return "third"

    def third(inv: Any) -> None:
        log.start(inv)
        time.sleep(wait_s)
        log.end(inv)
        inv.finish("completed")

    return Registry(
        [TaskDefinition("mixed", 1, {"first": first, "second": second, "third": third})]
    )


@pytest.fixture
def stopping() -> Iterator[list[Worker]]:
    """Workers a test started in threads, stopped (at once) after it."""
    workers: list[Worker] = []
    yield workers
    for worker in workers:
        worker.stop()
        worker.stop()


def test_the_bound_on_phases_in_flight_holds_and_is_reached(
    store_url: str, stopping: list[Worker]
) -> None:
    log = Intervals()
    s = Scheduler.open(store_url, registry=waiting_registry(log), worker="w")
    tasks = [s.submit("mixed") for _ in range(12)]
    worker = Worker(s, concurrency=4, poll_ms=10)
    stopping.append(worker)
    thread = run_in_thread(worker)
    wait_until(lambda: all(s.task(t).status == "terminal" for t in tasks))
    worker.stop()
    thread.join(15)
    assert not thread.is_alive()
    assert log.peak <= 4, log.peak
    assert log.peak >= 3, f"at most {log.peak} phases ran at once: no concurrency"
    assert worker.invocations.peak <= 4
    assert log.overlapping_invocations_of_one_task() == []
    assert len(log.spans) == 36


def test_no_task_has_two_invocations_across_two_concurrent_workers(
    store_url: str, stopping: list[Worker]
) -> None:
    log = Intervals()
    registry = waiting_registry(log, wait_s=0.02)
    a = Scheduler.open(store_url, registry=registry, worker="a")
    b = Scheduler.open(store_url, registry=registry, worker="b")
    tasks = [a.submit("mixed") for _ in range(16)]
    workers = [Worker(a, concurrency=8, poll_ms=10), Worker(b, concurrency=8, poll_ms=10)]
    stopping.extend(workers)
    threads = [run_in_thread(w) for w in workers]
    wait_until(lambda: all(a.task(t).status == "terminal" for t in tasks), 30)
    for worker in workers:
        worker.stop()
    for thread in threads:
        thread.join(15)
    assert log.overlapping_invocations_of_one_task() == []
    with Scheduler.open(store_url, worker="reader") as reader:  # the workers closed theirs
        for task_id in tasks:
            history = reader.history(task_id)
            assert sum(isinstance(e, TaskEnded) for e in history) == 1
            assert [e for e in history if isinstance(e, TaskRecovered)] == []


def test_async_and_sync_phases_mix_in_one_definition_under_run_until_idle(
    sqlite_url: str, clock: ManualClock
) -> None:
    """run_pass keeps its meaning for tests and simple hosts: an async phase runs to its
    end on a loop of the calling thread's own."""
    log = Intervals()
    s = Scheduler.open(sqlite_url, clock=clock, registry=waiting_registry(log, 0.0))
    task = s.submit("mixed")
    s.run_until_idle()
    assert s.task(task).status == "terminal"
    assert [phase for _, phase, *_ in log.spans] == ["first", "second", "third"]
    s.close()


def test_run_pass_runs_an_async_phase_from_a_host_that_runs_a_loop(
    sqlite_url: str, clock: ManualClock
) -> None:
    log = Intervals()
    s = Scheduler.open(sqlite_url, clock=clock, registry=waiting_registry(log, 0.0))
    task = s.submit("mixed")

    async def host() -> None:
        s.run_until_idle()  # a sync call from async code: its own loop in a thread

    asyncio.run(host())
    assert s.task(task).status == "terminal"
    s.close()


def raising_registry() -> Registry:
    async def boom(inv: Any) -> None:
        await asyncio.sleep(0)
        raise ValueError("the model answered nonsense")

    def sync_boom(inv: Any) -> None:
        raise ValueError("the model answered nonsense")

    async def abort_async(inv: Any) -> None:
        await asyncio.sleep(0)
        inv.finish("aborted", reason="cleaned up")

    return Registry(
        [
            TaskDefinition("async_raises", 1, {"go": boom}),
            TaskDefinition("sync_raises", 1, {"go": sync_boom}),
            TaskDefinition("async_abort", 1, {"go": lambda inv: None}, abort=abort_async),
        ]
    )


@pytest.mark.parametrize("concurrency", [None, 4])
def test_an_async_phase_that_raises_faults_its_task_as_a_sync_one_does(
    store_url: str, clock: ManualClock, concurrency: int | None
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=raising_registry(), worker="w")
    async_task, sync_task = s.submit("async_raises"), s.submit("sync_raises")
    if concurrency is None:
        s.run_until_idle()
    else:
        Worker(s, concurrency=concurrency).tick()
    for task_id in (async_task, sync_task):
        outcome = s.task(task_id).outcome
        assert outcome is not None
        assert (outcome.status, outcome.reason) == ("faulted", "threw")
        assert "the model answered nonsense" in str(outcome.message)
    s.close()


def test_an_async_abort_handler_runs_on_the_workers_loop(
    sqlite_url: str, clock: ManualClock
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=raising_registry(), worker="w")
    task = s.submit("async_abort")
    s.abort(task)
    Worker(s, concurrency=2).tick()
    outcome = s.task(task).outcome
    assert outcome is not None and (outcome.status, outcome.reason) == ("aborted", "cleaned up")
    s.close()


def test_other_threads_submit_while_the_worker_runs(store_url: str, stopping: list[Worker]) -> None:
    """A web handler's thread, or an asyncio host through asyncio.to_thread, submits
    while the worker's invocations decide: every task runs once and the log folds."""
    log = Intervals()
    s = Scheduler.open(store_url, registry=waiting_registry(log, 0.005), worker="w")
    worker = Worker(s, concurrency=8, poll_ms=10)
    stopping.append(worker)
    thread = run_in_thread(worker)
    submitted: list[str] = []

    def handler() -> None:
        for _ in range(10):
            submitted.append(s.submit("mixed"))

    async def asyncio_host() -> None:
        ids = await asyncio.gather(*(asyncio.to_thread(s.submit, "mixed") for _ in range(10)))
        submitted.extend(ids)

    handlers = [threading.Thread(target=handler) for _ in range(3)]
    for h in handlers:
        h.start()
    asyncio.run(asyncio_host())
    for h in handlers:
        h.join()
    assert len(set(submitted)) == 40
    wait_until(lambda: all(s.task(t).status == "terminal" for t in submitted), 30)
    worker.stop()
    thread.join(15)
    assert log.overlapping_invocations_of_one_task() == []
    assert len(log.spans) == 120


def test_a_phase_decision_that_loses_a_race_is_taken_again_not_faulted(
    sqlite_url: str, clock: ManualClock
) -> None:
    """Another writer's append came first (ConflictError, nothing written): with many
    invocations and workers deciding at once this is timing, not the phase's fault, so
    the invocation decides again on fresh state."""
    registry = Registry(
        [
            TaskDefinition(
                "two", 1, {"a": lambda inv: inv.checkpoint("b"), "b": lambda inv: inv.finish()}
            )
        ]
    )
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w")
    task = s.submit("two")
    real_append = s.store.append
    calls = {"n": 0}

    def racing_append(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # the checkpoint: another writer came first
            raise ConflictError([task], "appended since")
        return real_append(*args, **kwargs)

    s.store.append = racing_append  # type: ignore[method-assign]
    Worker(s, concurrency=2).tick()
    outcome = s.task(task).outcome
    assert outcome is not None and outcome.status == "completed", outcome
    assert s.conflicts == 1
    s.close()
