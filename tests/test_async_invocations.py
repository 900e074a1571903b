"""Async invocations on the worker's event loop, with no thread each (issue 43, item 1).

Thousands of ``async`` phases wait at once in one worker on a handful of threads; a
definition may mix sync and async phases in one invocation; a phase that emitted may
await two commands at once without freezing the loop. What issue 27 proved of a
worker's invocations, held for those run on the loop (the bound, one invocation a
task, a stop's grace, fencing, one span a phase), is
tests/test_async_invocations_guarantees.py's."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest
from conftest import LONG
from helpers.async_invocations import run_in_thread, wait_until
from helpers.async_invocations import stopping as stopping  # a fixture

from tasktrail.domain import Registry, Scheduler, TaskDefinition, Worker
from tasktrail.domain.tasks.events import TaskReserved

WAITING = 10_000 if LONG else 2_000
"""Async phases waiting at once in one worker: the issue's 10,000 in the long profile."""
MAX_THREADS = 64


def status(field: str) -> str:
    """A field of this process's /proc status (``Threads``, ``VmRSS``)."""
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    raise KeyError(field)


def threads_now() -> int:
    return int(status("Threads")) if os.path.exists("/proc/self/status") else 0


class Gate:
    """What ``count`` async phases wait on: an asyncio.Event of the worker's loop,
    released by the test; ``all_waiting`` is set once every one of them waits."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.waiting = 0
        self.ended = 0
        self.all_waiting = threading.Event()
        self.all_ended = threading.Event()
        self.event: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.threads: set[str] = set()

    async def wait(self, inv: Any) -> str:
        if self.event is None:  # every phase runs on the one loop: no race here
            self.event, self.loop = asyncio.Event(), asyncio.get_running_loop()
        self.threads.add(threading.current_thread().name)
        self.waiting += 1
        if self.waiting == self.count:
            self.all_waiting.set()
        await self.event.wait()
        return "done"

    async def done(self, inv: Any) -> None:
        await inv.finish_async("completed")
        self.ended += 1
        if self.ended == self.count:
            self.all_ended.set()

    def release(self) -> None:
        assert self.loop is not None and self.event is not None
        self.loop.call_soon_threadsafe(self.event.set)

    def registry(self) -> Registry:
        return Registry([TaskDefinition("waits", 1, {"wait": self.wait, "done": self.done})])


@pytest.mark.grows
def test_thousands_of_waiting_async_phases_hold_no_thread_each(
    store_url: str, stopping: list[Worker], record_property: Any
) -> None:
    """The issue's measure: 2,000 waiting async phases took 2,004 threads. Now every one
    waits on the worker's loop: the process stays under 64 threads (its resident memory
    is recorded, not bounded)."""
    gate = Gate(WAITING)
    s = Scheduler.open(store_url, registry=gate.registry(), worker="w")
    with s.batch():
        tasks = [s.submit("waits") for _ in range(WAITING)]
    before = threads_now()
    worker = Worker(s, concurrency=WAITING, poll_ms=20)
    stopping.append(worker)
    thread = run_in_thread(worker)
    assert gate.all_waiting.wait(600), f"{gate.waiting} of {WAITING} phases waiting"
    waiting_threads, active = threads_now(), threading.active_count()
    rss = status("VmRSS")
    record_property("waiting_async_phases", WAITING)
    record_property("threads_while_waiting", waiting_threads)
    record_property("resident_memory_while_waiting", rss)
    print(
        f"\n{WAITING} async phases waiting: {waiting_threads} threads (before the worker:"
        f" {before}), resident memory {rss}"
    )
    names = sorted(t.name for t in threading.enumerate())  # what holds them, if too many
    assert waiting_threads < MAX_THREADS and active < MAX_THREADS, (waiting_threads, names)
    assert worker.invocations.in_flight == WAITING
    assert gate.threads == {f"tasktrail-loop-{s.worker}"}  # every phase ran on the loop
    gate.release()
    assert gate.all_ended.wait(600), f"{gate.ended} of {WAITING} tasks ended"
    worker.stop()
    thread.join(60)
    assert not thread.is_alive()
    assert worker.invocations.peak == WAITING
    assert worker.invocations.phase_threads.threads == 0  # no sync phase, no phase thread
    with Scheduler.open(store_url, worker="reader") as reader:
        for task_id in (tasks[0], tasks[-1]):
            assert reader.task(task_id).outcome.status == "completed"  # type: ignore[union-attr]


def test_a_sync_phase_hands_the_invocation_to_the_loop_at_an_async_one(
    store_url: str,
) -> None:
    """A definition may mix both: the sync phases run in threads of the worker's pool,
    the async ones on its loop, whichever came first; the invocation is one."""
    where: list[tuple[str, str]] = []

    def first(inv: Any) -> str:
        where.append(("first", threading.current_thread().name))
        return "second"

    async def second(inv: Any) -> str:
        where.append(("second", threading.current_thread().name))
        return "third"

    def third(inv: Any) -> None:
        where.append(("third", threading.current_thread().name))
        inv.finish()

    registry = Registry(
        [TaskDefinition("mixed", 1, {"first": first, "second": second, "third": third})]
    )
    s = Scheduler.open(store_url, registry=registry, worker="w")
    task = s.submit("mixed")
    worker = Worker(s, concurrency=2)
    report = worker.tick()
    assert report.reserved == [task] and report.ended == [task]
    assert [phase for phase, _ in where] == ["first", "second", "third"]
    threads = dict(where)
    assert threads["first"].startswith("tasktrail-phase-w")
    assert threads["second"] == "tasktrail-loop-w"
    assert threads["third"].startswith("tasktrail-phase-w")
    reservations = [e for e in s.history(task) if isinstance(e, TaskReserved)]
    assert len(reservations) == 1  # one invocation ran all three
    s.close()


def test_an_async_phase_that_emitted_may_await_two_commands_at_once(
    store_url: str, stopping: list[Worker]
) -> None:
    """Found in this session: a phase that had emitted a chunk and then awaited two of
    its commands at once (``asyncio.gather``) froze the worker's loop, every async
    invocation with it: the second took the stream buffer's lock on the loop's thread
    while the first held it across its await. The second now waits its turn on the loop
    (rule 29 as before: the chunk is recorded first, in the first decision's append)."""

    async def both(inv: Any) -> None:
        inv.emit("first")
        await asyncio.gather(inv.memo_async("a", 1), inv.memo_async("b", 2))
        await inv.finish_async("completed")

    async def other(inv: Any) -> None:
        await inv.finish_async("completed")

    registry = Registry(
        [TaskDefinition("both", 1, {"go": both}), TaskDefinition("other", 1, {"go": other})]
    )
    s = Scheduler.open(store_url, registry=registry, worker="w")
    task = s.submit("both")
    worker = Worker(s, concurrency=4, poll_ms=10)
    stopping.append(worker)
    thread = run_in_thread(worker)
    wait_until(lambda: s.task(task).status == "terminal", timeout_s=15)
    later = s.submit("other")  # the loop goes on for the others too
    wait_until(lambda: s.task(later).status == "terminal", timeout_s=15)
    history = s.history(task)
    kinds = [type(e).__name__ for e in history]
    assert kinds.index("ChunksEmitted") < kinds.index("MemoRecorded"), kinds
    memos = {getattr(e, "name", None) for e in history if type(e).__name__ == "MemoRecorded"}
    assert memos == {"a", "b"} and kinds[-1] == "TaskEnded", kinds
    worker.stop()
    thread.join(15)
