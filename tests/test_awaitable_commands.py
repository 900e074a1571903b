"""The awaitable forms of a phase's decisions (issue 43, item 1): ``await
inv.checkpoint_async(...)``, ``finish_async``, ``memo_async``, ``wait_async``,
``sleep_async``, ``wait_message_async``, ``submit_async`` and ``Scheduler.send_async``
decide what the plain forms decide, under the same rules, through the group commit, and
the event loop goes on while they wait for the scheduler's lock and the store."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from tasktrail.domain import (
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.invoking import loop_commit
from tasktrail.domain.tasks.events import TaskEnded
from tasktrail.domain.tasks.messages import MessageSent


def wait_until(predicate: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def workflow_registry(threads: set[str]) -> Registry:
    """``parent`` submits a ``child`` and waits for it, reads its answer, waits for an
    approval message, sleeps, and finishes with both; every decision awaited."""

    async def plan(inv: Any) -> None:
        threads.add(threading.current_thread().name)
        child = await inv.submit_async("child", key=f"child-of-{inv.task_id}")
        assert await inv.submit_async("child", key=f"child-of-{inv.task_id}") == child
        await inv.memo_async("child", child)
        await inv.wait_async([child], then="collect")

    async def answer(inv: Any) -> None:
        threads.add(threading.current_thread().name)
        await inv.finish_async("completed", result={"answer": 42})

    async def collect(inv: Any) -> None:
        outcome = inv.outcome(inv.memo("child"))
        await inv.memo_async("answer", outcome.result["answer"])
        await inv.wait_message_async("approval", phase="approved", timeout_s=60)

    async def approved(inv: Any) -> None:
        await inv.memo_async("approval", inv.message("approval"))
        await inv.sleep_async(inv.now(), then="end")  # due at once

    async def end(inv: Any) -> None:
        threads.add(threading.current_thread().name)
        memos = {name: inv.memo(name) for name in ("answer", "approval")}
        await inv.finish_async("completed", result=memos)

    phases = {"plan": plan, "collect": collect, "approved": approved, "end": end}
    return Registry(
        [TaskDefinition("parent", 1, phases), TaskDefinition("child", 1, {"go": answer})]
    )


def test_the_awaitable_forms_take_a_whole_workflow_on_the_loop(store_url: str) -> None:
    threads: set[str] = set()
    s = Scheduler.open(store_url, registry=workflow_registry(threads), worker="w")
    parent = s.submit("parent")
    worker = Worker(s, concurrency=4, poll_ms=10)
    running = threading.Thread(target=worker.run, daemon=True)
    running.start()
    try:
        wait_until(lambda: s.task(parent).message_topic == "approval")
        assert asyncio.run(s.send_async(parent, "approval", "yes", actor="ops")) == 1
        outcome = s.result(parent, timeout=30)
        assert (outcome.status, outcome.result) == ("completed", {"answer": 42, "approval": "yes"})
        children = [t for t in s.tasks() if t.kind == "child"]
        assert len(children) == 1  # the second keyed submit returned the first's task
        assert threads == {"tasktrail-loop-w"}
        assert worker.invocations.phase_threads.threads == 0
    finally:
        worker.stop()
        running.join(15)


def test_an_awaitable_decision_after_the_invocation_ended_is_refused_by_rule_1(
    store_url: str, clock: ManualClock
) -> None:
    refused: list[RuleViolation] = []

    async def go(inv: Any) -> None:
        await inv.finish_async()
        try:
            await inv.checkpoint_async("again")
        except RuleViolation as refusal:
            refused.append(refusal)
            raise

    registry = Registry([TaskDefinition("once", 1, {"go": go, "again": go})])
    s = Scheduler.open(store_url, clock=clock, registry=registry, worker="w")
    task = s.submit("once")
    Worker(s, concurrency=2).tick()
    assert [r.rule for r in refused] == [1] and refused[0].task_id == task
    history = s.history(task)
    assert isinstance(history[-1], TaskEnded) and history[-1].status == "completed"
    s.close()


def test_a_decision_awaited_on_the_loop_leaves_the_loop_running_meanwhile(
    store_url: str,
) -> None:
    """While one phase's checkpoint waits for the scheduler's lock (held here), another
    phase on the same loop keeps running: the loop handed the decision over and went on.
    A plain ``inv.checkpoint`` there would hold the loop until the lock is free."""
    proceed, handed, ticked, recorded = (threading.Event() for _ in range(4))
    started: list[str] = []

    async def decides(inv: Any) -> None:
        started.append("decides")
        while not proceed.is_set():
            await asyncio.sleep(0.005)
        handed.set()
        await inv.checkpoint_async("done")
        recorded.set()

    async def ticks(inv: Any) -> None:
        started.append("ticks")
        while not handed.is_set():
            await asyncio.sleep(0.005)
        for _ in range(10):
            await asyncio.sleep(0.005)
        ticked.set()
        await inv.finish_async()

    async def done(inv: Any) -> None:
        await inv.finish_async()

    registry = Registry(
        [
            TaskDefinition("decides", 1, {"go": decides, "done": done}),
            TaskDefinition("ticks", 1, {"go": ticks}),
        ]
    )
    s = Scheduler.open(store_url, registry=registry, worker="w")
    tasks = [s.submit("decides"), s.submit("ticks")]
    worker = Worker(s, concurrency=2, poll_ms=10)
    running = threading.Thread(target=worker.run, daemon=True)
    running.start()
    try:
        wait_until(lambda: len(started) == 2)
        with s._lock:  # as a leader holds it through a slow commit
            proceed.set()
            assert handed.wait(30)
            assert ticked.wait(30), "the loop waited for the lock with the decision"
            assert not recorded.is_set()
        assert recorded.wait(30)
        wait_until(lambda: all(s.task(t).status == "terminal" for t in tasks))
    finally:
        worker.stop()
        running.join(15)


def test_decisions_handed_over_together_are_appended_in_rounds_each_released_at_once(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 300
    s = Scheduler.open(store_url, registry=Registry(), worker="w")
    with s.batch():
        tasks = [s.submit("job", phase="a") for _ in range(count)]
    steps: list[tuple[str, int]] = []
    real_append, real_release = s.store.append, loop_commit._settle

    def counting_append(events: Any, *args: Any, **kwargs: Any) -> Any:
        steps.append(("append", len(events)))
        return real_append(events, *args, **kwargs)

    def counting_release(handed: list[Any]) -> list[Any]:
        steps.append(("release", len(handed)))
        return real_release(handed)

    s.store.append = counting_append  # type: ignore[method-assign]
    monkeypatch.setattr(loop_commit, "_settle", counting_release)

    async def send_all() -> list[int]:
        return await asyncio.gather(*(s.send_async(t, "note", n) for n, t in enumerate(tasks)))

    sent: list[list[int]] = []
    with s._lock:  # every one is handed over before a leader takes any
        sending = threading.Thread(target=lambda: sent.append(asyncio.run(send_all())))
        sending.start()
        wait_until(lambda: s._committer().unsettled == count)
    sending.join(30)
    assert sent == [[1] * count]
    # The committer's first round took a round of what was handed by then (it waits as
    # one caller of the group commit); the rest go in rounds of an eighth of what is left,
    # 16 at the least, each appended in one transaction and its coroutines let go before
    # the next round is decided (a burst spreads out: the module's why).
    sizes = [n for step, n in steps if step == "append"]
    expected, left = [], count - sizes[0]
    while left:
        expected.append(min(left, max(loop_commit.ROUND, left // loop_commit.SPLIT)))
        left -= expected[-1]
    assert sizes[0] <= loop_commit.round_size(count) and sizes[1:] == expected, steps
    assert max(sizes) > loop_commit.ROUND  # the backlog's eighth, past the least round
    assert steps == [step for n in sizes for step in (("append", n), ("release", n))]
    # Appended in the order they were handed over.
    sent_to = [r.event.task_id for r in s.store.read() if isinstance(r.event, MessageSent)]
    assert sent_to == tasks
    s.close()


def test_run_pass_runs_phases_that_await_the_awaitable_forms(
    sqlite_url: str, clock: ManualClock
) -> None:
    async def first(inv: Any) -> None:
        await inv.memo_async("seen", 1)
        await inv.checkpoint_async("second")

    async def second(inv: Any) -> None:
        await inv.finish_async(result=inv.memo("seen"))

    registry = Registry([TaskDefinition("two", 1, {"first": first, "second": second})])
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task, hosted = s.submit("two"), s.submit("two")
    s.run_until_idle()

    async def host() -> None:  # a host whose own loop runs: the pass's loop is a thread's
        s.run_until_idle()

    asyncio.run(host())
    assert s.result(task).result == 1 and s.result(hosted).result == 1
    s.close()


def test_a_plain_command_from_an_async_phase_still_works(store_url: str) -> None:
    async def go(inv: Any) -> None:
        await asyncio.sleep(0)
        inv.memo("plain", True)  # holds the loop for one command
        inv.checkpoint("last")

    async def last(inv: Any) -> None:
        inv.finish(result=inv.memo("plain"))

    registry = Registry([TaskDefinition("plain", 1, {"go": go, "last": last})])
    s = Scheduler.open(store_url, registry=registry, worker="w")
    task = s.submit("plain")
    Worker(s, concurrency=2).tick()
    assert s.result(task, timeout=10).result is True
    s.close()
