"""Issue 45, item 2 in Python: the frames and every read function take ``archive=DIR``
and read an archived store's segments in place: the same rows as before the archive
(without it, fewer); on both stores."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import postgres_schema
from helpers.probes import settle
from helpers.retention_world import DAY, START, opened, record

from tasktrail.domain import InMemoryExecutor, InvalidArgument, ManualClock, UnknownTask, open_store
from tasktrail.domain.retention.across import ArchiveWarning
from tasktrail.domain.runs.settings import RunSettings
from tasktrail.projections import Projector
from tasktrail.projections.trace import rebuild
from tasktrail.replay import explain, export, frames, replay, story, verify
from tasktrail.replay.report import write_report

FRAMES: dict[str, Callable[..., pd.DataFrame]] = {
    "events": frames.events,
    "audit": frames.audit,
    "live": frames.live,
    "ledger": frames.ledger,
    "tasks": frames.tasks,
    "phase_durations": frames.phase_durations,
}
KEYS = {  # what orders each frame's rows, whatever read them
    "events": ["position"],
    "audit": ["position"],
    "live": ["task_id"],
    "ledger": ["run_id"],
    "tasks": ["task_id"],
    "phase_durations": ["span_id"],
}


def _runs_over_days(s: Any, clock: ManualClock, days: int = 5) -> None:
    """A task a day with a run that ends done, then the task: the runs of the days
    older than the ledger's latest ones may be archived with their tasks."""
    executor = InMemoryExecutor()
    s.configure_runs(executor=executor, settings=RunSettings(tz="UTC"))
    for _ in range(days):
        task = s.submit("job", phase="start")
        run_id = s.mint_run(task)
        executor.finish(s.run(run_id).job_id, "completed", completed_at=clock())
        assert settle(s, run_id) == "done"
        s.reserve(task)
        s.finish(task, "completed")
        clock.advance(DAY)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A store with finished trees, runs over days and live work; every read of it
    taken before it was archived; then archived (the acts come after the last event)."""
    folder = tmp_path_factory.mktemp("archived")
    sqlite = contextlib.nullcontext(str(folder / "trail.db"))
    with postgres_schema() if request.param == "postgresql" else sqlite as url:
        clock = ManualClock(START)
        s = opened(url, clock)
        trees = record(s, clock, trees=8)
        _runs_over_days(s, clock)
        root = trees.finished[0]
        before = {name: make(url) for name, make in FRAMES.items()}
        last = int(before["events"].position.max())
        said = {
            "explain": explain(url, root),
            "story": story(url, root),
            "verify": verify(url),
            "report": write_report(url, folder / "before.html", root).steps,
            "spans": len(rebuild(url)),
            "views": _views(Projector(url, folder / "before-views.db"), last),
            "history": s.history(root),
        }
        archive = folder / "archive"
        archive.mkdir()
        report = s.archive(before=clock(), to=archive, batch=40, actor="ops", reason="a test")
        s.close()
        assert report.trees > len(trees.finished)  # the trees and the older runs' tasks
        yield {
            "url": url,
            "folder": archive,
            "root": root,
            "before": before,
            "last": last,
            "said": said,
            "tmp": folder,
        }


def _views(projector: Projector, last: int) -> dict[str, list[Any]]:
    """Every read-model table's rows, those of the events up to ``last`` (the acts an
    archive appends after it are audited too)."""
    with projector:
        projector.rebuild()
        tables = [spec.name for p in projector.projections for spec in p.tables]
        found = {}
        for table in tables:
            rows = [dict(row) for row in projector.db.table(table).rows]
            if rows and "position" in rows[0]:
                rows = [row for row in rows if row["position"] <= last]
            found[table] = sorted(rows, key=repr)
        return found


def _rows(name: str, frame: pd.DataFrame, last: int) -> pd.DataFrame:
    """A frame's rows in key order, up to ``last`` where it has positions; a missing
    text is ``None`` (pandas makes it NaN where other rows, the acts', lack the key)."""
    if "position" in frame.columns:
        frame = frame[frame.position <= last]
    frame = frame.sort_values(KEYS[name]).reset_index(drop=True)
    for column in frame.select_dtypes(include="object").columns:
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_a_frame_across_the_archive_equals_the_frame_before_it(
    world: dict[str, Any], name: str
) -> None:
    make, last = FRAMES[name], world["last"]
    before = _rows(name, world["before"][name], last)
    across = make(world["url"], archive=world["folder"])
    pd.testing.assert_frame_equal(_rows(name, across, last), before)
    alone = make(world["url"])
    if name == "live":  # an archive takes only ended trees: the live work stays in place
        pd.testing.assert_frame_equal(_rows(name, alone, last), before)
    else:
        assert 0 < len(_rows(name, alone, last)) < len(before), name


def test_a_frame_reads_an_open_store_across_and_gives_it_back_as_it_was(
    world: dict[str, Any],
) -> None:
    with open_store(world["url"], read_only=True) as store:
        across = frames.tasks(store, archive=world["folder"])
        assert store.archive is None
        alone = frames.tasks(store)
    before = _rows("tasks", world["before"]["tasks"], world["last"])
    pd.testing.assert_frame_equal(_rows("tasks", across, world["last"]), before)
    assert len(alone) < len(before)


def test_explain_and_story_across_the_archive_tell_what_they_told_before(
    world: dict[str, Any],
) -> None:
    url, folder, root, said = world["url"], world["folder"], world["root"], world["said"]
    assert explain(url, root, archive=folder) == said["explain"]
    assert story(url, root, archive=folder) == said["story"]
    with pytest.raises(UnknownTask):
        explain(url, root)
    with pytest.raises(UnknownTask):
        story(url, root)


def test_an_export_across_the_archive_holds_every_event_from_before(
    world: dict[str, Any], tmp_path: Path
) -> None:
    url, folder, last = world["url"], world["folder"], world["last"]
    whole, part = tmp_path / "whole.jsonl", tmp_path / "part.jsonl"
    assert export(url, whole, archive=folder) > export(url, part)
    before = _rows("events", world["before"]["events"], last)
    pd.testing.assert_frame_equal(_rows("events", frames.events(whole), last), before)
    assert len(_rows("events", frames.events(part), last)) < len(before)
    assert verify(whole).ok and verify(part).ok  # each export's seal is its own, whole


def test_verify_across_the_archive_checks_every_event_from_before(
    world: dict[str, Any],
) -> None:
    url, folder, before = world["url"], world["folder"], world["said"]["verify"]
    across, alone = verify(url, archive=folder), verify(url)
    assert across.ok and alone.ok, (across.violations, alone.violations)
    assert "archive" in across.checks and "archive" not in alone.checks
    acts = across.events - before.events  # what the archive appended after
    assert acts > 0 and alone.events < before.events


def test_a_report_across_the_archive_tells_the_archived_task(
    world: dict[str, Any], tmp_path: Path
) -> None:
    url, folder, root = world["url"], world["folder"], world["root"]
    data = write_report(url, tmp_path / "across.html", root, archive=folder)
    assert data.steps == world["said"]["report"]
    assert root in (tmp_path / "across.html").read_text()
    with pytest.raises(UnknownTask):
        write_report(url, tmp_path / "alone.html", root)


def test_read_models_and_traces_across_the_archive_equal_those_before(
    world: dict[str, Any], tmp_path: Path
) -> None:
    url, folder, last, said = world["url"], world["folder"], world["last"], world["said"]
    assert _views(Projector(url, tmp_path / "across.db", archive=folder), last) == said["views"]
    alone = _views(Projector(url, tmp_path / "alone.db"), last)
    assert len(alone["audit"]) < len(said["views"]["audit"])
    assert len(rebuild(url, archive=folder)) == said["spans"] > len(rebuild(url))


def test_scheduler_history_across_the_archive_is_the_history_before_it(
    world: dict[str, Any], tmp_path: Path
) -> None:
    url, folder, root, said = world["url"], world["folder"], world["root"], world["said"]
    s = opened(url, ManualClock(START))
    try:
        assert s.history(root, archive=folder) == said["history"]
        with pytest.raises(UnknownTask):
            s.history(root)  # archived: without its folder, not in the store
        with pytest.raises(UnknownTask):
            s.history("no-such-task", archive=folder)
        with pytest.raises(InvalidArgument, match="not a folder"):
            s.history(root, archive=tmp_path / "nowhere")
        damaged = tmp_path / "damaged"
        shutil.copytree(folder, damaged)
        for segment in damaged.iterdir():
            segment.unlink()
        with pytest.warns(ArchiveWarning, match="missing"), pytest.raises(UnknownTask):
            s.history(root, archive=damaged)
        assert root not in s.world.tasks  # the writer's world never held the segment's rows
    finally:
        s.close()


def test_a_failed_segment_warns_naming_it_and_is_left_out(
    world: dict[str, Any], tmp_path: Path
) -> None:
    folder = tmp_path / "damaged"
    shutil.copytree(world["folder"], folder)
    lost = sorted(folder.iterdir())[0]
    lost.unlink()
    with pytest.warns(ArchiveWarning, match=lost.name):
        across = frames.events(world["url"], archive=folder)
    assert len(across) < len(world["before"]["events"])
    views = Projector(world["url"], tmp_path / "views.db", archive=folder)
    with views, pytest.warns(ArchiveWarning, match=lost.name):
        views.rebuild()
    report = verify(world["url"], archive=folder)
    assert not report.ok
    assert [v.check for v in report.violations] == ["archive"]
    assert lost.name in str(report.violations[0]) and "missing" in str(report.violations[0])


def test_archive_without_a_store_to_read_is_refused(world: dict[str, Any], tmp_path: Path) -> None:
    url, folder, root = world["url"], world["folder"], world["root"]
    state = replay(url)
    refusals: list[Callable[[], object]] = [
        lambda: frames.audit(state, archive=folder),
        lambda: frames.tasks(state, archive=folder),
        lambda: explain(state, root, archive=folder),
        lambda: verify(state, archive=folder),
    ]
    for refused in refusals:
        with pytest.raises(InvalidArgument, match=r"archive=.*got a SchedulerState"):
            refused()
    exported = tmp_path / "log.jsonl"
    export(url, exported)
    with pytest.raises(InvalidArgument, match="is an export"):
        replay(exported, archive=folder)
    with pytest.raises(InvalidArgument, match="not a folder"):
        frames.events(url, archive=tmp_path / "nowhere")
    with pytest.raises(InvalidArgument, match="not a folder"):
        Projector(url, tmp_path / "views.db", archive=tmp_path / "nowhere")
