"""Issue 14: a snapshot that cannot be trusted is reported, never trusted.

A snapshot that is corrupt, of another format, naming classes tasktrail does not
have, or that differs from the fold is passed over (the fold goes on from an older
one, or from the start) and reported by ``verify``; one written while verify folds
is no violation unless it is past the log's end. Snapshots held to the fold are in
``test_snapshots.py``.
"""

from __future__ import annotations

import logging

import pytest
from helpers.snapshots_stores import assert_same_as_full_fold, fresh, kinds

from tasktrail.domain import ManualClock, Registry, Scheduler, open_store
from tasktrail.domain.history import (
    FORMAT,
    SnapshotTable,
    encode_world,
    open_body,
    restore,
    snapshot_body,
)
from tasktrail.domain.history.codec import world_from
from tasktrail.replay import verify
from tasktrail.replay.harness import crash


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
