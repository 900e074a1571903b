"""A batch belongs to the thread (or asyncio task) that opened it (issue 40, item 2).

While one thread is inside ``with s.batch()``, another thread's commands neither join
the batch nor see what it decided: they are recorded when they return, whatever the
batch does, and they decide on what the store holds. A batch refused at its exit
(another thread's commit overtook one of its decisions) raises for its owner alone."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from tasktrail.domain import (
    ConflictError,
    ManualClock,
    Refused,
    Registry,
    Scheduler,
    UnknownTask,
    open_store,
)
from tasktrail.replay import replay, verify

T = TypeVar("T")
WAIT_S = 10
"""The longest a test waits for another thread (a hang fails it, it never sleeps)."""


@pytest.fixture
def s(store_url: str, clock: ManualClock, registry: Registry) -> Iterator[Scheduler]:
    opened = Scheduler.open(store_url, clock=clock, registry=registry, worker="w")
    yield opened
    opened.close()


@pytest.fixture
def other_thread() -> Iterator[Callable[[Callable[[], T]], T]]:
    """Run a call in another thread (a web handler beside the batch's) and return
    what it returned, or raise what it raised."""
    with ThreadPoolExecutor(max_workers=1) as pool:

        def call(fn: Callable[[], T]) -> T:
            return pool.submit(fn).result(timeout=WAIT_S)

        yield call


def stored_ids(location: str) -> list[str]:
    """The task id of every event the store holds, in log order (a separate reader)."""
    with open_store(location) as store:
        return [recorded.event.task_id for recorded in store.read()]


def test_another_threads_submit_is_recorded_though_the_batch_raises(
    s: Scheduler, store_url: str, other_thread: Callable[[Callable[[], Any]], Any]
) -> None:
    with pytest.raises(KeyError), s.batch():
        s.submit("job", id="in-batch")
        assert other_thread(lambda: s.submit("job", id="from-b")) == "from-b"
        assert stored_ids(store_url) == ["from-b"]  # recorded when it returned
        raise KeyError("the batch's own failure")
    assert stored_ids(store_url) == ["from-b"]
    assert s.task("from-b").status == "pending"
    with pytest.raises(UnknownTask):
        s.task("in-batch")


def test_another_thread_sees_only_what_is_committed(
    s: Scheduler, store_url: str, other_thread: Callable[[Callable[[], Any]], Any]
) -> None:
    s.submit("job", id="committed")
    with pytest.raises(ConflictError), s.batch():
        s.submit("job", id="mine")
        assert s.task("mine").status == "pending"  # the batch sees its own decisions

        def handler() -> None:
            with pytest.raises(UnknownTask):
                s.task("mine")  # not committed: unknown, as any id no event created
            assert [t.id for t in s.tasks()] == ["committed"]
            with pytest.raises(Refused):
                s.submit("job", id="committed")  # committed: taken
            s.submit("job", id="mine")  # not committed: free, and now taken

        other_thread(handler)
    # The batch's submit of the same id lost to the committed one: nothing of it is there.
    assert stored_ids(store_url) == ["committed", "mine"]
    assert s.task("mine").events == 1
    assert s.world.tasks == replay(store_url).tasks


def test_a_raising_batch_writes_nothing_though_another_threads_batch_commits(
    s: Scheduler, store_url: str
) -> None:
    opened, a_left = threading.Event(), threading.Event()

    def other_batch() -> None:
        with s.batch():
            s.submit("job", id="b-1")
            opened.set()
            assert a_left.wait(WAIT_S)  # a's batch raises while this one is open
            s.submit("job", id="b-2")

    with ThreadPoolExecutor(max_workers=1) as pool:
        with pytest.raises(KeyError), s.batch():
            s.submit("job", id="a-1")
            b = pool.submit(other_batch)
            assert opened.wait(WAIT_S)
            s.submit("job", id="a-2")
            raise KeyError("a's own failure")
        a_left.set()
        b.result(timeout=WAIT_S)
    assert stored_ids(store_url) == ["b-1", "b-2"]
    assert s.world.tasks == replay(store_url).tasks


def test_two_threads_batches_each_commit_their_own_at_their_exit(
    s: Scheduler, store_url: str
) -> None:
    both_open, a_done = threading.Barrier(2, timeout=WAIT_S), threading.Event()

    def b_batch() -> None:
        with s.batch():
            s.submit("job", id="b-1")
            both_open.wait()
            assert a_done.wait(WAIT_S)
            with pytest.raises(UnknownTask):
                s.task("a-1")  # committed after this batch began: not in its view
            s.submit("leaf", id="b-2", owner="b-1")
        assert stored_ids(store_url)[-2:] == ["b-1", "b-2"]  # one append, at its exit

    with ThreadPoolExecutor(max_workers=1) as pool:
        b = pool.submit(b_batch)
        with s.batch():
            s.submit("job", id="a-1")
            both_open.wait()
            with pytest.raises(UnknownTask):
                s.task("b-1")
            s.submit("leaf", id="a-2", owner="a-1")
        assert stored_ids(store_url) == ["a-1", "a-2"]  # recorded when the block exits
        a_done.set()
        b.result(timeout=WAIT_S)
    assert stored_ids(store_url) == ["a-1", "a-2", "b-1", "b-2"]
    # The world holds the log's order, as a fold of the store does.
    fresh = replay(store_url)
    assert s.world.tasks == fresh.tasks
    for name in ("live", "live_children"):
        assert getattr(s.world, name) == getattr(fresh.world, name), name
    assert s.world.indexes["live_order"] == fresh.world.indexes["live_order"]
    assert s.world.indexes["task_seq"] == fresh.world.indexes["task_seq"]
    assert s.world.counts == fresh.world.counts and s.world.folded == fresh.events
    s.snapshot()
    assert verify(store_url).ok


def test_a_batch_another_thread_overtook_is_refused_for_its_owner_alone(
    s: Scheduler, store_url: str, other_thread: Callable[[Callable[[], Any]], Any]
) -> None:
    task_id = s.submit("job", id="contested")
    head = s.store.head()
    with pytest.raises(ConflictError), s.batch():
        s.submit("job", id="unrelated")
        assert s.reserve(task_id) == "run"
        mine = s._invocations[task_id]
        # Another thread reserves the task as the store has it (pending), first.
        assert other_thread(lambda: s.reserve(task_id)) == "run"
    assert mine.ended
    theirs = s._invocations[task_id]
    assert theirs is not mine and not theirs.ended  # the other thread's is untouched
    assert s.store.head() == head + 1
    assert stored_ids(store_url) == ["contested", "contested"]
    assert s.task(task_id).status == "running"
    with pytest.raises(UnknownTask):
        s.task("unrelated")


def test_an_asyncio_tasks_batch_is_not_joined_by_another_task_on_its_loop(
    s: Scheduler, store_url: str
) -> None:
    async def main() -> None:
        opened, seen = asyncio.Event(), asyncio.Event()

        async def batching() -> None:
            with s.batch():
                await asyncio.to_thread(s.submit, "job", id="a-1")  # its context: joins
                s.submit("job", id="a-2")
                opened.set()
                await seen.wait()
                assert stored_ids(store_url) == ["b-1"]
            assert stored_ids(store_url) == ["b-1", "a-1", "a-2"]

        async def handler() -> None:
            await opened.wait()
            # Recorded when it returns, on the same loop as the open batch.
            s.submit("job", id="b-1")
            assert stored_ids(store_url) == ["b-1"]
            with pytest.raises(UnknownTask):
                await asyncio.to_thread(s.task, "a-1")
            seen.set()

        await asyncio.wait_for(asyncio.gather(batching(), handler()), WAIT_S)

    asyncio.run(main())
    assert s.world.tasks == replay(store_url).tasks


def test_a_batch_finds_a_task_another_writer_submitted_after_its_view_was_taken(
    s: Scheduler, store_url: str, clock: ManualClock, registry: Registry
) -> None:
    other = Scheduler.open(store_url, clock=clock, registry=registry, worker="other")
    with s.batch():
        s.submit("job", id="mine")
        other.submit("job", id="theirs")
        # Unknown to the view: taken again with the store's new events, its own on top.
        s.submit("leaf", id="child", owner="theirs")
        assert s.task("mine").status == "pending"
    assert stored_ids(store_url) == ["theirs", "mine", "child"]
    assert s.world.tasks == replay(store_url).tasks
    other.close()
