"""The replay tool: any log back into state, as of any position; export, diff, verify, explain."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from conftest import examples
from helpers.checks import folded_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain import CorruptEvent, ManualClock, Registry, Scheduler, StoreError
from tasktrail.domain.demo.workload import run_demo
from tasktrail.projections import Projector
from tasktrail.replay import (
    LogError,
    diff,
    explain,
    export,
    fold,
    import_log,
    replay,
    verify,
)
from tasktrail.replay.cli import main
from tasktrail.replay.harness import Harness
from tasktrail.replay.strategies import command_sequences


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    run_demo(path, 60, log=lambda _: None)
    return path


def test_replay_sources_agree_and_never_write(demo_store: Path, tmp_path: Path) -> None:
    before = demo_store.read_bytes()
    from_store = replay(demo_store)
    assert demo_store.read_bytes() == before  # the source is never written
    jsonl = tmp_path / "demo.jsonl"
    export(demo_store, jsonl)
    from_jsonl = replay(jsonl)
    assert from_store == from_jsonl
    assert from_store.state_hash() == from_jsonl.state_hash() == replay(demo_store).state_hash()
    assert from_store.events == from_store.position == len(from_store.audit)


def test_replay_until_a_position_shows_what_was_live_then(demo_store: Path) -> None:
    full = replay(demo_store)
    middle = full.position // 2
    then = replay(demo_store, until=middle)
    assert then.position == middle
    assert then.live and not full.live
    for task_id, task in then.live.items():
        assert full.tasks[task_id].status == "terminal"
        assert task.events <= full.tasks[task_id].events


def test_replay_until_a_clock_time(demo_store: Path) -> None:
    full = replay(demo_store)
    cut = full.audit[len(full.audit) // 2]["at"]
    from datetime import UTC, datetime

    moment = datetime.fromtimestamp(cut / 1000, tz=UTC)
    by_time = replay(demo_store, until=moment.isoformat().replace("+00:00", "Z"))
    assert all(row["at"] <= cut for row in by_time.audit)
    assert by_time.position < full.position
    assert full.audit[by_time.position]["at"] > cut  # it stopped at the first later event
    with pytest.raises(ValueError, match="neither a position"):
        replay(demo_store, until="yesterday")


@given(cut=st.integers(0, 400))
def test_replay_up_to_n_then_folding_the_rest_equals_replay(demo_store: Path, cut: int) -> None:
    full = replay(demo_store)
    records = _records(demo_store)
    n = min(cut, len(records))
    prefix = fold(records[:n])
    assert fold(records[n:], state=prefix) == full


def _records(path: Path) -> list:
    from tasktrail.domain import open_store

    with open_store(path) as store:
        return list(store.read())


def test_replay_equals_the_projections(demo_store: Path, tmp_path: Path) -> None:
    state = replay(demo_store)
    with Projector(demo_store, tmp_path / "views.db") as projector:
        projector.catch_up()
        for name, rows in state.tables.items():
            keys = state.keys[name]
            stored = {
                (tuple(row[k] for k in keys) if len(keys) > 1 else row[keys[0]]): row
                for row in folded_rows(projector, name)
            }
            assert stored == rows, name


def test_export_round_trip_is_byte_identical(store_url: str, tmp_path: Path, registry) -> None:
    clock = ManualClock(5_000)
    scheduler = Scheduler.open(store_url, clock=clock, registry=registry)
    owner = scheduler.submit("job", id="owner")
    scheduler.submit("leaf", id="child", owner=owner)
    scheduler.run_until_idle()
    scheduler.close()
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    count = export(store_url, first)
    assert import_log(first, tmp_path / "copy.db") == count
    export(tmp_path / "copy.db", second)
    assert first.read_bytes() == second.read_bytes()
    line = orjson.loads(first.read_bytes().splitlines()[0])
    assert list(line) == [
        "position",
        "topic",
        "originator_id",
        "originator_version",
        "at",
        "payload",
    ]


def _log(tmp_path: Path, demo_store: Path) -> tuple[Path, list[bytes]]:
    path = tmp_path / "log.jsonl"
    export(demo_store, path)
    return path, path.read_bytes().splitlines(keepends=True)


def test_corrupt_line_names_the_line(demo_store: Path, tmp_path: Path) -> None:
    path, lines = _log(tmp_path, demo_store)
    lines[4] = b'{"position": 5, "topic": \n'
    path.write_bytes(b"".join(lines))
    with pytest.raises(LogError, match=r"log\.jsonl:5: not JSON"):
        replay(path)
    state = replay(path, skip_invalid=True, strict=False)
    assert [(s.line, s.reason.split(" (")[0]) for s in state.skipped] == [(5, "not JSON")]
    assert state.problems  # the stream after the skipped event cannot follow it: reported


def test_unknown_topic_names_the_line_and_topic(demo_store: Path, tmp_path: Path) -> None:
    path, lines = _log(tmp_path, demo_store)
    row = orjson.loads(lines[2])
    row["topic"] = "tasktrail.FromTheFuture"
    lines[2] = orjson.dumps(row) + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(LogError, match=r":3: .*unknown event topic 'tasktrail.FromTheFuture'"):
        replay(path)


def test_out_of_order_position_names_what_was_expected(demo_store: Path, tmp_path: Path) -> None:
    path, lines = _log(tmp_path, demo_store)
    lines[6], lines[7] = lines[7], lines[6]
    path.write_bytes(b"".join(lines))
    with pytest.raises(LogError, match=r":8: position 7 out of order: expected more than 8"):
        replay(path)


def test_truncated_file_names_the_last_line(demo_store: Path, tmp_path: Path) -> None:
    path, lines = _log(tmp_path, demo_store)
    path.write_bytes(b"".join(lines)[:-40])
    with pytest.raises(LogError, match=rf":{len(lines)}: truncated"):
        replay(path)


def test_missing_fields_and_bad_values_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"position": 1}\n')
    with pytest.raises(LogError, match=":1: missing topic"):
        replay(path)
    path.write_bytes(
        b'{"position": -1, "topic": "t", "originator_id": "x", "originator_version": 1,'
        b' "at": 0, "payload": {}}\n'
    )
    with pytest.raises(LogError, match="position must be an integer >= 1"):
        replay(path)
    with pytest.raises(StoreError, match="no store at"):
        replay(tmp_path / "nothing.db")


def test_import_checks_every_line_before_writing(demo_store: Path, tmp_path: Path) -> None:
    path, lines = _log(tmp_path, demo_store)
    path.write_bytes(b"".join(lines[:10]) + b"garbage\n" + b"".join(lines[10:]))
    target = tmp_path / "target.db"
    with pytest.raises(LogError, match=":11: not JSON"):
        import_log(path, target)
    assert not target.exists()  # nothing was written, not even an empty store (issue 30)


def test_diff_reads_as_text_and_as_data(demo_store: Path) -> None:
    a, b = replay(demo_store, until=100), replay(demo_store, until=110)
    found = diff(a, b)
    assert found and not diff(b, b)
    data = found.to_dict()
    assert data["positions"] == [100, 110]
    changed = {d["task_id"] for d in data["tasks"]}
    assert changed == {r["task_id"] for r in b.audit[100:110]}
    assert "a at position 100, b at 110" in str(found)


def test_verify_passes_on_a_good_log_and_names_positions_of_violations(
    demo_store: Path, tmp_path: Path
) -> None:
    assert verify(demo_store).ok
    path, lines = _log(tmp_path, demo_store)
    # Append an event after a terminal one: a log tasktrail would never write.
    last = orjson.loads(lines[-3])  # the last event (the last lines: the heads, the seal)
    extra = dict(last)
    extra["position"] = last["position"] + 1
    extra["originator_version"] = last["originator_version"] + 1
    extra["topic"] = "tasktrail.CheckpointCommitted"
    extra["payload"] = {"at": last["at"], "rule": None, "phase": "again", "attempt": None}
    path.write_bytes(b"".join(lines) + orjson.dumps(extra) + b"\n")
    report = verify(path)
    assert not report.ok
    violation = report.violations[0]
    assert violation.check == "fold" and violation.positions == (extra["position"],)
    assert "after the terminal outcome" in violation.message


def test_verify_finds_a_held_outcome_without_owned_work(tmp_path: Path) -> None:
    from tasktrail.domain.store.store import Recorded
    from tasktrail.domain.tasks.events import OutcomeHeld, TaskSubmitted

    records = [
        Recorded(1, TaskSubmitted(task_id="t", at=0, kind="k", version=1, phase="p"), 1),
        Recorded(2, OutcomeHeld(task_id="t", at=1, status="completed"), 2),
    ]
    report = verify(fold(records))
    assert [(v.check, v.task_id, v.positions) for v in report.violations] == [
        ("rule_05_held_outcomes", "t", (2,))
    ]


def test_explain_tells_a_tasks_story_with_its_rules(demo_store: Path) -> None:
    steps = explain(demo_store, "fragile-0001")
    assert steps[0].event_type == "TaskSubmitted"
    recoveries = [s for s in steps if s.event_type == "TaskRecovered"]
    assert len(recoveries) == 2 and all(s.rule == 9 for s in recoveries)
    assert "recovery after a crash" in recoveries[0].why
    assert steps[-1].status_after == "terminal"


def test_cli_replay_verify_explain_and_exit_codes(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(demo_store)]) == 0
    assert "checks: ok" in capsys.readouterr().out
    assert main(["replay", str(demo_store), "--until", "150"]) == 0
    assert "as of position 150" in capsys.readouterr().out
    assert main(["replay", str(demo_store), "--until", "150", "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["position"] == 150 and data["live"]
    assert main(["explain", str(demo_store), "fragile-0001"]) == 0
    assert "rule 9" in capsys.readouterr().out
    assert main(["diff", str(demo_store), str(demo_store), "--until-a", "10"]) == 1
    assert main(["diff", str(demo_store), str(demo_store)]) == 0
    out = tmp_path / "x.jsonl"
    assert main(["export", str(demo_store), str(out)]) == 0
    assert main(["import", str(out), str(tmp_path / "y.db")]) == 0
    assert main(["import", str(out), str(tmp_path / "y.db")]) == 2  # not empty
    out.write_bytes(out.read_bytes() + b"{broken\n")
    assert main(["replay", str(out)]) == 2
    assert "not JSON" in capsys.readouterr().err
    assert main(["replay", str(out), "--skip-invalid"]) == 0
    assert "skipped line" in capsys.readouterr().err
    assert main(["explain", str(demo_store), "no-such-task"]) == 2


@pytest.mark.grows
def test_harness_sequences_replay_to_the_live_state() -> None:
    @settings(max_examples=examples(10, 200))
    @given(command_sequences(max_size=20))
    def check(steps) -> None:
        with Harness.temporary() as harness:
            harness.run(steps)
            state = replay(harness.store)
            assert state.tasks == harness.scheduler.world.tasks
            assert verify(state).ok

    check()


def test_corrupt_store_event_is_reported_with_position(tmp_path: Path, registry: Registry) -> None:
    import sqlite3

    path = tmp_path / "t.db"
    scheduler = Scheduler.open(path, clock=ManualClock(0), registry=registry)
    scheduler.submit("job", id="x")
    scheduler.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE stored_events SET state = ? WHERE originator_version = 1", (b"{",))
    with pytest.raises(CorruptEvent, match="position 1"):
        replay(path, snapshots=False)
    # The snapshot taken at close recorded the digest of the event it folded last: the
    # edited row no longer carries it, so the snapshot is passed over (issue 30) and the
    # fold from position 0 reports the damage, as replay without snapshots and verify do.
    with pytest.raises(CorruptEvent, match="position 1"):
        replay(path)
    report = verify(path)
    assert not report.ok and report.violations[0].positions == (1,)


def _damaged_copy(demo_store: Path, tmp_path: Path, position: int) -> Path:
    """A copy of the demo store whose event at ``position`` holds a payload no event
    class takes (a field of the wrong JSON type), without its snapshots."""
    import shutil
    import sqlite3

    copy = tmp_path / "damaged.db"
    shutil.copy(demo_store, copy)
    with sqlite3.connect(copy) as conn:
        damaged = (b'{"at":"x"}', position)
        conn.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", damaged)
        conn.execute("DELETE FROM tasktrail_snapshots")  # a replay then reads every event
    conn.close()
    return copy


def test_skip_invalid_leaves_out_a_stores_unreadable_event_and_names_its_position(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As for an export's lines: without ``skip_invalid`` a corrupt event stops the
    replay with its position; with it, the event is left out and reported."""
    copy = _damaged_copy(demo_store, tmp_path, 5)
    with pytest.raises(CorruptEvent, match="event at position 5:"):
        replay(copy)
    before = copy.read_bytes()
    state = replay(copy, skip_invalid=True, strict=False)
    assert [(s.line, s.position) for s in state.skipped] == [(None, 5)]
    assert "event at position 5:" in state.skipped[0].reason
    assert state.problems  # the stream after the skipped event cannot follow it: reported
    assert copy.read_bytes() == before  # read-only, as every replay
    capsys.readouterr()
    assert main(["replay", str(copy), "--skip-invalid"]) == 0  # lenient: on past the gap
    err = capsys.readouterr().err
    assert "skipped event at position 5:" in err and "not applied: event at position" in err
    # The last event left out: the rest folds, and the command line says what it skipped.
    last = replay(demo_store).position
    (tmp_path / "last").mkdir()
    copy = _damaged_copy(demo_store, tmp_path / "last", last)
    capsys.readouterr()
    assert main(["replay", str(copy)]) == 2
    assert f"event at position {last}:" in capsys.readouterr().err
    assert main(["replay", str(copy), "--skip-invalid"]) == 0
    assert f"skipped event at position {last}:" in capsys.readouterr().err
