"""Timeouts of phases (the Service API issue, item 4; rules 23 and 24): a phase that
overruns is tried again at its checkpoint as one that raised, or faults its task
without a retry policy; an async phase past its timeout is cancelled, a sync one
fenced while its slot stays taken, until its last attempt ends the task failed."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.retries import finish, retries_of

from tasktrail.domain import (
    ManualClock,
    PhaseFenced,
    Registry,
    Retry,
    Scheduler,
    TaskDefinition,
    Worker,
)


@pytest.fixture
def stopping() -> Iterator[list[Worker]]:
    """Workers a test started in threads, stopped (at once) after it."""
    workers: list[Worker] = []
    yield workers
    for worker in workers:
        worker.stop()
        worker.stop()


def wait_until(predicate: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("runner", ["run_pass", "worker"])
def test_an_async_phase_past_its_timeout_is_cancelled_and_retried(
    store_url: str, clock: ManualClock, runner: str
) -> None:
    cancelled: list[int] = []
    tries: list[int] = []

    async def slow_model(inv: Any) -> str:
        tries.append(1)
        if len(tries) == 1:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(1)
                raise
        return "done"

    registry = Registry(
        [
            TaskDefinition(
                "call",
                1,
                {"ask": slow_model, "done": finish},
                phase_timeouts={"ask": 0.2},
                retry=Retry(max_attempts=2, base_s=1),
            )
        ]
    )
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    started = time.monotonic()
    if runner == "worker":
        Worker(s, concurrency=2).tick()
    else:
        s.run_pass()
    assert time.monotonic() - started < 10  # not the phase's 30 s
    assert cancelled == [1]
    (retried,) = retries_of(s, task_id)
    assert retried.cause == "timeout"
    assert retried.message == "PhaseTimeout: phase 'ask' ran past its timeout of 0.2 s"
    clock.advance(1000)
    s.run_until_idle()
    assert s.task(task_id).outcome.status == "completed"  # type: ignore[union-attr]
    s.close()


def test_a_timeout_without_a_retry_policy_faults_the_task(
    store_url: str, clock: ManualClock
) -> None:
    async def slow(inv: Any) -> None:
        await asyncio.sleep(30)

    registry = Registry([TaskDefinition("call", 1, {"ask": slow}, timeout_s=0.1)])
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    assert s.run_pass().faulted == {task_id: "timeout"}
    assert s.task(task_id).outcome.status == "faulted"  # type: ignore[union-attr]
    s.close()


def test_rule_24_a_hung_sync_phase_is_fenced_and_holds_its_slot_until_it_returns(
    store_url: str, stopping: list[Worker]
) -> None:
    first_release, second_started, second_release = (threading.Event() for _ in range(3))
    late: list[BaseException] = []
    tries: list[int] = []

    def hangs_once(inv: Any) -> str:
        tries.append(1)
        if len(tries) == 1:
            first_release.wait(30)  # a sync call that ignores every timeout
            try:
                inv.memo("late", True)  # its task runs again here, under its retry
            except PhaseFenced as refusal:
                late.append(refusal)
            return "done"  # its checkpoint is refused as well: nothing is appended
        second_started.set()
        second_release.wait(30)
        return "done"

    registry = Registry(
        [
            TaskDefinition(
                "call",
                1,
                {"ask": hangs_once, "done": finish},
                timeout_s=0.2,
                retry=Retry(max_attempts=2, base_s=0.0),
            )
        ]
    )
    s = Scheduler.open(store_url, registry=registry)
    worker = Worker(s, concurrency=2, poll_ms=10)
    stopping.append(worker)
    task_id = s.submit("call")
    running = threading.Thread(target=worker.run, daemon=True)
    running.start()
    # The retry runs while the first try still hangs, each holding a slot.
    assert second_started.wait(20)
    (retried,) = retries_of(s, task_id)
    assert retried.cause == "timeout" and retried.attempt == 1
    assert worker.invocations.in_flight == 2 and worker.invocations.free == 0
    head = s.store.head()
    first_release.set()
    wait_until(lambda: worker.invocations.in_flight == 1)
    assert len(late) == 1 and late[0].rule == 24 and late[0].task_id == task_id
    assert s.store.head() == head  # its late decisions appended nothing
    assert s.task(task_id).status == "running"  # the retry's, untouched
    second_release.set()
    wait_until(lambda: not s.task(task_id).live)
    assert s.task(task_id).outcome.status == "completed"  # type: ignore[union-attr]
    worker.stop()
    running.join(20)  # closed before its store goes
    assert not running.is_alive()


def test_a_hung_sync_phase_past_its_last_attempt_ends_the_task_failed(
    store_url: str, clock: ManualClock
) -> None:
    release = threading.Event()

    def hangs(inv: Any) -> str:
        release.wait(30)
        return "done"

    registry = Registry(
        [TaskDefinition("call", 1, {"ask": hangs, "done": finish}, timeout_s=0.2, retry=Retry(1))]
    )
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("call")
    done = threading.Thread(target=s.run_pass, daemon=True)
    done.start()
    wait_until(lambda: not s.task(task_id).live)
    outcome = s.task(task_id).outcome
    assert outcome is not None and (outcome.status, outcome.reason) == (
        "failed",
        "retries_exhausted",
    )
    assert done.is_alive()  # the pass waits for the phase it cannot kill
    head = s.store.head()
    release.set()
    done.join(10)
    assert not done.is_alive() and s.store.head() == head
    s.close()
