"""Scheduler.batch(): commands decide as usual, their events are appended in one
transaction when the batch exits; if it cannot be appended, nothing of it is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import event_count

from tasktrail.domain import (
    ConflictError,
    ManualClock,
    Refused,
    Registry,
    RuleViolation,
    Scheduler,
    open_store,
)
from tasktrail.replay import replay, verify


def workload(s: Scheduler, clock: ManualClock) -> list[str]:
    """Owner trees, a wait, a refusal, a run pass: every kind of decision."""
    owner = s.submit("job", id="owner")
    children = [s.submit("leaf", owner=owner, id=f"child-{n}") for n in range(3)]
    s.reserve(owner)
    s.wait(owner, children, "all", phase="end")
    with pytest.raises(RuleViolation):
        s.checkpoint(children[0], "go")  # rule 1: pending, not running; appends nothing
    s.run_until_idle()
    lone = s.submit("job", id="lone")
    s.reserve(lone)
    s.memo(lone, "draft", {"words": 120})
    clock.advance(10)
    s.abort(lone)
    s.run_until_idle()
    return [owner, lone, *children]


def stored(location: str) -> list[tuple[Any, ...]]:
    """Every row as stored, minus the recording time (the one thing that differs) and the
    digest, which covers it."""
    with open_store(location) as store:
        rows = []
        for position, stream_id, version, topic, state in store.rows():
            payload = orjson.loads(state)
            payload.pop("timestamp")
            payload.pop("digest")
            rows.append((position, stream_id, version, topic, payload))
        return rows


def test_a_batch_appends_the_events_the_unbatched_path_appends(
    tmp_path: Path, registry: Registry
) -> None:
    plain_clock, batched_clock = ManualClock(1_000_000), ManualClock(1_000_000)
    plain = Scheduler.open(
        str(tmp_path / "plain.db"), clock=plain_clock, registry=registry, worker="w"
    )
    batched = Scheduler.open(
        str(tmp_path / "batched.db"), clock=batched_clock, registry=registry, worker="w"
    )
    workload(plain, plain_clock)
    with batched.batch():
        workload(batched, batched_clock)
        assert batched.store.head() == 0  # nothing is appended before the batch exits
    assert batched.world.tasks == plain.world.tasks
    assert batched.events_written == plain.events_written
    assert batched.position == plain.position == plain.store.head()
    plain.close()
    batched.close()
    assert stored(str(tmp_path / "batched.db")) == stored(str(tmp_path / "plain.db"))
    # Replay of the batched log is the same state, and the stored bytes differ only
    # in the recording time.
    assert replay(tmp_path / "batched.db") == replay(tmp_path / "plain.db")


def test_commands_inside_a_batch_see_each_other(scheduler: Scheduler) -> None:
    with scheduler.batch():
        task_id = scheduler.submit("job")
        assert scheduler.task(task_id).status == "pending"
        assert scheduler.reserve(task_id) == "run"
        scheduler.checkpoint(task_id, "end")
        assert scheduler.task(task_id).checkpoint is not None
        assert scheduler.store.head() == 0
    assert event_count(scheduler.store) == 3
    assert [type(e).__name__ for e in scheduler.history(task_id)] == [
        "TaskSubmitted",
        "TaskReserved",
        "CheckpointCommitted",
    ]


def test_a_refused_command_in_a_batch_appends_nothing_of_its_own(scheduler: Scheduler) -> None:
    with scheduler.batch():
        first = scheduler.submit("job", id="first")
        with pytest.raises(RuleViolation) as refused:
            scheduler.finish(first, "completed")  # rule 1: pending, not running
        assert refused.value.rule == 1
        with pytest.raises(Refused):
            scheduler.submit("job", id="first")  # the id is taken, by this very batch
        second = scheduler.submit("job", id="second")
    assert scheduler.store.head() == 2
    assert [e.task_id for e in (r.event for r in scheduler.store.read())] == [first, second]
    assert scheduler.task(first).status == "pending"


def test_a_conflict_at_exit_appends_nothing_of_the_batch(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    first = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = first.submit("job")
    other = Scheduler.open(store_url, clock=clock, registry=registry)
    head = first.store.head()
    with pytest.raises(ConflictError), first.batch():
        unrelated = first.submit("leaf")  # would be fine on its own
        first.reserve(task_id)
        other.reserve(task_id)  # another writer takes the task's next version first
    # Nothing of the batch was appended: only the other writer's reservation is there.
    assert first.store.head() == head + 1
    assert first.world.get(unrelated) is None
    # The world is what the store holds: the other writer's reservation, no invocation here.
    assert first.world.tasks == replay(store_url).tasks
    assert first.task(task_id).status == "running"
    assert task_id not in first._invocations
    with pytest.raises(Refused):
        first.reserve(task_id)  # running elsewhere: refused on the refreshed state
    first.close()
    other.close()


def test_an_error_inside_the_block_discards_the_batch(scheduler: Scheduler) -> None:
    kept = scheduler.submit("job", id="kept")
    with pytest.raises(KeyError), scheduler.batch():
        scheduler.submit("job", id="dropped")
        scheduler.reserve(kept)
        raise KeyError("the caller's own failure")
    assert scheduler.store.head() == 1
    assert scheduler.world.get("dropped") is None
    assert scheduler.task(kept).status == "pending"
    assert scheduler.reserve(kept) == "run"  # deciding again works from the store's state


def test_batches_nest_and_the_outermost_appends(scheduler: Scheduler) -> None:
    with scheduler.batch():
        scheduler.submit("job", id="a")
        with scheduler.batch():
            scheduler.submit("job", id="b")
        assert scheduler.store.head() == 0
    assert scheduler.store.head() == 2


def test_closing_inside_a_batch_appends_it_first(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    with s.batch():
        task_id = s.submit("job")
        s.reserve(task_id)
        s.close()  # stops the running task (rule 10), then appends the batch
    reopened = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    assert reopened.task(task_id).status == "pending"
    assert [type(e).__name__ for e in reopened.history(task_id)] == [
        "TaskSubmitted",
        "TaskReserved",
        "TaskStopped",
    ]
    reopened.close()


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_a_batch_is_one_transaction(tmp_path: Path, registry: Registry, durability: Any) -> None:
    s = Scheduler.open(
        str(tmp_path / "t.db"), clock=ManualClock(0), registry=registry, durability=durability
    )
    calls: list[int] = []
    original: Callable[..., Any] = s.store.app.recorder.insert_events

    def counting(rows: Any, **kwargs: Any) -> Any:
        calls.append(len(rows))
        return original(rows, **kwargs)

    s.store.app.recorder.insert_events = counting  # type: ignore[method-assign]
    with s.batch():
        for n in range(50):
            task_id = s.submit("leaf", id=f"t{n}")
            s.reserve(task_id)
    assert calls == [100]
    assert [r.position for r in s.store.read()] == list(range(1, 101))
    s.close()


def test_a_conflict_in_a_batch_refolds_only_the_tasks_it_wrote(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    first = Scheduler.open(store_url, clock=clock, registry=registry)
    with first.batch():
        history = [first.submit("job", id=f"old-{n}") for n in range(100)]
        for task_id in history:
            first.abort(task_id)
    owner = first.submit("job", id="owner")
    first.reserve(owner)
    other = Scheduler.open(store_url, clock=clock, registry=registry)
    read: list[int] = []
    original = first.store.read

    def counted(*args: Any, **kwargs: Any) -> Any:
        for recorded in original(*args, **kwargs):
            read.append(recorded.position)
            yield recorded

    first.store.read = counted  # type: ignore[method-assign]
    with pytest.raises(ConflictError), first.batch():
        first.submit("leaf", id="child", owner=owner)
        first.submit("job", id="new")
        first.abort("old-3")  # already ended: changes nothing
        first.wait(owner, ["child"], "all", phase="end")
        other.abort(owner)  # another writer changes the owner first
        first.submit("job", id="after-the-mark")
    # Only what came after the scheduler's position was read, not the whole log.
    assert len(read) <= 3
    fresh = replay(store_url)
    assert first.world.tasks == fresh.tasks
    for name in ("live", "live_children", "waiters", "sleeping"):
        assert getattr(first.world, name) == getattr(fresh.world, name), name
    assert first.world.indexes["live_order"] == fresh.world.indexes["live_order"]
    assert first.world.indexes["task_seq"] == fresh.world.indexes["task_seq"]
    assert first.world.indexes["cancelling"] == fresh.world.indexes["cancelling"]
    assert first.world.counts == fresh.world.counts and first.world.folded == fresh.events
    assert owner in first.world.indexes["cancelling"]
    assert first.task(owner).abort_requested
    # A snapshot of the world after the undo is the fold's, as verify checks.
    first.snapshot()
    other.close()
    first.close()
    assert verify(store_url).ok
