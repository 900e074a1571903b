"""Issue 14: snapshots and a world of live work.

A snapshot is the world as of a log position, saved beside the log; opening a
store, ``replay --until`` and a reopened scheduler start from one and fold the
events after it. These tests hold it to the fold: snapshot(P) + fold(P..end)
equals fold(0..end), the live world equals the full fold restricted to what is
live, a dropped task reads back the same, and a snapshot that is corrupt, of
another format or that differs from the fold is reported, never trusted.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import examples, postgres_schema
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    Scheduler,
    UnknownTask,
    World,
    ledger_of,
    open_store,
)
from tasktrail.domain.history import (
    FORMAT,
    SnapshotTable,
    encode_world,
    open_body,
    restore,
    snapshot_body,
    take_snapshot,
)
from tasktrail.domain.history.codec import WORLD_PARTS, world_from
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


@contextlib.contextmanager
def fresh(kind: str) -> Iterator[str]:
    """A new, empty store location of ``kind`` (one per hypothesis example)."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield str(Path(folder) / "trail.db")
    else:
        with postgres_schema() as url:
            yield url


def compacted(world: World) -> dict[str, object]:
    """A world's parts after compaction (on a copy)."""
    copy = world.copy()
    copy.compact()
    return {part: getattr(copy, part) for part in WORLD_PARTS}


def assert_same_as_full_fold(world: World, full: World) -> None:
    """``world`` (live work, the rest read back) says of every stream what the full fold says."""
    assert compacted(world) == compacted(full)
    assert {t: world.tasks[t] for t in world.live} == {t: full.tasks[t] for t in full.live}
    assert world.counts == full.counts and world.folded == full.folded
    for name in ("pending_wakeups", "task_pass_retries", "open_cleanups"):
        assert world.indexes.get(name, {}) == full.indexes.get(name, {}), name
    ledger, whole = ledger_of(world), ledger_of(full)
    assert ledger.live == whole.live and ledger.schedules == whole.schedules
    assert {r: ledger.runs[r] for r in ledger.live} == {r: whole.runs[r] for r in whole.live}
    for task_id, task in full.tasks.items():
        assert world.get(task_id) == task, task_id
    for stream_id, state in full.streams.items():
        assert world.stream(stream_id) == state, stream_id
        assert world.version_of(stream_id, False) == full.stream_versions[stream_id]


kinds = pytest.mark.parametrize(
    "kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)


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


@kinds
def test_a_corrupt_snapshot_is_reported_and_ignored(
    kind: str, clock: ManualClock, registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    with fresh(kind) as location:
        s = Scheduler.open(location, clock=clock, registry=registry)
        for _ in range(5):
            s.submit("job", phase="a")
        first = s.snapshot()
        s.submit("job", phase="a")
        s.close()  # a second snapshot, at the head
        with open_store(location) as store:
            full = restore(store, snapshots=False).world
            table = SnapshotTable(store)
            head = table.positions()[-1]
            _overwrite(table, head, b"{not json", kind)
        with caplog.at_level(logging.WARNING, logger="tasktrail.snapshots"):
            reopened = Scheduler.open(location, clock=clock, registry=registry)
        try:
            assert reopened.snapshot_problems == [
                f"snapshot at position {head} is unreadable: "
                + reopened.snapshot_problems[0].split("unreadable: ", 1)[1]
            ]
            assert f"snapshot at position {head}" in caplog.text
            assert reopened.snapshot_at == first  # the older, good one
            assert_same_as_full_fold(reopened.world, full)
        finally:
            crash(reopened)
        with open_store(location, read_only=True) as store:
            report = verify(store)
        assert [v.check for v in report.violations] == ["snapshots"]
        assert report.violations[0].positions == (head,)


def _overwrite(table: SnapshotTable, position: int, body: bytes, kind: str) -> None:
    mark = "%s" if kind == "postgresql" else "?"
    with table._cursor(commit=True) as cursor:
        cursor.execute(
            f"UPDATE {table._table} SET body = {mark} WHERE position = {mark}", (body, position)
        )


@kinds
def test_snapshots_of_another_format_or_unknown_classes_are_passed_over(
    kind: str, clock: ManualClock, registry: Registry
) -> None:
    with fresh(kind) as location:
        s = Scheduler.open(location, clock=clock, registry=registry)
        s.submit("job", phase="a")
        s.close()
        with open_store(location) as store:
            table = SnapshotTable(store)
            (head,) = table.positions()
            with table._cursor(commit=True) as cursor:
                mark = "%s" if kind == "postgresql" else "?"
                cursor.execute(
                    f"UPDATE {table._table} SET format = 99 WHERE position = {mark}", (head,)
                )
            restored = restore(store)
            assert restored.snapshot is None and "of format 99" in restored.problems[0]
            world_bytes = encode_world(restored.world).replace(b"TaskState", b"Evil")
            body = snapshot_body(store, restored.world, head, world_bytes)  # a good digest
            _overwrite(table, head, body, kind)
            with table._cursor(commit=True) as cursor:
                cursor.execute(
                    f"UPDATE {table._table} SET format = {mark} WHERE position = {mark}",
                    (FORMAT, head),
                )
            restored = restore(store)
            assert (
                restored.snapshot is None
                and "a class tasktrail does not have" in restored.problems[0]
            )


@kinds
def test_verify_finds_a_snapshot_that_differs_from_the_fold(
    kind: str, clock: ManualClock, registry: Registry
) -> None:
    with fresh(kind) as location:
        s = Scheduler.open(location, clock=clock, registry=registry)
        task_id = s.submit("job", phase="a")
        position = s.snapshot()
        s.close()
        with open_store(location) as store:
            data, _ = open_body(SnapshotTable(store).at(position).body)  # type: ignore[union-attr]
            world = world_from(data)
            from dataclasses import replace

            world.tasks[task_id] = replace(world.tasks[task_id], restarts=7)
            # Its digest recomputed: only verify's comparison with the fold can tell.
            _overwrite(SnapshotTable(store), position, snapshot_body(store, world, position), kind)
            report = verify(store)
        assert [v.check for v in report.violations] == ["snapshots"]
        assert report.violations[0].positions == (position,)
        assert "tasks differ" in report.violations[0].message


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


@kinds
def test_a_snapshot_written_while_verify_folds_is_not_past_the_logs_end(
    kind: str, clock: ManualClock, registry: Registry
) -> None:
    """A snapshot at a position the verifying fold has not read, yet in the log as it
    stands (a writer appended and snapshotted while verify read), is no violation; one
    past the log's last position is."""
    from tasktrail.replay import replay
    from tasktrail.replay.snapshot_check import SnapshotWatch

    with fresh(kind) as location:
        s = Scheduler.open(location, clock=clock, registry=registry)
        s.submit("job", phase="a")
        read_up_to = s.store.head()
        s.submit("job", phase="a")
        later = s.snapshot()
        s.close()
        with open_store(location) as store:
            # The rows a read that began before the second submit saw.
            seen = [r for r in store.read() if r.position <= read_up_to]
            watch = SnapshotWatch(store)
            replay(iter(seen), snapshots=False, watch=watch, audit=False)
            assert watch.problems == []
            body = SnapshotTable(store).at(later).body  # type: ignore[union-attr]
            SnapshotTable(store).write(later + 5, body)
            watch = SnapshotWatch(store)
            replay(iter(seen), snapshots=False, watch=watch, audit=False)
            assert watch.problems == [(later + 5, "it is past the log's end")]
