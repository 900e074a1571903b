"""Issue 17, item 8: a schema marker (the store's format) checked at every open.

A writer marks a store it opens (``tasktrail_meta``: the format, and the position
after which every event is chained); a store a newer tasktrail marked is refused
at open with a message that says so, by readers and writers alike, before anything
is read or written; a store from before the marker reads as format 0.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fixtures.make_first_release import STORE as FIRST_RELEASE
from helpers.cli import folder_state, run

from tasktrail.domain import (
    ManualClock,
    Registry,
    Scheduler,
    StoreError,
    TaskDefinition,
    open_store,
)
from tasktrail.domain.store.meta import STORE_FORMAT, TABLE


def _set_marker(location: str, key: str, value: str) -> None:
    if location.startswith("postgresql://"):
        import psycopg

        dsn, schema = location.split("?schema=")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'UPDATE "{schema}".{TABLE} SET value = %s WHERE key = %s', (value, key))
        return
    with sqlite3.connect(location) as conn:
        conn.execute(f"UPDATE {TABLE} SET value = ? WHERE key = ?", (value, key))
    conn.close()


def _events(location: str) -> int:
    with open_store(location, read_only=True) as store:
        return store.head()


def test_a_new_store_is_marked_with_its_format(store_url: str) -> None:
    s = Scheduler.open(store_url, clock=ManualClock(0))
    s.submit("job", phase="a")
    s.close()
    with open_store(store_url, read_only=True) as store:
        assert store.format == STORE_FORMAT
        assert store.marker == {"format": str(STORE_FORMAT), "chained_after": "0"}
        assert store.chained_after == 0


@pytest.mark.parametrize("read_only", [False, True])
def test_a_store_of_a_newer_format_is_refused_at_open(read_only: bool, store_url: str) -> None:
    registry = Registry([TaskDefinition("job", 1, {"a": lambda inv: None})])
    s = Scheduler.open(store_url, clock=ManualClock(0), registry=registry)
    task = s.submit("job")
    s.reserve(task)  # running: an open that went on would recover (write) it
    s.store.close()
    head = _events(store_url)
    _set_marker(store_url, "format", str(STORE_FORMAT + 1))
    with pytest.raises(StoreError) as caught:
        open_store(store_url, read_only=read_only)
    message = str(caught.value)
    assert f"format {STORE_FORMAT + 1}, written by a newer tasktrail" in message
    assert f"reads formats up to {STORE_FORMAT}" in message and "upgrade" in message
    with pytest.raises(StoreError, match="newer tasktrail"):
        Scheduler.open(store_url)
    _set_marker(store_url, "format", str(STORE_FORMAT))
    assert _events(store_url) == head  # nothing was recovered or written


def test_cli_readers_refuse_a_newer_store_with_exit_2_and_touch_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.db"
    s = Scheduler.open(path, clock=ManualClock(0))
    s.submit("job", phase="a", id="t")
    s.close()
    _set_marker(str(path), "format", "99")
    before = folder_state(tmp_path)
    for argv in (
        ["verify", str(path)],
        ["replay", str(path)],
        ["tasks", str(path)],
        ["history", str(path), "t"],
        ["export", str(path), str(tmp_path / "out.jsonl")],
        ["project", str(path), "--out", str(tmp_path / "views.db")],
    ):
        ran = run(argv, capsys)
        assert ran.code == 2 and "format 99, written by a newer tasktrail" in ran.err, (argv, ran)
        assert folder_state(tmp_path) == before, argv


@pytest.mark.parametrize("value", ["banana", "", "-1", "1.5"])
def test_an_unreadable_marker_is_refused(value: str, tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    open_store(path).close()
    _set_marker(str(path), "format", value)
    with pytest.raises(StoreError, match=r"format marker .* edited or damaged"):
        open_store(path, read_only=True)


def test_a_store_from_before_the_marker_reads_as_format_0_and_a_writer_marks_it(
    tmp_path: Path,
) -> None:
    old = tmp_path / "first-release.db"
    shutil.copy(FIRST_RELEASE, old)
    before = folder_state(tmp_path)
    with open_store(old, read_only=True) as store:
        assert store.format == 0 and store.marker == {} and store.chained_after is None
        head = store.head()
    assert folder_state(tmp_path) == before  # a reader does not mark it
    Scheduler.open(old, clock=ManualClock(1_767_700_000_000), restart_limit=3).close()
    with open_store(old, read_only=True) as store:
        assert store.format == STORE_FORMAT and store.chained_after == head


def test_concurrent_first_opens_agree_on_one_marker(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    stores: list[Any] = [open_store(path) for _ in range(3)]
    markers = {tuple(sorted(store.marker.items())) for store in stores}
    for store in stores:
        store.close()
    assert len(markers) == 1
