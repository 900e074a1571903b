"""The demo workload and the command line."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tasktrail.domain import Scheduler
from tasktrail.domain.demo.workload import run_demo
from tasktrail.replay.cli import main


def test_demo_records_every_scenario(tmp_path: Path) -> None:
    lines: list[str] = []
    report = run_demo(tmp_path / "demo.db", 60, log=lines.append)
    assert report.tasks == 60
    assert report.outcomes["completed"] > 0
    assert report.outcomes["failed"] > 0  # failed searches and reviews
    assert report.outcomes["aborted"] >= 6  # the batch and its ingests, by cascade
    assert report.restarts_counted == 2 and report.parked == [report.story_task]
    assert any("crash 1" in line for line in lines)
    assert any("operator retry" in line for line in lines)
    story = "\n".join(report.story)
    assert "TaskRecovered(restarts=2, worker=demo)" in story and "RestartsCleared" in story
    assert story.rstrip().endswith("TaskEnded(status=completed)")
    assert any("wakeup aggregated 2 requests" in line for line in lines)
    assert any("wakeup dispatched" in line and "leader.1" in line for line in lines)
    assert any("stale completion refused" in line for line in lines)
    ledger = "\n".join(report.ledger)
    for code in ("job_lost", "canceled", "interrupted", "orphaned", "superseded", "expired"):
        assert code in ledger, code
    for code in ("submit_exhausted", "identity_conflict", "model_overloaded"):
        assert code in ledger, code
    # Everything ended and the store folds back to the same tasks.
    reopened = Scheduler.open(tmp_path / "demo.db")
    assert all(t.status == "terminal" for t in reopened.tasks())
    assert reopened.store.head() == report.events
    reopened.close()


def test_demo_is_deterministic(tmp_path: Path) -> None:
    first = run_demo(tmp_path / "a.db", 30, log=lambda _: None)
    second = run_demo(tmp_path / "b.db", 30, log=lambda _: None)
    assert first.outcomes == second.outcomes and first.events == second.events
    assert first.story == second.story and first.ledger == second.ledger


def test_cli_demo_history_and_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "demo.db"
    assert main(["demo", "--db", str(db), "--tasks", "40"]) == 0
    out = capsys.readouterr().out
    assert "events" in out and "history of fragile-0001" in out
    assert main(["history", str(db), "fragile-0001", "--json"]) == 0
    rows = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["type"] == "TaskSubmitted" and rows[-1]["type"] == "TaskEnded"
    assert [r["version"] for r in rows] == list(range(1, len(rows) + 1))
    assert main(["tasks", str(db), "--status", "terminal"]) == 0
    assert "fragile-0001" in capsys.readouterr().out


def test_cli_bad_input_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "demo.db"
    run_demo(db, 30, log=lambda _: None)
    assert main(["history", str(db), "no-such-task"]) == 2
    assert "no such task" in capsys.readouterr().err
    assert main(["history", str(tmp_path / "missing.db"), "x"]) == 2
    assert "no store at" in capsys.readouterr().err
    assert main(["demo", "--db", str(db), "--tasks", "3"]) == 2
    with pytest.raises(SystemExit) as caught:
        main(["no-such-command"])
    assert caught.value.code == 2
