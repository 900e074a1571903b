"""What issue 27 proved of a worker's invocations holds for the async ones run on its
event loop (issue 43, item 1): the bound is reached and never exceeded, one task never
has two invocations, a stop gives the phases their grace and returns within it and
2 s, fencing refuses each invocation's next decision, and each phase has one span,
current inside it."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

from helpers.async_invocations import run_in_thread, wait_until
from helpers.async_invocations import stopping as stopping  # a fixture
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

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
from tasktrail.domain.tasks.events import TaskEnded, TaskRecovered, TaskReserved, TaskStopped
from tasktrail.projections.trace import rebuild


class Intervals:
    """Phases record when they start and end, and on which thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[str, float, float]] = []
        self.in_flight = 0
        self.peak = 0
        self.threads: set[str] = set()

    async def phase(self, inv: Any, wait_s: float) -> float:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.threads.add(threading.current_thread().name)
        started = time.monotonic()
        await asyncio.sleep(wait_s)
        with self.lock:
            self.in_flight -= 1
            self.spans.append((inv.task_id, started, time.monotonic()))
        return started

    def overlapping_invocations_of_one_task(self) -> list[str]:
        by_task: dict[str, list[tuple[float, float]]] = {}
        for task_id, start, end in self.spans:
            by_task.setdefault(task_id, []).append((start, end))
        problems = []
        for task_id, spans in by_task.items():
            spans.sort()
            for (_, end_a), (start_b, _) in itertools.pairwise(spans):
                if start_b < end_a:
                    problems.append(task_id)
        return problems


def async_registry(log: Intervals, wait_s: float = 0.03) -> Registry:
    """``agent``: three async phases, two returning the next one's name, one
    checkpointing with the awaitable form, and an async finish."""

    async def think(inv: Any) -> str:
        await log.phase(inv, wait_s)
        return "act"

    async def act(inv: Any) -> None:
        await log.phase(inv, wait_s)
        await inv.checkpoint_async("report")

    async def report(inv: Any) -> None:
        await log.phase(inv, wait_s)
        await inv.finish_async("completed", result=inv.task_id)

    phases = {"think": think, "act": act, "report": report}
    return Registry([TaskDefinition("agent", 1, phases)])


def test_the_bound_holds_and_is_reached_for_async_phases_on_the_loop(
    store_url: str, stopping: list[Worker]
) -> None:
    log = Intervals()
    s = Scheduler.open(store_url, registry=async_registry(log), worker="w")
    tasks = [s.submit("agent") for _ in range(12)]
    worker = Worker(s, concurrency=4, poll_ms=10)
    stopping.append(worker)
    thread = run_in_thread(worker)
    wait_until(lambda: all(s.task(t).status == "terminal" for t in tasks))
    assert all(s.result(t).result == t for t in tasks)
    worker.stop()
    thread.join(15)
    assert not thread.is_alive()
    assert log.peak <= 4 and worker.invocations.peak <= 4, (log.peak, worker.invocations.peak)
    assert log.peak >= 3, f"at most {log.peak} phases ran at once: no concurrency"
    assert log.overlapping_invocations_of_one_task() == []
    assert len(log.spans) == 36
    assert log.threads == {"tasktrail-loop-w"}
    assert worker.invocations.phase_threads.threads == 0


def test_no_task_has_two_async_invocations_across_two_concurrent_workers(
    store_url: str, stopping: list[Worker]
) -> None:
    log = Intervals()
    registry = async_registry(log, wait_s=0.01)
    a = Scheduler.open(store_url, registry=registry, worker="a")
    b = Scheduler.open(store_url, registry=registry, worker="b")
    tasks = [a.submit("agent") for _ in range(16)]
    workers = [Worker(a, concurrency=8, poll_ms=10), Worker(b, concurrency=8, poll_ms=10)]
    stopping.extend(workers)
    threads = [run_in_thread(w) for w in workers]
    wait_until(lambda: all(a.task(t).status == "terminal" for t in tasks), 60)
    for worker in workers:
        worker.stop()
    for thread in threads:
        thread.join(15)
    assert log.overlapping_invocations_of_one_task() == []
    assert log.threads <= {"tasktrail-loop-a", "tasktrail-loop-b"}
    with Scheduler.open(store_url, worker="reader") as reader:
        for task_id in tasks:
            history = reader.history(task_id)
            assert sum(isinstance(e, TaskEnded) for e in history) == 1
            assert [e for e in history if isinstance(e, TaskRecovered)] == []


def blocked_registry(release: threading.Event, started: list[str]) -> Registry:
    """``blocked``: an async phase that waits for ``release`` (polling it on the loop),
    then records a memo and moves on through the awaitable forms."""

    async def blocked(inv: Any) -> None:
        started.append(inv.task_id)
        try:
            while not release.is_set():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            started.append("cancelled")
            raise
        await inv.memo_async("late", True)
        await inv.checkpoint_async("after")

    async def after(inv: Any) -> None:
        await inv.finish_async()

    return Registry([TaskDefinition("blocked", 1, {"go": blocked, "after": after})])


def test_a_stop_gives_async_phases_their_grace_and_starts_no_further_phase(
    store_url: str,
) -> None:
    release, started = threading.Event(), []
    s = Scheduler.open(store_url, registry=blocked_registry(release, started), worker="w")
    tasks = [s.submit("blocked") for _ in range(3)]
    worker = Worker(s, concurrency=4, grace_s=10, poll_ms=10)
    thread = run_in_thread(worker)
    wait_until(lambda: len(started) == 3)
    worker.stop()
    assert thread.is_alive()  # in its grace period: the phases still wait
    release.set()
    thread.join(10)
    assert not thread.is_alive()
    with Scheduler.open(store_url, worker="reader") as reader:
        for task_id in tasks:
            task = reader.task(task_id)
            assert (task.status, task.restarts, task.memos.get("late")) == ("pending", 0, True)
            assert task.checkpoint is not None and task.checkpoint.phase == "after"
            assert any(isinstance(e, TaskStopped) for e in reader.history(task_id))


def test_past_the_grace_async_phases_are_cancelled_and_the_stop_returns_within_2_s(
    store_url: str,
) -> None:
    release, started = threading.Event(), []
    s = Scheduler.open(store_url, registry=blocked_registry(release, started), worker="w")
    tasks = [s.submit("blocked") for _ in range(20)]
    worker = Worker(s, concurrency=20, grace_s=0.3, poll_ms=10)
    thread = run_in_thread(worker)
    wait_until(lambda: len(started) == 20)
    stopped_at = time.monotonic()
    worker.stop()
    thread.join(10)
    assert time.monotonic() - stopped_at < 0.3 + 2
    wait_until(lambda: started.count("cancelled") == 20)  # each got its CancelledError
    with Scheduler.open(store_url, worker="reader") as reader:
        for task_id in tasks:
            task = reader.task(task_id)
            # Rule 10: the close is not a crash; a cancelled phase recorded nothing.
            assert (task.status, task.restarts, task.outcome) == ("pending", 0, None)
            assert task.checkpoint is not None and task.checkpoint.phase == "go"
            assert "late" not in task.memos


def test_fencing_refuses_each_async_invocations_next_decision(
    store_url: str, clock: ManualClock
) -> None:
    """A worker whose lease lapsed while its async phases waited on its loop: another
    takes the tasks, and each invocation's next decision (an awaitable memo) is refused
    with LeaseLost, recording nothing; every task ends once, in the second worker."""
    release, started = threading.Event(), []
    refused: list[BaseException] = []
    registry = blocked_registry(release, started)
    slow = Scheduler.open(store_url, clock=clock, registry=registry, worker="slow", lease=1_000)
    tasks = [slow.submit("blocked") for _ in range(3)]
    real_memo_async = slow.memo_async

    async def memo_async(task_id: str, name: str, value: Any = None) -> Any:
        try:
            return await real_memo_async(task_id, name, value)
        except RuleViolation as error:
            refused.append(error)
            raise

    slow.memo_async = memo_async  # type: ignore[method-assign]
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
    release.set()
    ticking.join(10)
    assert not ticking.is_alive()
    assert len(refused) == 3 and all(isinstance(e, LeaseLost) for e in refused), refused
    for task_id, mode in modes.items():
        taker.run_invocation(task_id, mode, taken)
    for task_id in tasks:
        history = taker.history(task_id)
        assert sum(isinstance(e, TaskEnded) for e in history) == 1
        assert [e.worker for e in history if isinstance(e, TaskReserved)] == ["slow", "taker"]
    taker.close()
    slow.close()


def test_one_span_per_async_phase_current_inside_it_as_history_rebuilds(
    sqlite_url: str, tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = tracer_provider.get_tracer("host")

    async def think(inv: Any) -> str:
        await asyncio.sleep(0.01)  # other tasks' phases run meanwhile
        with tracer.start_as_current_span("model.call", attributes={"task": inv.task_id}):
            await asyncio.sleep(0.01)
        return "act"

    async def act(inv: Any) -> None:
        with tracer.start_as_current_span("tool.call", attributes={"task": inv.task_id}):
            await asyncio.sleep(0.01)
        await inv.finish_async()

    registry = Registry([TaskDefinition("agent", 1, {"think": think, "act": act})])
    s = Scheduler.open(sqlite_url, registry=registry, worker="w")
    s.configure_telemetry(tracer_provider)
    tasks = [s.submit("agent") for _ in range(8)]
    worker = Worker(s, concurrency=8)
    while not all(s.task(t).status == "terminal" for t in tasks):
        worker.tick()
    assert worker.invocations.peak >= 3
    spans = exporter.get_finished_spans()
    phases = [span for span in spans if span.name == "tasktrail.phase"]
    by_task: dict[str, dict[str, Any]] = {}
    for span in phases:
        mine = by_task.setdefault(str(span.attributes["task.id"]), {})  # type: ignore[index]
        assert span.attributes["phase"] not in mine, "two spans of one phase"  # type: ignore[index]
        mine[str(span.attributes["phase"])] = span  # type: ignore[index]
    assert sorted(by_task) == sorted(tasks)
    assert all(sorted(mine) == ["act", "think"] for mine in by_task.values())
    for name, phase in (("model.call", "think"), ("tool.call", "act")):
        calls = [span for span in spans if span.name == name]
        assert len(calls) == 8
        for call in calls:
            owner = by_task[str(call.attributes["task"])][phase]  # type: ignore[index]
            assert call.parent is not None and call.parent.span_id == owner.context.span_id
            assert call.context.trace_id == owner.context.trace_id
    s.close()
    live = {(span.context.span_id, span.attributes["phase"]) for span in phases}  # type: ignore[index]
    rebuilt = {
        (span.context.span_id, span.attributes["phase"])
        for span in rebuild(sqlite_url)
        if span.name == "tasktrail.phase"
    }
    assert live == rebuilt
