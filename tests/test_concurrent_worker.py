"""A worker runs many invocations at once (issue 27): the bound holds, one task never
has two invocations, fencing holds per invocation, async and sync phases mix, an async
phase that raises or is cancelled is handled as a sync one that raised, and a stop
gives the phases in flight their grace, then hands their tasks back (rule 10)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tasktrail.domain import (
    ConflictError,
    LeaseLost,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.app.phases import PassReport
from tasktrail.domain.tasks.events import TaskEnded, TaskRecovered, TaskReserved, TaskStopped


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


def run_in_thread(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return thread


def wait_until(predicate: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


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


def blocking_registry(gate: threading.Event, started: list[str]) -> Registry:
    """``blocked_sync`` and ``blocked_async`` wait for ``gate`` (or for ever), then
    checkpoint; ``stuck`` never returns within a test."""

    def blocked_sync(inv: Any) -> str:
        started.append(inv.task_id)
        gate.wait(30)
        return "after"

    async def blocked_async(inv: Any) -> str:
        started.append(inv.task_id)
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return "after"

    return Registry(
        [
            TaskDefinition(
                "blocked_sync", 1, {"go": blocked_sync, "after": lambda inv: inv.finish()}
            ),
            TaskDefinition(
                "blocked_async", 1, {"go": blocked_async, "after": lambda inv: inv.finish()}
            ),
        ]
    )


def test_a_stop_gives_the_phases_their_grace_and_starts_no_further_phase(
    store_url: str,
) -> None:
    """Phases that reach their decision within the grace record it; the invocation
    starts no further phase, and the close hands the task back at its new checkpoint
    (rule 10: pending, no restart counted)."""
    gate, started = threading.Event(), []
    s = Scheduler.open(store_url, registry=blocking_registry(gate, started), worker="w")
    tasks = [s.submit("blocked_sync"), s.submit("blocked_async")]
    worker = Worker(s, concurrency=4, grace_s=10, poll_ms=10)
    thread = run_in_thread(worker)
    wait_until(lambda: len(started) == 2)
    worker.stop()
    time.sleep(0.2)
    assert thread.is_alive()  # in its grace period
    gate.set()
    thread.join(10)
    assert not thread.is_alive()
    with Scheduler.open(store_url, worker="reader") as reader:
        for task_id in tasks:
            task = reader.task(task_id)
            assert task.status == "pending" and task.restarts == 0
            assert task.checkpoint is not None and task.checkpoint.phase == "after"
            assert any(isinstance(e, TaskStopped) for e in reader.history(task_id))


def test_past_the_grace_the_close_hands_the_tasks_back_and_cancels_async_phases(
    store_url: str,
) -> None:
    gate, started = threading.Event(), []
    s = Scheduler.open(store_url, registry=blocking_registry(gate, started), worker="w")
    tasks = [s.submit("blocked_sync"), s.submit("blocked_async")]
    worker = Worker(s, concurrency=4, grace_s=0.3, poll_ms=10)
    thread = run_in_thread(worker)
    wait_until(lambda: len(started) == 2)
    stopped_at = time.monotonic()
    worker.stop()
    thread.join(10)
    assert time.monotonic() - stopped_at < 0.3 + 2
    with Scheduler.open(store_url, worker="reader") as reader:
        for task_id in tasks:
            task = reader.task(task_id)
            # Rule 10: the close is not a crash. Not faulted though the async phase
            # was cancelled and the sync one raised nothing yet.
            assert (task.status, task.restarts, task.outcome) == ("pending", 0, None)
            assert task.checkpoint is not None and task.checkpoint.phase == "go"
    gate.set()  # the sync phase's thread decides now: refused, the scheduler is closed
    time.sleep(0.1)
    with Scheduler.open(store_url, worker="reader") as reader:
        assert all(reader.task(t).status == "pending" for t in tasks)


def test_a_second_stop_closes_at_once(store_url: str) -> None:
    gate, started = threading.Event(), []
    s = Scheduler.open(store_url, registry=blocking_registry(gate, started), worker="w")
    task = s.submit("blocked_sync")
    worker = Worker(s, concurrency=2, grace_s=30, poll_ms=10)
    thread = run_in_thread(worker)
    wait_until(lambda: len(started) == 1)
    worker.stop()
    time.sleep(0.1)
    stopped_at = time.monotonic()
    worker.stop()
    thread.join(10)
    assert time.monotonic() - stopped_at < 2
    with Scheduler.open(store_url, worker="reader") as reader:
        assert reader.task(task).status == "pending"
    gate.set()


def test_fencing_holds_for_each_invocation_in_flight(store_url: str, clock: ManualClock) -> None:
    """A worker whose lease lapsed while its phases waited: another takes the tasks, and
    each of the first worker's invocations is refused at its next decision (LeaseLost),
    recording nothing; every task ends once, in the second worker."""
    gate, started = threading.Event(), []
    refused: list[BaseException] = []
    registry = blocking_registry(gate, started)
    slow = Scheduler.open(store_url, clock=clock, registry=registry, worker="slow", lease=1_000)
    tasks = [slow.submit("blocked_sync") for _ in range(2)] + [slow.submit("blocked_async")]
    real_checkpoint = slow.checkpoint

    def checkpoint(task_id: str, phase: str, attempt: int | None = None) -> None:
        try:
            real_checkpoint(task_id, phase, attempt)
        except RuleViolation as error:
            refused.append(error)
            raise

    real_checkpoint_async = slow.checkpoint_async

    async def checkpoint_async(task_id: str, phase: str, attempt: int | None = None) -> None:
        # The async phase's next phase, checkpointed from the worker's loop (issue 43).
        try:
            await real_checkpoint_async(task_id, phase, attempt)
        except RuleViolation as error:
            refused.append(error)
            raise

    slow.checkpoint = checkpoint  # type: ignore[method-assign]
    slow.checkpoint_async = checkpoint_async  # type: ignore[method-assign]
    worker = Worker(slow, concurrency=3, grace_s=5)
    ticking = threading.Thread(target=worker.tick, daemon=True)
    ticking.start()
    wait_until(lambda: len(started) == 3)
    clock.advance(5_000)  # the slow worker's lease lapsed; its process is alive
    taker = Scheduler.open(store_url, clock=clock, registry=registry, worker="taker")
    assert all(taker.task(t).status == "pending" for t in tasks)  # its open recovered them
    taken = PassReport()
    modes = {t: taker.start_invocation(t, taken) for t in tasks}
    assert taken.reserved == tasks
    gate.set()
    ticking.join(10)
    assert len(refused) == 3 and all(isinstance(e, LeaseLost) for e in refused), refused
    for task_id, mode in modes.items():
        assert mode == "run"
        taker.run_invocation(task_id, mode, taken)
    for task_id in tasks:
        history = taker.history(task_id)
        assert sum(isinstance(e, TaskEnded) for e in history) == 1
        reservations = [e.worker for e in history if isinstance(e, TaskReserved)]
        assert reservations == ["slow", "taker"]
    taker.close()
    slow.close()


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
