"""The rows an append keeps for the read after it (``domain/store/prefetch.py``): the
seal of the snapshot a batch takes as it exits is hashed from the rows the batch just
wrote, not from the store again, and equals the seal of the stored rows."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import crash

from tasktrail.domain import ManualClock, Registry, Scheduler, open_store
from tasktrail.domain.history import SnapshotTable
from tasktrail.domain.store.prefetch import Prefetched
from tasktrail.domain.store.store import Store
from tasktrail.replay import verify


def test_a_batchs_snapshot_seals_the_rows_it_wrote_without_reading_them_again(
    store_url: str, clock: ManualClock, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    selected: list[tuple[int, int | None]] = []
    select = Store._selected

    def spied(self: Store, after: int, until: int | None) -> Any:
        selected.append((after, until))
        return select(self, after, until)

    s = Scheduler.open(store_url, clock=clock, registry=registry, snapshot_every=10)
    with s.batch():
        for _ in range(6):
            s.submit("job", phase="a")
    base = s.position
    monkeypatch.setattr(Store, "_selected", spied)
    with s.batch():
        for _ in range(30):
            s.submit("job", phase="a")
    head = s.store.head()
    assert SnapshotTable(s.store).positions()[-1] == head  # the batch's exit took one
    # The seal read the rows before the batch from the store, the batch's from memory.
    assert not [(a, u) for a, u in selected if a < head and (u is None or u > base)], selected
    assert s.store.kept_rows.take(base, head) is None  # and kept none of them after
    crash(s)
    with open_store(store_url, read_only=True) as store:
        assert verify(store).ok  # the seal it recorded is the stored rows' seal


class _Stored:
    def __init__(self, stream: str, version: int) -> None:
        self.originator_id, self.originator_version = stream, version
        self.topic, self.state = "t", b"{}"


def test_kept_rows_end_a_read_survive_an_empty_read_after_them_and_go_once_taken() -> None:
    kept = Prefetched()
    own = [_Stored("a", 1), _Stored("b", 1)]
    kept.keep(4, [], own, [5, 6])
    assert kept.take(6, None) is None  # a read of what follows them: still kept
    taken = kept.take(2, 6)  # positions 3 and 4 are the store's to read
    assert taken is not None and taken.after == 4
    assert taken.rows == [(5, "a", 1, "t", b"{}"), (6, "b", 1, "t", b"{}")]
    assert kept.take(4, 6) is None  # taken once
    kept.keep(4, [], own, [5, 6])
    assert kept.take(5, 7) is None and kept.take(4, 6) is None  # a read they do not end: gone
    kept.keep(4, None, own, [6, 7])  # a row between, not known: nothing kept
    assert kept.take(4, 7) is None
    kept.keep(4, None, own, [5, 6])  # none between (SQLite's): kept
    assert kept.take(4, 6) is not None


def test_a_read_after_the_kept_rows_that_finds_a_row_drops_them() -> None:
    kept, own = Prefetched(), [_Stored("a", 1), _Stored("b", 1)]
    later = (7, "c", 1, "t", b"{}")
    kept.keep(4, [], own, [5, 6])
    assert list(kept.pages(lambda after, until: iter([[]]), 6, None)) == [[]]
    assert kept.take(4, 6) is not None  # nothing after them: still kept until taken
    kept.keep(4, [], own, [5, 6])
    assert list(kept.pages(lambda after, until: iter([[later]]), 6, None)) == [[later]]
    assert kept.take(4, 6) is None  # the log went on (an erasure may rewrite them): gone
