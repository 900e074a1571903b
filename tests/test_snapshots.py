"""Issue 14: snapshots and a world of live work.

A snapshot is the world as of a log position, saved beside the log; opening a
store, ``replay --until`` and a reopened scheduler start from one and fold the
events after it. These tests hold it to the fold: snapshot(P) + fold(P..end)
equals fold(0..end), the live world equals the full fold restricted to what is
live, and a dropped task reads back the same. A snapshot that is corrupt, of
another format or that differs from the fold is reported, never trusted: that is
in ``test_snapshots_untrusted.py``.
"""

from __future__ import annotations

import importlib
import itertools
import logging

import pytest
from conftest import examples
from helpers.snapshots_stores import assert_same_as_full_fold, fresh, kinds
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    Scheduler,
    UnknownTask,
    World,
    open_store,
)
from tasktrail.domain.history import SnapshotTable, restore, take_snapshot
from tasktrail.replay import replay, verify
from tasktrail.replay.harness import Harness, crash
from tasktrail.replay.strategies import Command, command_sequences

HISTORY = [
    *[Command("submit", (None,)) for _ in range(8)],
    Command("mint_run", (5,)),
    Command("mint_run", (6,)),
    Command("job_ends", (5, "completed")),
    Command("reconcile"),
    Command("start_turn", (0, "leader")),
    Command("start_turn", (1, "worker")),
    Command("request_wakeup", (1, "mail")),
    Command("request_wakeup", (2, "mail")),
    Command("observe_exit", (1, "worker")),
    Command("controller_pass"),
    Command("run_pass"),
    Command("run_pass"),
    *[Command("submit", (None,)) for _ in range(3)],
    Command("reserve", (8,)),
    Command("start_turn", (9, "worker")),
    Command("request_wakeup", (9, "ping")),
    Command("mint_run", (10,)),
]
"""An opening with every kind of stream (tasks with Turns, runs, wakeups, passes) that
leaves ended tasks behind (kind ``a`` completes, ``b`` fails) before the random
commands, so that a snapshot has something to drop and something live to keep."""


@kinds
@settings(max_examples=examples(5, 50))
@given(steps=command_sequences(min_size=10, max_size=40), where=st.floats(0, 1))
def test_snapshot_at_any_position_plus_the_tail_equals_the_full_fold(
    kind: str, steps: list, where: float
) -> None:
    with fresh(kind) as location:
        harness = Harness(location)
        harness.run(HISTORY + steps)
        crash(harness.scheduler)  # dropped: no snapshot at close
        with open_store(location) as store:
            full = restore(store, snapshots=False).world
            position = int(where * store.head())
            at = restore(store, position, snapshots=False)
            take_snapshot(store, at.world, at.position)
            restored = restore(store)
            assert restored.snapshot == at.position and not restored.problems
            assert restored.position == store.head()
            assert restored.folded == full.folded - at.world.folded
            assert_same_as_full_fold(restored.world, full)
        # A scheduler opened on it holds the live work and reads the rest back.
        reopened = Scheduler.open(location, clock=harness.clock, registry=harness.registry)
        try:
            assert set(reopened.world.live) == set(full.live)
            for task_id, task in full.tasks.items():
                if task.status == "terminal" or task_id not in reopened.world.live:
                    continue
                assert reopened.world.tasks[task_id].id == task_id
        finally:
            crash(reopened)


@kinds
def test_an_open_holds_the_live_work_and_reads_an_ended_task_back(
    kind: str, clock: ManualClock, registry: Registry
) -> None:
    with fresh(kind) as location:
        s = Scheduler.open(location, clock=clock, registry=registry)
        ended = [s.submit("job", phase="a") for _ in range(30)]
        for task_id in ended:
            s.reserve(task_id)
            s.finish(task_id, "completed")
        live = s.submit("job", phase="a")
        # Rule 4 (terminal is absorbing) refuses the same way before and after the reopen.
        with pytest.raises(Exception) as before:
            s.finish(ended[0], "failed")
        s.close()
        reopened = Scheduler.open(location, clock=clock, registry=registry)
        try:
            assert set(reopened.world.tasks) == {live}
            with pytest.raises(type(before.value)) as after:
                reopened.finish(ended[0], "failed")
            assert str(after.value) == str(before.value)
            assert reopened.task(ended[0]).status == "terminal"
            # Rule 1: an id no event created is still unknown.
            with pytest.raises(UnknownTask):
                reopened.task("never-submitted")
            # Rule 4's outcome of an awaited task that ended reads back.
            reopened.reserve(live)
            reopened.wait(live, [ended[1]], "all")
            assert reopened.task(live).status in ("waiting", "pending", "running")
        finally:
            reopened.close()


@kinds
def test_snapshots_are_taken_every_n_events_and_at_close(
    kind: str, clock: ManualClock, registry: Registry
) -> None:
    with fresh(kind) as location:
        s = Scheduler.open(location, clock=clock, registry=registry, snapshot_every=10)
        for _ in range(12):
            task_id = s.submit("job", phase="a")
            s.reserve(task_id)
            s.finish(task_id, "completed")
        taken = SnapshotTable(s.store).positions()
        assert len(taken) >= 3 and all(b - a >= 10 for a, b in itertools.pairwise(taken))
        s.submit("job", phase="a")
        s.close()
        with open_store(location, read_only=True) as store:
            assert SnapshotTable(store).positions()[-1] == store.head()
            assert verify(store).ok


@kinds
def test_a_writer_that_decides_in_batches_takes_its_snapshots_too(
    kind: str, clock: ManualClock, registry: Registry
) -> None:
    """Inside a batch no snapshot is due (its events are not stored yet): one is taken
    when the batch is appended, so a writer that only ever decides in batches (bulk
    submission) does not leave an open, or ``replay --until``, all it wrote to fold."""
    with fresh(kind) as location:
        s = Scheduler.open(location, clock=clock, registry=registry, snapshot_every=10)
        for _ in range(5):
            with s.batch():
                for _ in range(8):
                    s.submit("job", phase="a")
        taken = SnapshotTable(s.store).positions()
        head = s.store.head()
        crash(s)  # no close snapshot: what the batches took alone
        assert len(taken) >= 2 and head - taken[-1] < 10, (taken, head)
        with open_store(location, read_only=True) as store:
            assert verify(store).ok


def test_replay_until_starts_from_the_nearest_snapshot(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry, snapshot_every=20)
    for _ in range(25):
        task_id = s.submit("job", phase="a")
        s.reserve(task_id)
        s.finish(task_id, "completed")
    s.submit("job", phase="a")
    s.close()
    with open_store(sqlite_url, read_only=True) as store:
        taken = SnapshotTable(store).positions()
        head = store.head()
    middle = taken[1] + 3
    quick = replay(sqlite_url, until=middle)
    assert quick.snapshot == taken[1] and quick.position == middle
    slow = replay(sqlite_url, until=middle, snapshots=False)
    assert slow.snapshot is None
    assert quick.summary() == slow.summary()
    assert {t.id for t in quick.live.values()} == {t.id for t in slow.live.values()}
    assert quick.state_hash() == slow.state_hash()  # completes: every task and table
    assert quick == slow
    end = replay(sqlite_url)
    assert (
        end.snapshot == taken[-1] == head
        and end.summary() == replay(sqlite_url, snapshots=False).summary()
    )


def test_a_snapshot_that_cannot_be_made_never_fails_a_command_or_close(
    sqlite_url: str,
    clock: ManualClock,
    registry: Registry,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry, snapshot_every=2)
    with pytest.raises(InvalidArgument, match="inside a batch"), s.batch():
        s.submit("job", phase="a")
        s.snapshot()

    def broken(world: World) -> bytes:
        raise TypeError("a world holds a thing")

    module = importlib.import_module("tasktrail.domain.history.restore")
    monkeypatch.setattr(module, "encode_world", broken)
    with caplog.at_level(logging.WARNING, logger="tasktrail.snapshots"):
        for _ in range(4):
            s.submit("job", phase="a")  # a snapshot is due along the way
        s.close()
    assert "no snapshot taken" in caplog.text
    with open_store(sqlite_url, read_only=True) as store:
        assert SnapshotTable(store).positions() == []
        assert store.head() == 4
