"""The demo workload and the command line."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import orjson
import pytest

from tasktrail.domain import Scheduler, open_store
from tasktrail.domain.demo.workload import run_demo
from tasktrail.replay import replay
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


# ─── the demo's trace (issue 18) ─────────────────────────────────────────────


def _otlp_spans(db: Path, out: Path) -> list[dict[str, Any]]:
    assert main(["trace", str(db), "--out", str(out)]) == 0
    document = orjson.loads(out.read_bytes())
    spans: list[dict[str, Any]] = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_demo_trace_looks_like_an_incident(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.db"
    run_demo(db, 200, log=lambda _: None)
    spans = _otlp_spans(db, tmp_path / "trace.json")
    capsys.readouterr()
    by_id = {span["spanId"]: span for span in spans}
    tasks = replay(db).tasks
    # The clock moves inside phases: phases take time, and not all the same time.
    durations = [int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"]) for s in spans]
    assert sum(1 for d in durations if d > 0) > 0.95 * len(spans)
    assert len(set(durations)) > 50
    # Owned work nests: each owned task's spans are children of a span of its owner,
    # one that started before it (the phase that submitted it); root tasks' are roots.
    nested = 0
    for span in spans:
        task = tasks[_attributes(span)["task.id"]]
        parent = by_id.get(span.get("parentSpanId") or "")
        if task.owner_id is None:
            assert parent is None
            continue
        assert parent is not None, _attributes(span)
        assert _attributes(parent)["task.id"] == task.owner_id
        assert parent["traceId"] == span["traceId"]
        assert int(parent["startTimeUnixNano"]) <= int(span["startTimeUnixNano"])
        nested += 1
    assert nested > len(spans) / 2
    # Times only move forward along the log: replay(until=TIME) stays exact.
    with open_store(db) as store:
        times = [recorded.event.at for recorded in store.read()]
    assert times == sorted(times)


def test_demo_trace_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_demo(tmp_path / "a.db", 60, log=lambda _: None)
    run_demo(tmp_path / "b.db", 60, log=lambda _: None)
    first = _otlp_spans(tmp_path / "a.db", tmp_path / "a.json")
    second = _otlp_spans(tmp_path / "b.db", tmp_path / "b.json")
    capsys.readouterr()
    assert first == second


def test_tasks_history_and_explain_json_are_json_lines_and_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.db"
    run_demo(db, 30, log=lambda _: None)
    state = replay(db)
    for argv, expected in (
        (["tasks", str(db), "--json", "--all"], len(state.tasks)),
        (["history", str(db), "fragile-0001", "--json"], state.tasks["fragile-0001"].events),
        (["explain", str(db), "fragile-0001", "--json"], None),
    ):
        assert main(argv) == 0
        lines = capsys.readouterr().out.splitlines()
        objects = [orjson.loads(line) for line in lines]  # every line a document of its own
        assert objects and all(isinstance(o, dict) for o in objects), argv
        if expected is not None:
            assert len(objects) == expected, argv
        with pytest.raises(SystemExit):
            main([argv[0], "--help"])
        assert "JSON Lines" in capsys.readouterr().out, argv[0]
    commands = Path(__file__).parent.parent / "docs" / "commands.md"
    said = " ".join(commands.read_text().split())
    assert "`tasks`, `history` and `explain` with `--json` print JSON Lines" in said


def test_the_demo_ends_by_pointing_at_the_report_of_the_store_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--db", "my demo.db", "--tasks", "30"]) == 0
    lines = capsys.readouterr().out.rstrip().splitlines()
    pointer = next(line for line in lines if line.startswith("next: "))
    command = shlex.split(pointer.removeprefix("next: "))
    assert command == ["tasktrail", "report", "my demo.db", "--out", "my demo-report.html"]
    assert lines[-1].split() == ["tasktrail", "history", "'my", "demo.db'", "fragile-0001"]
    assert main(command[1:]) == 0  # the command as printed works
    assert "all 30 tasks drawn" in capsys.readouterr().out
    assert (tmp_path / "my demo-report.html").stat().st_size > 10_000
