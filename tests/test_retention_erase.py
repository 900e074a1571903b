"""Issue 45, item 7: erasure that keeps the proof, on both stores. An erased tree
verifies (its events said erased, never edited), replays and exports with no erased
value left in the store's file or its read models; a live tree is refused (rule 37)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import run
from helpers.retention_world import opened, record

from tasktrail.domain import ManualClock, RuleViolation, open_store
from tasktrail.domain.commands.sealing import take_seal
from tasktrail.domain.store.gaps import history_acts
from tasktrail.replay import export, replay, verify

SECRET = b"s3cret"


def erased_world(url: str, clock: ManualClock, tmp_path: Path) -> dict[str, object]:
    s = opened(url, clock)
    trees = record(s, clock, trees=4)
    seals = tmp_path / "seals.jsonl"
    seals.write_text(take_seal(s.store).to_json() + "\n")
    root = trees.finished[1]
    done = s.erase(trees.children[root][0], actor="dpo", reason="request 42")
    s.close()
    return {"trees": trees, "root": root, "done": done, "seals": seals}


def test_rule_37_a_live_tree_is_refused_and_nothing_appended(
    store_url: str, clock: ManualClock
) -> None:
    s = opened(store_url, clock)
    trees = record(s, clock, trees=2)
    head = s.store.head()
    for task in (trees.live[0], trees.waiting[0], trees.waiting[1]):
        with pytest.raises(RuleViolation) as refused:
            s.erase(task, actor="dpo", reason="too soon")
        assert refused.value.rule == 37 and task in str(refused.value)
    assert s.store.head() == head
    s.close()


def test_an_erased_tree_verifies_and_says_erased(
    store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    made = erased_world(store_url, clock, tmp_path)
    done, root = made["done"], made["root"]
    assert done.tree == root and done.events >= 6
    report = verify(store_url, seals=made["seals"])
    assert report.ok, report.violations
    assert any("erased, not edited" in note and "dpo" in note for note in report.notes)
    state = replay(store_url, snapshots=False)
    task = state.tasks[root]
    assert task.status == "terminal" and task.outcome.result is None
    assert not task.memos
    kept = made["trees"].finished[0]  # another tree keeps its values
    assert state.tasks[kept].outcome.result == {"answer": "s3cret-result-0"}


def test_no_erased_value_is_left_in_the_store_file_exports_or_read_models(
    sqlite_url: str, clock: ManualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = opened(sqlite_url, clock)
    record(s, clock, trees=1, secret="f0rget")  # one tree only: every value of it goes
    views = tmp_path / "views.db"
    assert run(["project", sqlite_url, "--out", str(views)], capsys).code == 0
    assert b"f0rget" in views.read_bytes()
    root = replay(sqlite_url, snapshots=False)
    tree = [t for t, task in root.tasks.items() if task.owner_id is None and not task.live]
    s.erase(tree[0], actor="dpo", reason="request 7")
    s.close()
    files = [Path(sqlite_url), *Path(sqlite_url).parent.glob(Path(sqlite_url).name + "-*")]
    assert all(b"f0rget" not in path.read_bytes() for path in files if path.exists())
    out = tmp_path / "after.jsonl"
    export(sqlite_url, out)
    assert b"f0rget" not in out.read_bytes()
    assert run(["project", sqlite_url, "--out", str(views)], capsys).code == 0
    assert b"f0rget" not in views.read_bytes()
    assert verify(out).ok


def test_history_explain_and_the_audit_show_the_erasure(
    store_url: str, clock: ManualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = erased_world(store_url, clock, tmp_path)
    root = made["root"]
    shown = run(["history", store_url, root], capsys)
    assert shown.code == 0 and "TaskErased" in shown.out and "dpo" in shown.out
    told = run(["explain", store_url, root, "--json"], capsys)
    assert told.code == 0 and "erase" in told.out
    audit = replay(store_url, snapshots=False).audit
    rows = [r for r in audit if r["event_type"] == "TaskErased" and r["task_id"] == root]
    assert rows and rows[0]["actor"] == "dpo" and rows[0]["reason"] == "request 42"


def test_an_erased_row_edited_afterwards_is_a_finding(
    sqlite_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    import sqlite3

    made = erased_world(sqlite_url, clock, tmp_path)
    with open_store(sqlite_url, read_only=True) as store:
        act = next(a for a in history_acts(store) if a.topic.endswith("HistoryErased"))
    position = act.payload["entries"][0][0]
    db = sqlite3.connect(sqlite_url)
    state = db.execute("SELECT state FROM stored_events WHERE rowid = ?", (position,)).fetchone()[0]
    db.execute(
        "UPDATE stored_events SET state = ? WHERE rowid = ?",
        (state.replace(b'"at":', b'"at":1', 1), position),
    )
    db.commit()
    db.close()
    report = verify(sqlite_url, seals=made["seals"])
    assert not report.ok
    assert any(position in v.positions for v in report.violations)


def test_an_archive_made_before_an_erasure_holds_values_erased_since(
    store_url: str, clock: ManualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    import zstandard

    s = opened(store_url, clock)
    trees = record(s, clock, trees=3)
    folder, backup = tmp_path / "archive", tmp_path / "backup"
    folder.mkdir()
    report = s.archive(before=clock(), to=folder)
    shutil.copytree(folder, backup)  # a copy made before the erasure
    s.erase(trees.finished[0], actor="dpo", reason="request 9", archive=folder)
    s.close()
    segment = report.acts[0].segment
    for kept, secret in ((folder, False), (backup, True)):
        with open(kept / segment, "rb") as compressed:
            raw = zstandard.ZstdDecompressor().stream_reader(compressed).read()
        assert (b"s3cret-result-0" in raw) is secret
        assert b"s3cret-result-1" in raw  # the other trees keep theirs
    good = run(["verify", store_url, "--archive", str(folder)], capsys)
    assert good.code == 0, good.out + good.err
    assert "erased, not edited" in good.out
    old = run(["verify", store_url, "--archive", str(backup)], capsys)
    assert old.code == 1 and segment in old.err and "erased since" in old.err
    assert replay(store_url, archive=folder).tasks[trees.finished[0]].outcome.result is None
    # A read across the copy made before serves none of the values the erasure took
    # (found in this session: it served them, naming the copy), nor does history.
    erased = trees.finished[0]
    with pytest.warns(Warning, match="erased since"):
        across_old = replay(store_url, archive=backup)
    assert across_old.tasks[erased].outcome.result is None
    assert across_old.tasks[trees.finished[1]].outcome.result is not None
    shown = run(["history", store_url, erased, "--json", "--archive", str(backup)], capsys)
    assert "s3cret-result-0" not in shown.out and "s3cret" not in shown.out.replace(
        "s3cret-result-1", ""
    ), shown.out


def test_a_reader_of_a_copy_made_before_an_erasure_reads_it_again_once_rewritten(
    store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """A long-lived reader (the console) may read a segment between an erasure's act and
    its rewrite of that segment: it serves the rows as erased and names the copy, then,
    the file rewritten, reads it again and names nothing."""
    import shutil

    from tasktrail.domain import open_store
    from tasktrail.domain.retention.across import ArchiveView

    s = opened(store_url, clock)
    trees = record(s, clock, trees=2)
    folder, before = tmp_path / "archive", tmp_path / "before"
    folder.mkdir()
    report = s.archive(before=clock(), to=folder)
    shutil.copytree(folder, before)
    erased = trees.finished[0]
    s.erase(erased, actor="dpo", reason="request 9", archive=folder)
    s.close()
    segment = str(report.acts[0].segment)
    rewritten = (folder / segment).read_bytes()
    shutil.copy(before / segment, folder / segment)  # as between the act and the rewrite
    with open_store(store_url, read_only=True) as store:
        store.archive = view = ArchiveView(store, folder)
        kept = [r.event for r in store.stream_records(erased)]
        assert all("s3cret" not in repr(event) for event in kept)
        assert [f.segment for f in view.findings] == [segment]
        (folder / segment).write_bytes(rewritten)  # the erasure's rewrite lands
        again = [r.event for r in store.stream_records(erased)]
        assert again == kept and view.findings == []


def test_an_erasure_drops_the_snapshots_that_hold_the_tree_on_both_stores(
    store_url: str, clock: ManualClock
) -> None:
    """Found reading the act's two transactions side by side: PostgreSQL's dropped the
    snapshots taken while the erased tree was live, SQLite's did not, so the values
    stayed in the file's snapshot table. One piece of code now does it for both."""
    from tasktrail.domain import open_store
    from tasktrail.domain.history.table import SnapshotTable

    s = opened(store_url, clock)
    root = s.submit("job", phase="start", memos={"who": "f0rget-1"})
    s.reserve(root)
    s.submit("job", phase="start")  # live: the snapshots keep a world, not an empty one
    during = s.snapshot()  # the tree live: the snapshot holds its values
    s.finish(root, "completed", result={"answer": "f0rget-2"})
    clock.advance(1_000)
    s.snapshot()
    s.erase(root, actor="dpo", reason="request 3")
    with open_store(store_url, read_only=True) as store:  # before a close's own snapshot
        table = SnapshotTable(store)
        assert during not in table.positions()
        assert all(b"f0rget" not in bytes(table.at(p).body) for p in table.positions())
    s.close()
    if "://" not in store_url:
        assert b"f0rget" not in Path(store_url).read_bytes()
