"""The tools' cost follows what they are asked, not the history (issue 14): ``explain``
and ``trace`` of one task read its tree, ``tasks`` reads the latest snapshot and the
tail, ``project`` resumes from a snapshot, ``snapshot`` takes one."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest
from helpers.report_stores import demo_store

from tasktrail.domain import ManualClock, Registry, Scheduler, Store, UnknownTask, open_store
from tasktrail.domain.history import FORMAT, SnapshotTable, restore, take_snapshot
from tasktrail.domain.tasks.describe import format_at
from tasktrail.projections import AuditTrail, Projector
from tasktrail.projections import projector as projector_module
from tasktrail.projections.trace import fold_spans, phase_spans
from tasktrail.replay import explain, read_log, replay, story, verify
from tasktrail.replay.cli import main


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store(tmp_path_factory.mktemp("bounded-demo"))


def no_whole_log(monkeypatch: pytest.MonkeyPatch) -> None:
    def whole_log(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a one-task tool read the whole log")

    monkeypatch.setattr(Store, "read", whole_log)
    monkeypatch.setattr(Store, "rows", whole_log)


def full_spans(source: Path, task: str) -> list[object]:
    """The spans of ``task``'s trace as a fold of the whole log finds them."""
    records, _, opened = read_log(source)
    assert opened is not None
    try:
        spans, world, fold = fold_spans(records)
    finally:
        opened.close()
    state = world.get(task)
    assert state is not None
    traces = {span.trace_id for span in spans if span.task_id == task}
    traces.add(fold.trace_of(state, world.get)[0])
    return [span for span in spans if span.trace_id in traces]


def test_explain_of_every_task_equals_the_whole_log_s(demo: Path) -> None:
    full = replay(demo)
    for task_id in full.world.tasks:
        assert story(demo, task_id) == explain(full, task_id), task_id


def test_explain_until_a_position_or_a_time_stops_within_the_tree(demo: Path) -> None:
    steps = explain(replay(demo), "fragile-0001")
    middle = steps[len(steps) // 2]
    as_of = replay(demo, until=middle.position)
    assert story(demo, "fragile-0001", middle.position) == explain(as_of, "fragile-0001")
    moment = format_at(middle.at)
    by_time = story(demo, "fragile-0001", moment)
    assert by_time == explain(replay(demo, until=moment), "fragile-0001")
    assert by_time[-1].at <= middle.at < steps[-1].at


def test_trace_of_every_task_equals_the_whole_log_s(demo: Path) -> None:
    full = replay(demo)
    for task_id in list(full.world.tasks)[::3]:
        assert phase_spans(demo, task_id) == full_spans(demo, task_id), task_id


def test_explain_and_trace_of_one_task_do_not_read_the_log(
    demo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_whole_log(monkeypatch)
    assert main(["explain", str(demo), "fragile-0001"]) == 0
    assert "fragile-0001:" in capsys.readouterr().out
    assert main(["explain", str(demo), "batch-0002", "--until", "40", "--json"]) == 0
    capsys.readouterr()
    assert main(["trace", str(demo), "fragile-0001"]) == 0
    assert '"resourceSpans"' in capsys.readouterr().out
    with pytest.raises(UnknownTask):
        story(demo, "no-such-task")


def mixed_store(path: Path, clock: ManualClock, registry: Registry) -> Scheduler:
    """A store with ended and live tasks, a snapshot, then a tail that ends one more
    and submits another (the scheduler is returned open: the tail stays a tail)."""
    s = Scheduler.open(path, clock=clock, registry=registry)
    tasks = [s.submit("job", phase="a") for _ in range(8)]
    for task_id in tasks[:4]:
        s.reserve(task_id)
        s.finish(task_id, "completed")
    s.reserve(tasks[4])
    s.snapshot()
    s.reserve(tasks[5])
    s.finish(tasks[5], "failed")
    s.submit("job", phase="a")
    return s


def listed(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, object]]:
    assert main(["tasks", *argv, "--json"]) == 0
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_tasks_lists_the_live_work_from_the_snapshot_and_every_task_with_all(
    tmp_path: Path,
    clock: ManualClock,
    registry: Registry,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "mixed.db"
    s = mixed_store(path, clock, registry)
    try:
        full = replay(path, snapshots=False).world.tasks
        live = [t.to_dict() for t in full.values() if t.status != "terminal"]
        everything = [t.to_dict() for t in full.values()]
        assert listed(capsys, str(path), "--all") == everything
        ended = [t for t in everything if t["status"] == "terminal"]
        assert listed(capsys, str(path), "--status", "terminal") == ended and len(ended) == 5
        running = [t for t in live if t["status"] == "running"]
        assert listed(capsys, str(path), "--status", "running") == running
        read = Store.read

        def tail_only(self: Store, after: int = 0, **kwargs: object) -> object:
            assert after > 0, "tasks folded the log from 0"
            return read(self, after=after, **kwargs)

        monkeypatch.setattr(Store, "read", tail_only)
        assert listed(capsys, str(path)) == live and len(live) == 4
        assert main(["tasks", str(path)]) == 0
        header, *lines = capsys.readouterr().out.splitlines()
        assert header.startswith("TASK")
        assert [line.split()[0] for line in lines] == [t["id"] for t in live]
    finally:
        s.close()
    assert not (tmp_path / "mixed.db-views.db").exists()


def test_snapshot_takes_one_lists_them_and_refuses_what_is_not_a_store(
    tmp_path: Path, clock: ManualClock, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.db"
    mixed_store(path, clock, registry).close()
    connection = sqlite3.connect(path)
    with connection:  # as if written before snapshots existed
        connection.execute("DROP TABLE tasktrail_snapshots")
    connection.close()
    with open_store(path, read_only=True) as store:
        assert SnapshotTable(store).positions() == []
        head = store.head()
    assert main(["snapshot", str(path), "--list"]) == 0
    assert "no snapshots kept" in capsys.readouterr().out
    assert main(["snapshot", str(path), "--json"]) == 0
    taken = orjson.loads(capsys.readouterr().out)
    assert taken == {"position": head, "taken": True, "live_tasks": 4, "along": [], "dropped": []}
    assert main(["snapshot", str(path)]) == 0
    assert "already kept" in capsys.readouterr().out
    assert main(["snapshot", str(path), "--list", "--json"]) == 0
    (kept,) = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert kept["position"] == head and kept["format"] == FORMAT and kept["size"] > 0
    with open_store(path, read_only=True) as store:
        restored = restore(store)
        assert restored.snapshot == head and restored.folded == 0
        assert verify(store).ok
    missing = tmp_path / "missing.db"
    assert main(["snapshot", str(missing)]) == 2
    assert "no store at" in capsys.readouterr().err and not missing.exists()
    other = tmp_path / "other.db"
    other.write_bytes(b"not a database")
    assert main(["snapshot", str(other)]) == 2
    assert "not a tasktrail store" in capsys.readouterr().err
    assert other.read_bytes() == b"not a database"


def checksums(store: Path, out: Path) -> dict[str, str]:
    with Projector(store, out) as projector:
        projector.catch_up()
        return projector.table_checksums()


def test_a_projector_resumes_from_a_snapshot_and_writes_what_a_fresh_one_does(
    tmp_path: Path, clock: ManualClock, registry: Registry
) -> None:
    path, out = tmp_path / "p.db", tmp_path / "p-views.db"
    s = mixed_store(path, clock, registry)
    checksums(path, out)
    for task_id in [s.submit("job", phase="a") for _ in range(3)]:
        s.reserve(task_id)
        s.finish(task_id, "completed")
    s.close()  # takes a snapshot
    s = Scheduler.open(path, clock=clock, registry=registry)
    tracked = s.store.head()
    s.reserve(s.submit("job", phase="a"))
    s.close()
    with Projector(path, out) as projector:
        report = projector.catch_up()
        assert projector.restored is not None and projector.restored.snapshot is not None
        assert projector.restored.folded < tracked
        resumed = projector.table_checksums()
    assert report.read < tracked
    assert resumed == checksums(path, tmp_path / "fresh-views.db")


@pytest.mark.parametrize("share", [0.3, 0.6, 0.9])
def test_a_projector_resumes_on_the_demo_s_history_and_compacts_as_it_goes(
    demo: Path, tmp_path: Path, share: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "demo.db"
    shutil.copy(demo, store)
    with open_store(store, read_only=True) as opened:
        head = opened.head()
    tracked = int(head * share)
    # Read models as of ``tracked``: projected from a copy of the log cut there.
    cut = tmp_path / "cut.db"
    shutil.copy(demo, cut)
    connection = sqlite3.connect(cut)
    with connection:
        connection.execute("DELETE FROM stored_events WHERE rowid > ?", (tracked,))
        connection.execute("DELETE FROM tasktrail_snapshots")
    connection.close()
    out = tmp_path / "views.db"
    checksums(cut, out)
    with open_store(store) as opened:  # a snapshot before the tracked position
        take_snapshot(opened, restore(opened, until=tracked // 2).world, tracked // 2)
    monkeypatch.setattr(projector_module, "COMPACT_EVERY", 25)
    with Projector(store, out) as projector:
        projector.batch_size = 40
        projector.catch_up()
        assert projector.restored is not None
        assert projector.restored.snapshot is not None
        assert projector.restored.snapshot <= tracked // 2
        resumed = projector.table_checksums()
    monkeypatch.setattr(projector_module, "COMPACT_EVERY", 10**9)
    assert resumed == checksums(store, tmp_path / "fresh-views.db")


def test_replay_and_verify_keep_no_audit_row_per_event(
    demo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_audit(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("an audit row was made for a command that prints none")

    monkeypatch.setattr(AuditTrail, "apply", no_audit)
    assert main(["verify", str(demo)]) == 0
    assert main(["replay", str(demo), "--json"]) == 0
    assert main(["replay", str(demo), "--until", "100"]) == 0
    assert verify(demo).ok
    capsys.readouterr()


def test_project_catches_up_only_the_new_events(
    tmp_path: Path, clock: ManualClock, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = tmp_path / "c.db", tmp_path / "c-views.db"
    mixed_store(path, clock, registry).close()
    assert main(["project", str(path), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["project", str(path), "--quiet"]) == 0
    assert "no-op" in capsys.readouterr().out
    with open_store(path, read_only=True) as store:
        projected = store.head()
    s = Scheduler.open(path, clock=clock, registry=registry)
    s.submit("job", phase="a")
    s.close()
    with open_store(path, read_only=True) as store:
        new = store.head() - projected
    assert main(["project", str(path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert f"({new} events folded)" in text and "checksum" not in text
    assert main(["project", str(path), "--quiet", "--checksums"]) == 0
    assert "checksum" in capsys.readouterr().out and out.exists()


def test_snapshot_every_takes_them_along_the_log_as_a_writer_would_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], registry: Registry
) -> None:
    """A store written before snapshots existed gets them every N events, each equal to
    the fold at its position (verify), and replay --until starts from the nearest."""
    path = tmp_path / "old.db"
    s = Scheduler.open(path, clock=ManualClock(1_000_000), registry=registry, snapshot_every=None)
    for _ in range(700):
        task_id = s.submit("job", phase="a")
        s.reserve(task_id)
        s.finish(task_id, "completed")
    s.store.close()  # dropped: no snapshot at close, as an old writer left it
    assert main(["snapshot", str(path), "--every", "1000"]) == 0
    out = capsys.readouterr().out
    assert "2 snapshots taken along the log, every 1000 events" in out
    with open_store(path, read_only=True) as store:
        assert SnapshotTable(store).positions() == [1000, 2000, store.head()]
        assert verify(store).ok
    assert replay(path, until=1500).snapshot == 1000
    assert main(["snapshot", str(path), "--every", "10"]) == 2
