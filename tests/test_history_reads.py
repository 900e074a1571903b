"""A read of the log's rows after a position past every gap (a retention keeper's next
rows, a follower's) reads each act of the history stream once per store object, not
all of them at every read (issue 45: a keeper acts every second on a store that keeps
years of acts); what every read returns equals a fresh store's read; on both stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.retention_world import DAY, opened, record

from tasktrail.domain import ManualClock, open_store
from tasktrail.domain.store.gaps import HISTORY_STREAM, rows_and_gaps


def _fresh(url: str, after: int) -> list[Any]:
    with open_store(url, read_only=True) as store:
        return list(rows_and_gaps(store, after=after))


def test_a_read_past_every_gap_reads_each_act_once_and_equals_a_fresh_read(
    store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    s = opened(store_url, clock)
    record(s, clock, trees=12)
    clock.advance(2 * DAY)
    reader = open_store(store_url, read_only=True)
    read: list[int] = []  # the act rows each look read
    stream_rows = reader.stream_rows

    def counted(stream_id: str, after: int = 0) -> Any:
        rows = stream_rows(stream_id, after)
        if stream_id == HISTORY_STREAM:
            read.append(len(rows))
        return rows

    reader.stream_rows = counted  # type: ignore[method-assign]
    folder = tmp_path / "archive"
    folder.mkdir()
    acts = 0
    try:
        for _ in range(3):  # acts by another store object, then live work after them
            acts += len(s.archive(before=clock(), to=folder, batch=40).acts)
            record(s, clock, trees=3)
            clock.advance(2 * DAY)
            head = reader.head()
            for after in (head - 5, head - 1, head):  # a keeper's next rows, past every gap
                assert list(rows_and_gaps(reader, after=after)) == _fresh(store_url, after)
            assert sum(read) == acts  # each act's row read once, however often asked
        s.erase(record(s, clock, trees=1).finished[0], reason="a test")  # an act, no gap
        for after in (0, 3, reader.head() - 1):  # from before the gaps: read whole, as ever
            assert list(rows_and_gaps(reader, after=after)) == _fresh(store_url, after)
    finally:
        reader.close()
        s.close()
