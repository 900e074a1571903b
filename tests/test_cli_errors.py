"""Issue 17, item 3: one error contract for every command.

0 ok, 1 violations or differences, 2 bad input (naming what and where), 3 an
internal error (one line; the traceback only with ``--debug``), 130 interrupted.
No traceback reaches a user otherwise, and a refused command changes no file.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import orjson
import pytest
from helpers.cli import folder_state, run

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    Scheduler,
    StoreError,
    TaskDefinition,
)
from tasktrail.domain.demo.workload import MIN_TASKS, run_demo


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "v.db"
    run_demo(path, MIN_TASKS, log=lambda _: None)
    return path


@pytest.fixture
def store(tmp_path: Path, demo_db: Path) -> Path:
    shutil.copy(demo_db, tmp_path / "v.db")
    return tmp_path / "v.db"


def test_an_internal_error_is_one_line_and_exit_3_the_traceback_only_with_debug(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasktrail.replay

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug\nwith a second line")

    monkeypatch.setattr(tasktrail.replay, "replay", broken)
    ran = run(["replay", str(store)], capsys)
    assert ran.code == 3
    assert ran.err.count("\n") == 1 and "Traceback" not in ran.err
    assert "internal error: RuntimeError: a bug" in ran.err and "--debug" in ran.err
    for argv in (["--debug", "replay", str(store)], ["replay", str(store), "--debug"]):
        ran = run(argv, capsys)
        assert ran.code == 3 and "Traceback (most recent call last)" in ran.err


def test_ctrl_c_in_any_command_is_130_without_a_traceback(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasktrail.replay

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(tasktrail.replay, "verify", interrupted)
    before = folder_state(store.parent)
    ran = run(["verify", str(store)], capsys)
    assert (ran.code, ran.err) == (130, "tasktrail: interrupted\n")
    assert folder_state(store.parent) == before


def test_a_sleep_past_year_9999_is_an_invalid_argument_at_the_command(tmp_path: Path) -> None:
    clock = ManualClock(1_000)
    registry = Registry([TaskDefinition("job", 1, {"a": lambda inv: None})])
    s = Scheduler.open(tmp_path / "s.db", clock=clock, registry=registry)
    task = s.submit("job")
    s.reserve(task)
    head = s.store.head()
    with pytest.raises(InvalidArgument, match="year 9999"):
        s.sleep(task, until=1e308)
    with pytest.raises(InvalidArgument, match="year 9999"):
        s.schedule_run(task, 1e300)
    assert s.store.head() == head
    s.close()


def test_a_time_no_date_can_show_in_an_old_log_does_not_crash_a_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An earlier release recorded sleep(until=1e308): readers show it as a number."""
    from eventsourcing.persistence import StoredEvent

    path = tmp_path / "old.db"
    s = Scheduler.open(path, clock=ManualClock(1_000))
    task = s.submit("job", phase="a")
    s.store.app.recorder.insert_events(
        [StoredEvent(task, 2, "tasktrail.TaskReserved", b'{"at":1000,"mode":"run"}')]
    )
    s.store.app.recorder.insert_events(
        [StoredEvent(task, 3, "tasktrail.SleepStarted", b'{"at":1000,"until":1e308,"phase":"a"}')]
    )
    s.store.close()
    before = folder_state(tmp_path)
    for argv in (["replay", str(path)], ["history", str(path), task], ["explain", str(path), task]):
        ran = run(argv, capsys)
        assert ran.code == 0 and "Traceback" not in ran.err, (argv, ran.err)
    assert "1e+308 ms" in run(["replay", str(path)], capsys).out
    assert folder_state(tmp_path) == before


def test_a_surrogate_in_an_id_is_bad_input_not_a_unicode_error(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = folder_state(store.parent)
    for argv in (
        ["history", str(store), "fragile-\udcff"],
        ["explain", str(store), "fragile-\udcff"],
        ["trace", str(store), "fragile-\udcff"],
    ):
        ran = run(argv, capsys)
        assert ran.code == 2 and "not valid UTF-8" in ran.err and "\\udcff" in ran.err, ran
    assert folder_state(store.parent) == before
    s = Scheduler.open(tmp_path / "s.db", clock=ManualClock(0))
    with pytest.raises(InvalidArgument, match="lone surrogate"):
        s.submit("job", phase="a", id="a\udcffb")
    with pytest.raises(InvalidArgument, match="lone surrogate"):
        s.submit("jo\udcffb", phase="a")
    assert s.store.head() == 0
    s.close()


def test_a_concurrent_project_rebuild_is_a_clear_refusal(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    views = store.with_name("v-views.db")  # the default read-model file
    assert run(["project", str(store), "--quiet"], capsys).code == 0
    holder = sqlite3.connect(views, timeout=0, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # another `project --rebuild`, mid-batch
    released = threading.Timer(30, holder.rollback)
    released.start()
    try:
        before = folder_state(store.parent)
        ran = run(["project", str(store), "--rebuild", "--quiet"], capsys)
        assert ran.code == 2, ran
        assert "database is locked" in ran.err and "another tasktrail process" in ran.err
        assert "Traceback" not in ran.err
        assert folder_state(store.parent) == before
    finally:
        released.cancel()
        holder.rollback()
        holder.close()


def _append_raw(path: Path, stream: str, version: int, topic: str, state: bytes) -> int:
    with sqlite3.connect(path) as connection:
        cursor = connection.execute(
            "INSERT INTO stored_events VALUES (?, ?, ?, ?)", (stream, version, topic, state)
        )
        position = cursor.lastrowid
    connection.close()
    assert position is not None
    return position


@pytest.mark.parametrize(
    "topic,state,message",
    [
        ("tasktrail.TaskTeleported", b'{"at":1}', "unknown event topic"),
        (
            "tasktrail.TaskSubmitted",
            b'{"at":1,"kind":"k","version":1,"phase":"p","class_version":9}',
            "newer tasktrail",
        ),
        ("tasktrail.TaskSubmitted", b'{"at":1,"kind":["batch"],"version":1,"phase":"p"}', "kind"),
        ("tasktrail.TaskSubmitted", b"not json", "not JSON"),
    ],
    ids=["unknown topic", "newer version", "wrong type", "not json"],
)
def test_every_reader_exits_2_on_an_event_it_cannot_read_and_names_its_position(
    topic: str, state: bytes, message: str, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    position = _append_raw(store, "intruder", 1, topic, state)
    before = folder_state(store.parent)
    for argv in (
        ["verify", str(store)],
        ["verify", str(store), "--json"],
        ["replay", str(store)],
        ["tasks", str(store)],
        # explain and trace of one task read its tree only: the intruder's, here
        ["explain", str(store), "intruder"],
        ["diff", str(store), str(store)],
        ["trace", str(store)],
        ["trace", str(store), "intruder"],
        ["history", str(store), "intruder"],
    ):
        ran = run(argv, capsys)
        assert ran.code == 2, (argv, ran)
        assert f"position {position}" in ran.err and message in ran.err, (argv, ran.err)
        assert "Traceback" not in ran.err
    assert folder_state(store.parent) == before


def test_history_shows_store_positions_and_never_hides_a_gap(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["history", str(store), "fragile-0001", "--json"], capsys)
    rows = [orjson.loads(line) for line in ran.out.splitlines()]
    with sqlite3.connect(store) as connection:
        stored = connection.execute(
            "SELECT rowid, originator_version FROM stored_events WHERE originator_id = ? "
            "ORDER BY originator_version",
            ("fragile-0001",),
        ).fetchall()
        assert [(r["position"], r["version"]) for r in rows] == stored
        removed = stored[3][0]
        connection.execute("DELETE FROM stored_events WHERE rowid = ?", (removed,))
    connection.close()
    before = folder_state(store.parent)
    ran = run(["history", str(store), "fragile-0001"], capsys)
    assert ran.code == 1
    assert "version 4 missing from the store" in ran.out
    assert f"version 4 missing before position {stored[4][0]}" in ran.err
    assert ran.out.splitlines()[0].split()[:2] == [str(stored[0][0]), "1"]
    assert folder_state(store.parent) == before


def test_import_skip_invalid_names_each_skipped_line(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "v.jsonl"
    assert run(["export", str(store), str(log)], capsys).code == 0
    lines = log.read_bytes().splitlines(keepends=True)
    lines.insert(3, b"garbage\n")
    lines.insert(7, b'{"position": 8}\n')
    log.write_bytes(b"".join(lines))
    ran = run(["import", str(log), str(tmp_path / "copy.db"), "--skip-invalid"], capsys)
    assert ran.code == 0, ran
    assert f"{log}:4: skipped: not JSON" in ran.err
    assert f"{log}:8: skipped: missing topic" in ran.err


def test_postgresql_failures_say_the_cause() -> None:
    with pytest.raises(StoreError) as refused:
        Scheduler.open("postgresql://postgres@127.0.0.1:1/test?connect_timeout=1")
    assert "refused" in str(refused.value).lower() or "connect" in str(refused.value).lower()
    assert "couldn't get a connection" not in str(refused.value)


def test_postgresql_missing_database_is_named(postgres_url: str) -> None:
    url = postgres_url.split("?", 1)[0].rsplit("/", 1)[0] + "/no_such_database_17"
    with pytest.raises(StoreError) as refused:
        Scheduler.open(url)
    assert 'database "no_such_database_17" does not exist' in str(refused.value)


def test_a_postgresql_pool_timeout_mid_run_is_given_its_cause() -> None:
    """The pool only says it timed out; the store adds what one direct connection says."""
    from tasktrail.domain import Store
    from tasktrail.domain.store.location import parse_location

    store = Store.__new__(Store)  # the server went away after it opened
    store.location = parse_location("postgresql://postgres@127.0.0.1:1/test?connect_timeout=1")
    why = store._why(Exception("couldn't get a connection after 1.00 sec"))
    assert why.startswith("couldn't get a connection after 1.00 sec: ")
    assert "refused" in why.lower() or "connect" in why[40:].lower()


@pytest.mark.parametrize(
    "argv",
    [
        ["archive", "{store}", "--before", "30d", "--to", "{folder}", "--actor", "a"],
        ["archive", "{store}", "--before", "30d", "--to", "{folder}", "--dry-run"],
        ["erase", "{store}", "t", "--actor", "a", "--reason", "asked"],
    ],
)
def test_a_retention_act_on_a_missing_store_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Found in this session: ``archive`` and ``erase`` on a path that holds no store
    made an empty store there (and the archive folder) and reported nothing moved. A
    write command never creates a store: refused, named, nothing made."""
    store, folder = tmp_path / "nope.db", tmp_path / "archive"
    ran = run([part.format(store=store, folder=folder) for part in argv], capsys)
    assert ran.code == 2 and f"no store at {store}" in ran.err, ran.err
    assert sorted(tmp_path.iterdir()) == []
