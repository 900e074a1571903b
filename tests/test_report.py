"""``tasktrail report``: what the page holds and what it reads. A tree's tasks or the whole
store's, a page of them at a time, outcomes and refusals beside their marks, the search,
``--until``, tasks drawn as context, lanes; read from the tree's streams, and the same
from an export or PostgreSQL. What it writes, and that every string a task recorded
reaches it as text, are in test_report_output.py; the browser tests in
test_report_browser.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.report import demo as demo

from tasktrail.domain import Scheduler, Store, open_store
from tasktrail.domain.tasks.describe import format_at
from tasktrail.replay import explain, export, import_log, replay
from tasktrail.replay.cli import main
from tasktrail.replay.report import gather, render
from tasktrail.replay.report.streams import StoreStreams

TREES = ("batch-0002", "fragile-0001", "research-0003", "review-0004", "crew-0001")


def owner_of(stream_id: str) -> str:
    """The task a stream belongs to: ``run:task|day|attempt`` -> ``task``."""
    return stream_id.split(":", 1)[-1].split("|", 1)[0]


def below(state: object, root: str) -> list[str]:
    """``root`` and everything it owns, from a full replay (the test's own tree walk)."""
    tasks = state.world.tasks  # type: ignore[attr-defined]
    found, stack = [], [root]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(t for t in tasks if tasks[t].owner_id == current)
    return found


@pytest.mark.parametrize("task_id", TREES)
def test_a_tree_report_shows_what_a_full_replay_shows(demo: Path, task_id: str) -> None:
    full = replay(demo)
    data = gather(demo, task_id)
    assert data.steps == explain(full, task_id)  # the same explain trail, step for step
    expected = set(below(full, task_id))
    assert {row.task_id for row in data.timeline.rows} == expected
    for member in expected:
        assert data.tasks[member] == full.world.tasks[member]
    assert data.verify.ok, data.verify
    assert data.head == full.position


def test_a_tree_report_reads_the_tree_streams_not_the_log(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def whole_log(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a report of one task read the whole log")

    tree = set(below(replay(demo), "batch-0002"))
    with open_store(demo) as store:
        streams = [row[1] for row in store.rows()]
    monkeypatch.setattr(Store, "read", whole_log)
    monkeypatch.setattr(Store, "rows", whole_log)
    asked: list[str] = []
    original = StoreStreams.read

    def spy(self: StoreStreams, stream_ids: list[str]) -> object:
        asked.extend(stream_ids)
        return original(self, stream_ids)

    monkeypatch.setattr(StoreStreams, "read", spy)
    data = gather(demo, "batch-0002")
    assert len(tree) == 6
    assert {row.task_id for row in data.timeline.rows} == tree
    # Only the tree's own streams, the passes they name and the restart limit's stream.
    assert "settings:restarts" in asked
    own = [s for s in asked if not s.startswith("pass:") and s != "settings:restarts"]
    owners = {s.split(":", 1)[-1].split("|", 1)[0] for s in own}
    assert owners == tree
    assert data.state.events < 100 and len(set(asked)) < len(streams) / 4


def test_a_whole_store_report_draws_every_task_it_lists(demo: Path) -> None:
    everything = replay(demo).world.tasks
    data = gather(demo)
    assert {row.task_id for row in data.timeline.rows} == set(everything)
    assert data.timeline.hidden == 0 and data.page is None
    assert f"all {len(everything)} tasks drawn" in data.scope
    page = render(data)
    assert page.count('class="name"') == len(everything)  # the owner tree lists them all
    assert page.count("<tr id=") == len(everything)
    assert data.steps is None and 'id="explain"' not in page


def test_a_whole_store_report_pages_its_tasks_in_tree_order(demo: Path) -> None:
    total = len(replay(demo).world.tasks)
    first = gather(demo, limit=7)
    drawn = [row.task_id for row in first.timeline.rows]
    ingests = sorted(below(replay(demo), "batch-0002")[1:])
    assert drawn == ["fragile-0001", "batch-0002", *ingests]
    assert [row.depth for row in first.timeline.rows] == [0, 0, 1, 1, 1, 1, 1]
    assert first.timeline.hidden == total - 7
    pages = -(-total // 7)
    assert str(first.page) == f"tasks 1-7 of {total} drawn (page 1 of {pages} at --limit 7)"
    assert "<code>--page 2</code> draws the next 7" in render(first)
    second = gather(demo, limit=7, page=2)
    following = [row.task_id for row in second.timeline.rows]
    assert len(following) == 7 and not set(following) & set(drawn)
    last = gather(demo, limit=7, page=pages)
    assert len(last.timeline.rows) == total - 7 * (pages - 1)
    assert "--page" not in render(last).split('id="timeline"')[1].split("</p>")[0]
    every = [
        row.task_id
        for number in range(1, pages + 1)
        for row in gather(demo, limit=7, page=number).timeline.rows
    ]
    assert sorted(every) == sorted(replay(demo).world.tasks)  # each task on one page


def test_cli_report_pages_stay_in_range(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tasktrail.replay.cli import report_command
    from tasktrail.replay.report.gather import DEFAULT_LIMIT

    assert report_command.DEFAULT_LIMIT == DEFAULT_LIMIT
    total = len(replay(demo).world.tasks)
    out = tmp_path / "r.html"
    assert main(["report", str(demo), "--out", str(out), "--page", "2"]) == 2
    said = capsys.readouterr().err
    assert f"page 2 is past the last page: {total} tasks make 1 page of" in said
    assert main(["report", str(demo), "--out", str(out), "--limit", "0"]) == 2
    assert "--limit 0" in capsys.readouterr().err
    assert main(["report", str(demo), "--out", str(out), "--page", "0"]) == 2
    assert "--page 0" in capsys.readouterr().err
    assert not out.exists()
    limit = str(total - 1)
    assert main(["report", str(demo), "--out", str(out), "--limit", limit, "--page", "2"]) == 0
    assert f"tasks {total}-{total} of {total} drawn (page 2 of 2" in capsys.readouterr().out


def test_a_store_past_the_default_limit_is_drawn_a_page_at_a_time(demo: Path) -> None:
    total = len(replay(demo).world.tasks)
    assert gather(demo).page is None  # fewer than a page: every task, no note
    data = gather(demo, limit=total // 2)
    assert data.page is not None and data.page.pages == 2 + (total % 2)
    assert len(data.timeline.rows) == total // 2
    assert gather(demo, limit=None).page is None  # no limit at all


def test_outcomes_errors_and_refusals_are_written_beside_their_marks(demo: Path) -> None:
    rows = {row.task_id: row for row in gather(demo).timeline.rows}
    ends = {
        task: next(m.note for m in row.marks if m.css == "end")
        for task, row in rows.items()
        if any(m.css == "end" for m in row.marks)
    }
    assert ends["fragile-0001"] == "completed"
    assert ends["batch-0002"] == "aborted: operator abort"
    failed = {t: n for t, n in ends.items() if n.startswith("failed")}
    assert failed and all(": " in note for note in failed.values())  # the error beside it
    inbox = rows["nightly-inbox"]
    assert any(b.note.startswith("run failed: identity_conflict") for b in inbox.bars)
    crashes = [m.note for m in rows["fragile-0001"].marks if m.css == "crash"]
    assert crashes == ["crash, restart 1", "crash, restart 2: parked"]
    page = render(gather(demo, "batch-0002"))
    assert '<span class="note-by st-aborted" data-pos=' in page
    assert ">aborted: operator abort</span>" in page


def test_the_search_finds_a_task_by_its_error(demo: Path) -> None:
    data = gather(demo)
    failed = next(t for t in data.tasks.values() if t.outcome and t.outcome.message)
    assert failed.outcome is not None and failed.outcome.message
    page = render(data)
    words = [c for c in page.split("data-search=")[1:] if c.startswith(f'"{failed.id} ')]
    assert len(words) >= 2  # its timeline row and its owner-tree row
    assert all(failed.outcome.message.lower()[:20] in chunk for chunk in words)


def test_until_shows_the_tree_as_it_was_parked_included(demo: Path) -> None:
    recoveries = [
        step.position
        for step in explain(replay(demo), "fragile-0001")
        if step.event_type == "TaskRecovered"
    ]
    data = gather(demo, "fragile-0001", until=recoveries[1], restart_limit=2)
    task = data.tasks["fragile-0001"]
    assert (task.status, task.restarts) == ("pending", 2)
    assert data.blocked == {"fragile-0001": "restart_limit"}
    assert data.state.position == recoveries[1]
    css = [mark.css for mark in data.timeline.rows[0].marks]
    assert css.count("crash") == 2 and "parked" in css and "end" not in css
    page = render(data)
    assert f"until position {recoveries[1]}" in page and "<td>restart_limit</td>" in page
    assert data.steps is not None
    moment = format_at(data.steps[-1].at)  # the same moment, as a clock time
    again = gather(demo, "fragile-0001", until=moment, restart_limit=2)
    assert again.tasks["fragile-0001"] == task and again.taken_at == data.steps[-1].at


def test_a_report_from_an_export_is_the_same(demo: Path, tmp_path: Path) -> None:
    log = tmp_path / "demo.jsonl"
    export(demo, log)
    for task_id in ("batch-0002", "crew-0001"):
        assert gather(log, task_id).steps == gather(demo, task_id).steps


@pytest.mark.postgres
def test_a_report_on_postgresql_is_the_same(demo: Path, tmp_path: Path, postgres_url: str) -> None:
    log = tmp_path / "demo.jsonl"
    export(demo, log)
    import_log(log, postgres_url)
    for task_id in ("batch-0002", "crew-0001", "nightly-inbox"):
        here, there = gather(demo, task_id), gather(postgres_url, task_id)
        assert there.steps == here.steps
        assert [r.task_id for r in there.timeline.rows] == [r.task_id for r in here.timeline.rows]
        assert "password" not in there.source


def test_a_task_awaited_outside_the_tree_is_drawn_as_context(
    scheduler: Scheduler, sqlite_url: str
) -> None:
    waiter = scheduler.submit("job", id="waiter")
    other = scheduler.submit("leaf", id="other")  # not owned: a plain `all` wait on it
    mine = scheduler.submit("leaf", owner=waiter, id="mine")
    scheduler.reserve(waiter)
    scheduler.wait(waiter, on=[other, mine], policy="all")
    scheduler.run_until_idle()
    data = gather(sqlite_url, "waiter")
    rows = {row.task_id: row for row in data.timeline.rows}
    assert set(rows) == {"waiter", "mine", "other"}
    assert rows["other"].context and not rows["mine"].context
    assert sorted(a.to_task for a in data.timeline.arrows) == ["mine", "other"]
    assert data.tree == {"waiter", "mine"} and data.verify.ok
    assert "awaited, outside the tree" in render(data)


def test_turns_runs_and_refusals_get_lanes_and_marks(demo: Path) -> None:
    crew = gather(demo, "crew-0001").timeline.rows[0]
    assert crew.lanes[0] == "task" and {"role:leader", "role:worker-1"} <= set(crew.lanes)
    turns = [bar for bar in crew.bars if bar.css == "turn"]
    assert {bar.state for bar in turns} == {"completed"} and len(turns) >= 3
    assert any(m.css == "refusal" and "refused" in m.label for m in crew.marks)
    assert any(m.css == "wakeup" for m in crew.marks)
    nightly = gather(demo, "nightly-inbox").timeline.rows[0]
    runs = [bar for bar in nightly.bars if bar.lane == "runs"]
    assert [bar.state for bar in runs] == ["failed", "failed"]
    assert any("identity_conflict" in bar.label for bar in runs)
