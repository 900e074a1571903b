"""A worker running many invocations at once (issue 27) stops, or loses its lease: a
stop gives the phases in flight their grace, then hands their tasks back (rule 10),
an async phase cancelled past it as a sync one that has not returned; a second stop
closes at once; and fencing holds for each invocation in flight."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from helpers.concurrent_worker import run_in_thread, wait_until

from tasktrail.domain import (
    LeaseLost,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.app.phases import PassReport
from tasktrail.domain.tasks.events import TaskEnded, TaskReserved, TaskStopped


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
