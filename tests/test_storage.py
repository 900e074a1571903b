"""Storage on SQLite and PostgreSQL: the same tests run against both stores."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest
from conftest import event_count
from helpers.checks import stale

from tasktrail.domain import (
    ConflictError,
    CorruptEvent,
    InvalidArgument,
    ManualClock,
    Refused,
    Registry,
    Scheduler,
    StoreError,
    UnknownEventTopic,
    open_store,
)


def test_store_round_trip_and_reopen(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(store_url, clock=clock, registry=registry)
    owner = scheduler.submit("job")
    child = scheduler.submit("leaf", owner=owner)
    scheduler.run_until_idle()
    states = {t.id: t for t in scheduler.tasks()}
    written = scheduler.events_written
    scheduler.close()
    assert event_count(store_url) == written

    reopened = Scheduler.open(store_url, clock=clock, registry=registry)
    # Ended, the tasks are not held after the reopen (issue 14); each reads back the same.
    assert reopened.tasks() == []
    assert {tid: reopened.task(tid) for tid in states} == states
    assert reopened.task(owner).status == "terminal"
    # The eventsourcing aggregate of each task applies its events through evolve.
    assert reopened.store.aggregate(child).state == states[child]
    reopened.close()


def test_events_are_stored_as_compact_json_under_stable_topics(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task_id = scheduler.submit("job", id="t-1")
    scheduler.close()
    with sqlite3.connect(sqlite_url) as conn:
        row = conn.execute("SELECT originator_id, topic, state FROM stored_events").fetchone()
    assert row[0] == task_id
    assert row[1] == "tasktrail.TaskSubmitted"
    payload = orjson.loads(row[2])
    assert payload["kind"] == "job" and payload["at"] == clock.now and "task_id" not in payload
    assert b" " not in row[2]  # orjson's compact output, not the default JSON encoder's


def test_lost_race_raises_conflict_and_appends_nothing(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    first = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = first.submit("job")
    second = Scheduler.open(store_url, clock=clock, registry=registry)
    assert second.task(task_id).status == "pending"

    first.reserve(task_id)
    head = first.store.head()
    with stale(second), pytest.raises(ConflictError) as caught:
        second.reserve(task_id)  # decided on stale state: pending
    assert task_id in str(caught.value) and "nothing was recorded" in str(caught.value)
    assert second.store.head() == head
    # The loser was refreshed: deciding again sees the winner's reservation.
    assert second.task(task_id).status == "running"
    with pytest.raises(Refused):
        second.reserve(task_id)
    first.close()
    second.close()


def test_retrying_re_decides_on_fresh_state(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    first = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task_id = first.submit("job")
    second = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    first.abort(task_id)
    # second still sees no mark; its first try conflicts, the retry finds the mark.
    attempts = []

    def abort_once_more() -> bool:
        if attempts:  # the retry: on fresh state
            attempts.append(second.task(task_id).abort_requested)
            return second.abort(task_id)
        with stale(second):  # the first try decides on the view it had
            attempts.append(second.world.tasks[task_id].abort_requested)
            return second.abort(task_id)

    assert second.retrying(abort_once_more) is False  # already marked: nothing to add
    assert attempts == [False, True]
    first.close()
    second.close()


def test_other_writers_tasks_are_found_by_refresh(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    first = Scheduler.open(store_url, clock=clock, registry=registry)
    second = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = first.submit("job")
    assert second.task(task_id).kind == "job"  # unknown locally: read from the store
    assert second.reserve(task_id) == "run"
    first.close()
    second.close()


@pytest.mark.parametrize(
    "location, expected",
    [
        ("mysql://localhost/db", "unsupported store URL scheme"),
        ("postgresql://127.0.0.1:5432", "must name one database"),
        ("postgresql://127.0.0.1:notaport/test", "port is not a number"),
        ("", "file path or a postgresql:// URL"),
    ],
)
def test_malformed_store_locations_are_clear_errors(location: str, expected: str) -> None:
    with pytest.raises(StoreError, match=expected):
        open_store(location)


def test_directory_and_corrupt_file_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        open_store(tmp_path)
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"corrupt\.db"):
        open_store(corrupt)
    assert corrupt.read_bytes() == b"this is not a database" * 100


def test_unreachable_postgres_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="cannot open store postgresql://"):
        open_store("postgresql://postgres@127.0.0.1:1/test?connect_timeout=1")


def test_unknown_topic_is_reported_with_its_position(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    scheduler.submit("job", id="t-1")
    scheduler.close()
    with sqlite3.connect(sqlite_url) as conn:
        conn.execute(
            "INSERT INTO stored_events VALUES (?, ?, ?, ?)",
            ("t-1", 2, "tasktrail.FromTheFuture", b"{}"),
        )
    with pytest.raises(UnknownEventTopic) as caught:
        Scheduler.open(sqlite_url, clock=clock, registry=registry)
    assert caught.value.position == 2 and "FromTheFuture" in str(caught.value)


def test_corrupt_payload_is_reported_with_its_position(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    scheduler.submit("job", id="t-1")
    scheduler.close()
    with sqlite3.connect(sqlite_url) as conn:
        conn.execute(
            "INSERT INTO stored_events VALUES (?, ?, ?, ?)",
            ("t-1", 2, "tasktrail.TaskReserved", b"{not json"),
        )
    with pytest.raises(CorruptEvent, match="position 2"):
        Scheduler.open(sqlite_url, clock=clock, registry=registry)


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_durability_levels(tmp_path: Path, durability: str) -> None:
    with open_store(tmp_path / "d.db", durability=durability) as store:  # type: ignore[arg-type]
        connection = store.app.factory.datastore.pool.get_connection()
        try:
            level = connection._sqlite_conn.execute("PRAGMA synchronous").fetchone()[0]
            mode = connection._sqlite_conn.execute("PRAGMA journal_mode").fetchone()[0]
        finally:
            store.app.factory.datastore.pool.put_connection(connection)
    assert level == {"full": 2, "normal": 1}[durability]
    assert mode == "wal"
    with pytest.raises(StoreError, match="durability"):
        open_store(tmp_path / "e.db", durability="sometimes")  # type: ignore[arg-type]


def test_values_that_are_not_json_are_refused_before_writing(
    scheduler: Scheduler,
) -> None:
    task_id = scheduler.submit("job")
    scheduler.reserve(task_id)
    head = scheduler.store.head()
    for value in (object(), 2**70, {"big": "x" * 70_000}):
        with pytest.raises(InvalidArgument):
            scheduler.memo(task_id, "m", value)
    with pytest.raises(InvalidArgument):
        scheduler.finish(task_id, "failed", error={"message": "m", "detail": {1, 2}})
    assert scheduler.store.head() == head


def test_an_unseen_guard_refuses_an_append_after_a_counted_event(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """A decision that counted events of some topics in every stream, having folded the
    log up to a position (the daily cap), is refused whole if an event of one of those
    topics was appended after that position; another topic, or its own rows, do not
    count."""
    from dataclasses import replace

    scheduler = Scheduler.open(store_url, clock=clock, registry=registry)
    try:
        store = scheduler.store
        scheduler.submit("job", id="t")
        seen = store.head()
        scheduler.submit("job", id="u")  # a TaskSubmitted the decision has not seen
        first = store.stream("t")[0]
        counted = {type(first).topic}
        head = store.head()
        with pytest.raises(ConflictError, match="counted was appended since"):
            store.append([replace(first, task_id="v")], [1], unseen=(seen, counted))
        assert store.head() == head and store.stream("v") == []
        store.append([replace(first, task_id="v")], [1], unseen=(seen, {"tasktrail.RunMinted"}))
        head = store.head()
        twins = [replace(first, task_id="w"), replace(first, task_id="x")]
        assert len(store.append(twins, [1, 1], unseen=(head, counted))) == 2
    finally:
        scheduler.close()


def test_a_number_field_without_a_finite_number_is_refused_before_writing(
    scheduler: Scheduler,
) -> None:
    """JSON has no NaN nor infinity: orjson would store ``null``, which no reader takes
    back as the number (a run's ``retry_after`` from an executor's fence once was one).
    Such an event, or one whose number field holds no number, is refused whole."""
    from dataclasses import replace

    task_id = scheduler.submit("job")
    store = scheduler.store
    first = store.stream(task_id)[0]
    head = store.head()
    # An integer field: no float (readers refuse 2.0 there), no flag, no text, no null.
    for version in (2.0, float("nan"), True, "2", None, 2**63, -(2**63) - 1):
        with pytest.raises(InvalidArgument, match="version must be an integer"):
            store.append([replace(first, task_id="other", version=version)], [1])
    # A number field (a time): an integer or a finite float, nothing else.
    for at in (float("nan"), float("inf"), float("-inf"), "1", False, 2**64):
        with pytest.raises(InvalidArgument, match="at must be a"):
            store.append([replace(first, task_id="other", at=at)], [1])
    assert store.head() == head and store.stream("other") == []
    store.append([replace(first, task_id="other", version=2, at=first.at + 0.5)], [1])
    assert store.stream("other")[0].version == 2  # and the log still reads back
