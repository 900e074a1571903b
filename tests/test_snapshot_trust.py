"""Issue 30, item 3: snapshots are checked before they are trusted.

A snapshot row is edited as an attacker with write access to the store would (issue
30's cases: a pending task made terminal, a number turned into text, an id that is
not live, a 900-deep list; and heads that no longer match the log, a world the
events after it cannot follow, a row of the wrong column types). Each is reported,
passed over (folding from the one before, or from position 0), the task still runs,
and nothing raises: not an open, not ``tasks``, ``replay``, ``project`` or ``snapshot
--prune`` (which drops it). Any edit sealed again, and keyed stores, are
tests/test_snapshot_trust_resealed.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.snapshot_trust import _edit_world, _rewrite

from tasktrail.domain import ManualClock, Registry, Scheduler, open_store
from tasktrail.domain.history import SnapshotTable, open_body, restore, snapshot_body
from tasktrail.domain.world_fold import index_task
from tasktrail.replay import replay, verify
from tasktrail.replay.cli import main
from tasktrail.replay.harness import crash


def _one_pending_task(location: str, clock: ManualClock, registry: Registry) -> tuple[str, int]:
    """A store with one pending task (phase ``start`` of ``job``) and a snapshot of it."""
    s = Scheduler.open(location, clock=clock, registry=registry)
    task_id = s.submit("job", phase="start")
    s.close()  # the snapshot at close
    with open_store(location, read_only=True) as store:
        (position,) = SnapshotTable(store).positions()
    return task_id, position


def _task_fields(data: Any) -> list[Any]:
    values: list[Any] = data["parts"]["tasks"]["d"][0][1]["v"]
    return values


def _field(data: Any, name: str) -> int:
    (names,) = [fields for cls, fields in data["classes"] if cls.endswith(":TaskState")]
    index: int = names.index(name)
    return index


EDITS: dict[str, Callable[[Any], None]] = {
    "a number turned into text": lambda d: _task_fields(d).__setitem__(_field(d, "restarts"), "7"),
    "a status no task has": lambda d: _task_fields(d).__setitem__(_field(d, "status"), "done"),
    "an id that is not live": lambda d: d["parts"]["live"]["s"].append("ghost"),
    "a 900-deep list": lambda d: _task_fields(d).__setitem__(
        _field(d, "memos"), {"m": [["k", "DEEP"]]}
    ),
    "a class number past its table": lambda d: _task_fields(d).__setitem__(
        _field(d, "checkpoint"), {"c": 99, "v": []}
    ),
}


def _assert_passed_over_and_runs(
    location: str, task_id: str, clock: ManualClock, registry: Registry, why: str
) -> None:
    s = Scheduler.open(location, clock=clock, registry=registry)
    try:
        assert len(s.snapshot_problems) == 1 and why in s.snapshot_problems[0], s.snapshot_problems
        assert s.snapshot_at == 0  # folded from position 0: the only snapshot failed
        assert s.task(task_id).status == "pending"
        s.run_until_idle()
        assert s.task(task_id).status == "terminal"  # the task still ran
        assert s.task(task_id).outcome.status == "completed"  # type: ignore[union-attr]
    finally:
        s.close()


def test_a_pending_task_edited_to_terminal_is_caught_by_the_digest(
    store_url: str, clock: ManualClock, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id, position = _one_pending_task(store_url, clock, registry)
    with open_store(store_url) as store:
        body = SnapshotTable(store).at(position).body  # type: ignore[union-attr]
    edited = body.replace(b'"pending"', b'"terminal"')
    assert edited != body
    _rewrite(store_url, position, edited)

    # tasks and replay answer from the log, and say so (exit 0, not a hidden task).
    assert main(["tasks", store_url]) == 0
    out, err = capsys.readouterr()
    assert task_id in out and "pending" in out
    assert f"snapshot at position {position} is unreadable" in err and "digest" in err
    assert "folded from position 0" in err
    assert main(["replay", store_url, "--json"]) == 0
    answer = orjson.loads(capsys.readouterr().out)
    assert answer["snapshot"] is None and "digest" in answer["snapshot_problems"][0]
    assert [t["status"] for t in answer["live"]] == ["pending"]
    _assert_passed_over_and_runs(store_url, task_id, clock, registry, "digest")


@pytest.mark.parametrize("case", list(EDITS))
def test_a_snapshot_with_a_value_no_fold_makes_is_passed_over(
    store_url: str,
    clock: ManualClock,
    registry: Registry,
    case: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    task_id, position = _one_pending_task(store_url, clock, registry)
    _edit_world(store_url, position, EDITS[case])
    for command in (["tasks", store_url], ["replay", store_url], ["verify", store_url]):
        code = main(command)
        out, err = capsys.readouterr()
        assert code in (0, 1), (command, code, err)  # verify: 1, the snapshot differs
        assert "internal error" not in err
        if command[0] != "verify":
            assert f"snapshot at position {position} is unreadable" in err, err
            assert task_id in out
    _assert_passed_over_and_runs(store_url, task_id, clock, registry, "unreadable")


def test_heads_that_do_not_match_the_log_are_caught(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """A snapshot whose digest is good but whose recorded heads are not the log's (a log
    rewritten under it, or a snapshot copied from another store)."""
    task_id, position = _one_pending_task(store_url, clock, registry)
    with open_store(store_url) as store:
        body = SnapshotTable(store).at(position).body  # type: ignore[union-attr]
        data, heads = open_body(body)
        from tasktrail.domain.history.envelope import seal_body

        forged = {stream: (version, "0" * 64) for stream, (version, _) in heads.items()}
        _rewrite(store_url, position, seal_body(orjson.dumps(data), forged))
    _assert_passed_over_and_runs(store_url, task_id, clock, registry, "does not match the log")
    report = verify(store_url)  # the world equals the fold; its heads are not the log's
    assert [v.check for v in report.violations] == ["snapshots"], report.violations
    assert "does not match the log" in report.violations[0].message


def test_a_snapshot_the_events_after_it_cannot_follow_is_passed_over(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Consistent in itself, sealed with a good digest and the log's heads, yet saying
    a pending task ended: the task's next event in the log (its reservation) cannot
    follow that, so the fold from it fails and the open folds from 0 instead."""
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("job", phase="start")
    at = s.snapshot()
    other = s.submit("job", phase="start")  # an event after the snapshot...
    s.reserve(task_id)  # ...and one of the edited task's
    crash(s)  # dropped, no snapshot at close
    with open_store(store_url) as store:
        world = restore(store, at, snapshots=False).world
        world.compact()
        task = world.tasks[task_id]
        ended = dataclasses.replace(task, status="terminal")
        index_task(world, task, ended)
        world.tasks[task_id] = ended
        world.indexes["live_order"].pop(task_id)
        body = snapshot_body(store, world, at)
    _rewrite(store_url, at, body)
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    try:
        assert len(s.snapshot_problems) == 1
        assert "does not fit the events after it" in s.snapshot_problems[0]
        assert {s.task(task_id).status, s.task(other).status} <= {"pending", "running"}
    finally:
        s.close()


def test_a_snapshot_that_fails_is_passed_over_for_the_one_before(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task_id = s.submit("job", phase="start")
    first = s.snapshot()
    s.submit("job", phase="start")
    s.close()
    with open_store(sqlite_url, read_only=True) as store:
        latest = SnapshotTable(store).positions()[-1]
    _edit_world(sqlite_url, latest, EDITS["an id that is not live"])
    state = replay(sqlite_url)
    assert state.snapshot == first and "is unreadable" in state.snapshot_problems[0]
    assert task_id in state.live
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    assert s.snapshot_at == first and len(s.snapshot_problems) == 1
    s.close()


def test_prune_drops_unreadable_snapshots(
    store_url: str, clock: ManualClock, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    s.submit("job", phase="start")
    good = s.snapshot()
    s.submit("job", phase="start")
    s.close()
    with open_store(store_url, read_only=True) as store:
        bad = SnapshotTable(store).positions()[-1]
    _rewrite(store_url, bad, b"{not a snapshot")
    assert main(["snapshot", store_url, "--prune", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == {"dropped": [bad], "kept": 1, "malformed": 0}
    with open_store(store_url, read_only=True) as store:
        assert SnapshotTable(store).positions() == [good]
        assert restore(store).snapshot == good


@pytest.mark.parametrize(
    "column, value",
    [("body", "a text, not bytes"), ("format", "five"), ("position", "last"), ("written_at", "x")],
)
def test_a_snapshot_row_of_the_wrong_column_types_is_passed_over_and_pruned(
    sqlite_url: str,
    clock: ManualClock,
    registry: Registry,
    column: str,
    value: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SQLite keeps whatever a hand edit puts in a column: a text body, a format or a
    position that is no number. No read takes such a row as a snapshot, none raises,
    prune drops it."""
    task_id, position = _one_pending_task(sqlite_url, clock, registry)
    with open_store(sqlite_url) as store:
        table = SnapshotTable(store)
        with table._cursor(commit=True) as cursor:
            cursor.execute(f"UPDATE {table._table} SET {column} = ?", (value,))
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    # Only the time it was written does not bear on what it says: that one is read.
    assert s.snapshot_at == (position if column == "written_at" else 0)
    assert s.task(task_id).status == "pending"
    crash(s)
    assert main(["tasks", sqlite_url]) == 0 and main(["snapshot", sqlite_url, "--list"]) == 0
    assert main(["snapshot", sqlite_url, "--prune", "--json"]) == 0
    assert "internal error" not in capsys.readouterr().err
    with open_store(sqlite_url, read_only=True) as store:
        assert SnapshotTable(store).count() == 0


def test_replay_and_tasks_say_which_snapshot_they_started_from(
    sqlite_url: str, clock: ManualClock, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    _, position = _one_pending_task(sqlite_url, clock, registry)
    for command in (["tasks", sqlite_url], ["replay", sqlite_url], ["tasks", sqlite_url, "--json"]):
        assert main(command) == 0
        err = capsys.readouterr().err
        assert f"started from the snapshot at position {position}" in err, (command, err)
    assert main(["replay", sqlite_url, "--json"]) == 0
    answer = orjson.loads(capsys.readouterr().out)
    assert answer["snapshot"] == position and answer["snapshot_problems"] == []


def test_the_projector_passes_over_a_false_snapshot_and_says_so(
    sqlite_url: str,
    clock: ManualClock,
    registry: Registry,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A projector resuming starts from the snapshot at its read models' position: one
    that fails is passed over there too (named on stderr), and the read models come out
    as a rebuild from position 0 makes them."""
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    first = s.submit("job", phase="start")
    s.close()
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.submit("job", phase="start")
    s.close()
    with open_store(sqlite_url, read_only=True) as store:
        first_snapshot, latest = SnapshotTable(store).positions()
    out = tmp_path / "views.db"
    assert main(["project", sqlite_url, "--out", str(out), "--quiet"]) == 0  # at `latest`
    _edit_world(sqlite_url, latest, EDITS["an id that is not live"])
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.reserve(first)  # more events: the projector has something to catch up
    crash(s)  # no snapshot at close
    capsys.readouterr()
    assert main(["project", sqlite_url, "--out", str(out), "--quiet", "--checksums"]) == 0
    caught_up, err = capsys.readouterr()
    assert f"snapshot at position {latest} is unreadable" in err, err
    assert f"started from the snapshot at position {first_snapshot}" in err, err
    rebuilt = tmp_path / "rebuilt.db"
    assert main(["project", sqlite_url, "--out", str(rebuilt), "--quiet", "--rebuild"]) == 0
    sums = [line for line in capsys.readouterr().out.splitlines() if "checksum" in line]
    assert sums and all(line in caught_up for line in sums)
