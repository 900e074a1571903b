"""Snapshots kept: the table stays small however often a writer takes one (round nine).

Each snapshot written drops, in its transaction, those it supersedes: snapshots of an
earlier format below it, and the one before it where the writer's spacing does not need
it (:func:`tasktrail.domain.history.redundant`), so snapshots stay about that spacing
apart and ``replay --until`` any position starts at most that far back. These tests
hold the rule, the table and replay to it on both stores, and every read (``verify``
first) to leaving the store as it was: only a write or ``tasktrail snapshot --prune``
drops a snapshot.
"""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path

import orjson
import pytest
from helpers.cli import folder_state, run
from hypothesis import given
from hypothesis import strategies as st

from tasktrail.domain import ManualClock, Registry, Scheduler, Store, open_store
from tasktrail.domain.history import FORMAT, SnapshotTable, redundant
from tasktrail.domain.history.table import TABLE
from tasktrail.replay import replay, verify

table_module = importlib.import_module("tasktrail.domain.history.table")


def rows(store: Store) -> list[tuple[int, int, bytes]]:
    """Every row of the snapshot table (position, format, body), oldest first."""
    table = SnapshotTable(store)
    with table._cursor(commit=False) as cursor:
        cursor.execute(f"SELECT position, format, body FROM {table._table} ORDER BY position")
        found = cursor.fetchall()
    return [
        (int(p), int(f), bytes(b))
        for p, f, b in (tuple(r.values()) if isinstance(r, dict) else r for r in found)
    ]


def set_format(store: Store, position: int, format_: int) -> None:
    """Mark the snapshot at ``position`` as another release's."""
    table = SnapshotTable(store)
    mark = "%s" if store.location.kind == "postgresql" else "?"
    with table._cursor(commit=True) as cursor:
        cursor.execute(
            f"UPDATE {table._table} SET format = {mark} WHERE position = {mark}",
            (format_, position),
        )


def busy_store(location: str, clock: ManualClock, registry: Registry, tasks: int) -> None:
    """``tasks`` tasks submitted, reserved and finished, a snapshot every 10 events."""
    s = Scheduler.open(location, clock=clock, registry=registry, snapshot_every=10)
    for _ in range(tasks):
        task_id = s.submit("job", phase="a")
        s.reserve(task_id)
        s.finish(task_id, "completed")
    s.submit("job", phase="a")  # one live task at the end
    s.close()


@given(
    gaps=st.lists(st.integers(1, 60), min_size=1, max_size=120),
    spacing=st.integers(1, 100),
)
def test_the_spacing_rule_keeps_replays_short_and_the_table_small(
    gaps: list[int], spacing: int
) -> None:
    """However often a writer takes a snapshot, each write dropping the one before when
    :func:`redundant` says so keeps the newest two, at most ``2 * head / spacing + 3``
    snapshots, and a replay to any position starts at most
    ``spacing`` events back (or one gap between two writes, when that is more)."""
    kept: list[int] = []
    position = 0
    for written, gap in enumerate(gaps, start=1):  # each write thins what the last left
        position += gap
        kept.append(position)
        if len(kept) >= 3 and redundant(kept[-3], kept[-2], position, spacing):
            del kept[-2]
        assert kept[-1] == position and len(kept) >= min(2, written)  # the newest two
        assert len(kept) <= 2 * position / spacing + 3
    head = kept[-1]
    for until in range(1, head + 1):
        start = max((p for p in kept if p <= until), default=0)
        assert until - start <= max(spacing, max(gaps)), until


def test_a_host_that_snapshots_at_every_close_keeps_few_and_replays_stay_short(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """A host that opens the store for each command takes a snapshot at every close: the
    table keeps them about ``snapshot_every`` apart, each kept one equals the fold, and
    ``replay --until`` any position starts at most that far back."""
    every = 20
    for _ in range(60):
        s = Scheduler.open(store_url, clock=clock, registry=registry, snapshot_every=every)
        task_id = s.submit("job", phase="a")
        s.reserve(task_id)
        s.close()  # a snapshot each time: the position moved
    with open_store(store_url, read_only=True) as store:
        kept = [position for position, _, _ in rows(store)]
        head = store.head()
        assert verify(store).ok  # each snapshot kept equals the fold at its position
    assert kept[-1] == head and len(kept) <= 2 * head / every + 3 < 60
    for until in range(1, head + 1, 7):
        quick = replay(store_url, until=until)
        assert quick.snapshot is not None or until <= every
        assert until - (quick.snapshot or 0) <= every, until
    for until in (3, head // 3, head // 2, head - 5):
        assert replay(store_url, until=until) == replay(store_url, until=until, snapshots=False)


def test_an_earlier_format_snapshot_is_dropped_once_a_current_one_is_above_it(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry, snapshot_every=None)
    s.submit("job", phase="a")
    older = s.snapshot()
    s.submit("job", phase="a")
    newer = s.snapshot()
    set_format(s.store, older, FORMAT - 1)
    set_format(s.store, newer, FORMAT - 1)
    table = SnapshotTable(s.store)
    assert table.prune() == []  # none of this format above them: the only ones there
    s.submit("job", phase="a")
    s.close()  # a snapshot of this format at close, above both
    with open_store(store_url, read_only=True) as store:
        assert [(p, f) for p, f, _ in rows(store)] == [(store.head(), FORMAT)]
        report = verify(store)
    assert report.ok and report.notes == []  # nothing left to note


def test_a_later_format_snapshot_is_left_to_its_release(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry, snapshot_every=None)
    s.submit("job", phase="a")
    later = s.snapshot()
    set_format(s.store, later, FORMAT + 1)
    s.submit("job", phase="a")
    s.close()
    with open_store(store_url, read_only=True) as store:
        assert [(p, f) for p, f, _ in rows(store)] == [(later, FORMAT + 1), (store.head(), FORMAT)]


def _unpruned_store(
    location: str, clock: ManualClock, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int, int, bytes]]:
    """A store whose table an earlier release filled: every snapshot kept, the first
    two of an earlier format. Returns its rows."""
    with monkeypatch.context() as patch:
        patch.setattr(table_module, "redundant", lambda *positions: False)
        busy_store(location, clock, registry, 40)
    with open_store(location) as store:
        for position, _, _ in rows(store)[:2]:
            set_format(store, position, FORMAT - 1)
        return rows(store)


def test_verify_and_the_other_reads_never_drop_a_snapshot(
    store_url: str,
    clock: ManualClock,
    registry: Registry,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = _unpruned_store(store_url, clock, registry, monkeypatch)
    assert len(before) > 10
    local = Path(store_url) if "://" not in store_url else None
    files = folder_state(local.parent) if local is not None else {}
    with open_store(store_url, read_only=True) as store:
        report = verify(store)
    assert report.ok and len(report.notes) == 1  # the earlier format's, noted
    for argv in (
        ["verify", store_url],
        ["replay", store_url, "--until", str(before[3][0] + 1)],
        ["snapshot", store_url, "--list"],
        ["tasks", store_url],
    ):
        assert run(argv, capsys).code == 0, argv
    if local is not None:
        assert folder_state(local.parent) == files  # byte for byte, no -wal or -shm
    with open_store(store_url, read_only=True) as store:
        assert rows(store) == before


def test_snapshot_prune_drops_what_an_earlier_release_kept(
    store_url: str,
    clock: ManualClock,
    registry: Registry,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = _unpruned_store(store_url, clock, registry, monkeypatch)
    ran = run(["snapshot", store_url, "--prune", "--json"], capsys)
    assert ran.code == 0, ran.err
    answer = orjson.loads(ran.out)
    with open_store(store_url, read_only=True) as store:
        kept = [p for p, _, _ in rows(store)]
        assert verify(store).ok and verify(store).notes == []
    dropped = sorted({p for p, _, _ in before} - set(kept))
    assert answer == {"dropped": dropped, "kept": len(kept), "malformed": 0}
    assert dropped == [p for p, format_, _ in before if format_ < FORMAT]  # those alone
    assert kept == [p for p, format_, _ in before if format_ == FORMAT]
    assert run(["snapshot", store_url, "--prune"], capsys).out.startswith("0 snapshots")


def test_a_prune_keeps_other_writers_off_while_it_decides_on_sqlite(
    sqlite_url: str, clock: ManualClock, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prune decides what to drop with the write lock held: a writer that commits a
    snapshot meanwhile waits for it, instead of the prune's delete failing ("database is
    locked") on a view the other writer made stale."""
    _unpruned_store(sqlite_url, clock, registry, monkeypatch)
    drop = table_module.SnapshotTable._drop_outdated
    meanwhile: list[str] = []

    def another_writer_meanwhile(self: SnapshotTable, cursor: object, below: int) -> list[int]:
        other = sqlite3.connect(sqlite_url, timeout=0)
        try:
            other.execute(f"INSERT INTO {TABLE} VALUES (1000000, {FORMAT}, 0, x'00')")
            other.commit()
            meanwhile.append("committed")
        except sqlite3.OperationalError as error:
            meanwhile.append(str(error))
        finally:
            other.close()
        return drop(self, cursor, below)

    monkeypatch.setattr(table_module.SnapshotTable, "_drop_outdated", another_writer_meanwhile)
    with open_store(sqlite_url) as store:
        dropped = SnapshotTable(store).prune()
    assert meanwhile == ["database is locked"] and dropped


@pytest.mark.parametrize("uri", ["file:{}?mode=ro", "file:{}?immutable=1"])
@pytest.mark.parametrize("prune", [False, True])
def test_a_snapshot_asked_of_a_read_only_uri_is_refused_by_name(
    uri: str,
    prune: bool,
    tmp_path: Path,
    clock: ManualClock,
    registry: Registry,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``snapshot`` (and ``--prune``) write: a ``mode=ro``/``immutable=1`` URI is refused
    up front, saying so and what to give instead, and the file is left as it was."""
    path = tmp_path / "trail.db"
    s = Scheduler.open(str(path), clock=clock, registry=registry)
    s.submit("job", phase="a")
    s.close()
    before = folder_state(tmp_path)
    location = uri.format(path)
    ran = run(["snapshot", location, *(["--prune"] if prune else [])], capsys)
    assert ran.code == 2
    assert f"{location} opens the store read-only" in ran.err and "give the store's path" in ran.err
    assert folder_state(tmp_path) == before
