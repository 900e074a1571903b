"""``tasktrail serve STORE --archive DIR`` (issues 45 and 46): the console reads a store's
archived history as if it were still in place. An archived task's page and ``/api/``
show its history, the list and its search find it among the finished tasks, a tree
archived while the console serves still reads whole; without ``--archive`` every page
says which archived ranges it skips; a segment that fails its check is a finding on
the page, never a crash; what the log holds stays escaped. On both stores."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.cli import run
from helpers.console_server import TIMEOUT_S, head, in_process
from helpers.retention_world import Trees, opened, record

from tasktrail.domain import ManualClock

HOSTILE = "<img src=x onerror=alert(1)>"
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"


@pytest.fixture
def archived(store_url: str, clock: ManualClock, tmp_path: Path) -> dict[str, Any]:
    """A store of finished trees (their values hostile HTML) and live work, the finished
    trees archived to several segments."""
    s = opened(store_url, clock)
    trees = record(s, clock, trees=6, secret=HOSTILE)
    folder = tmp_path / "archive"
    folder.mkdir()
    report = s.archive(before=clock(), to=folder, batch=40, actor="ops", reason="a test")
    s.close()
    assert len(report.acts) > 1
    return {"url": store_url, "trees": trees, "folder": folder, "report": report}


def listed(http: httpx.Client, **query: str) -> list[str]:
    found = http.get("/api/tasks", params={**query, "per_page": "500"}).json()["tasks"]
    return sorted(task["id"] for task in found)


def test_an_archived_task_reads_as_if_in_place(archived: dict[str, Any]) -> None:
    trees: Trees = archived["trees"]
    root = trees.finished[0]
    kids = trees.children[root]
    with (
        in_process(archived["url"], archive=archived["folder"]) as url,
        httpx.Client(base_url=url) as http,
    ):
        task = http.get(f"/api/tasks/{root}").json()
        assert (task["status"], task["outcome"]["status"]) == ("terminal", "completed")
        assert [child["id"] for child in task["children"]] == kids
        history = http.get(f"/api/tasks/{root}/history").json()["events"]
        kinds = [event["event_type"] for event in history]
        assert kinds[0] == "TaskSubmitted" and kinds[-1] == "TaskEnded"
        assert "MessageSent" in kinds and "MemoRecorded" in kinds
        ended = history[-1]["fields"]
        assert ended["result"] == {"answer": f"{HOSTILE}-result-0"}
        assert http.get(f"/api/tasks/{kids[0]}").json()["owners"] == [root]
        # The list finds archived tasks where it lists finished ones, and so does search.
        finished = listed(http, status="terminal")
        assert set(trees.finished) | {kid for k in trees.children.values() for kid in k} <= set(
            finished
        )
        assert listed(http, q=root) == [root]
        page = http.get(f"/tasks/{root}")
        assert page.status_code == 200
        assert 'class="tl"' in page.text  # the report's timeline of the archived tree
        assert f'href="/tasks/{kids[0]}"' in page.text
        assert "TaskEnded" in page.text
        assert f"{ESCAPED}-result-0" in page.text and "<img" not in page.text
        status = http.get("/api/status").json()
        assert status["archive"]["folder"] == str(archived["folder"])
        assert status["archive"]["findings"] == [] and status["archive"]["skipped"] is None
        assert "skipped archived ranges" not in http.get("/").text.lower()


def test_without_the_archive_every_page_says_what_it_skips(archived: dict[str, Any]) -> None:
    trees: Trees = archived["trees"]
    with in_process(archived["url"]) as url, httpx.Client(base_url=url) as http:
        assert http.get(f"/api/tasks/{trees.finished[0]}").status_code == 404
        assert not set(trees.finished) & set(listed(http))
        skipped = http.get("/api/status").json()["archive"]["skipped"]
        first = archived["report"].acts[0].first
        assert skipped.startswith(f"skipped archived ranges: positions {first}-")
        assert "serve with --archive DIR to read them" in skipped
        for path in ("/", f"/tasks/{trees.live[0]}"):
            page = http.get(path).text
            assert f"Skipped archived ranges: positions {first}-" in page, path


def test_a_missing_segment_is_a_finding_and_the_rest_reads(archived: dict[str, Any]) -> None:
    trees: Trees = archived["trees"]
    acts = archived["report"].acts
    gone, kept = acts[0], acts[-1]
    (archived["folder"] / gone.segment).unlink()
    with (
        in_process(archived["url"], archive=archived["folder"]) as url,
        httpx.Client(base_url=url) as http,
    ):
        found = http.get("/api/status").json()["archive"]["findings"]
        assert len(found) == 1 and gone.segment in found[0] and "missing from" in found[0]
        for path in ("/", f"/tasks/{trees.live[0]}"):
            page = http.get(path)
            assert page.status_code == 200
            assert f"archive segment {gone.segment}" in page.text and "missing from" in page.text
        lost = next(root for root in trees.finished if root in gone.trees)
        assert http.get(f"/api/tasks/{lost}").status_code == 404
        there = next(root for root in trees.finished if root in kept.trees)
        events = http.get(f"/api/tasks/{there}/history").json()["events"]
        assert events[0]["event_type"] == "TaskSubmitted"


def test_a_tree_archived_while_it_serves_still_reads_whole(
    store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    s = opened(store_url, clock)
    trees = record(s, clock, trees=3)
    s.close()
    folder = tmp_path / "archive"
    folder.mkdir()
    root = trees.finished[0]
    with (
        in_process(store_url, archive=folder) as url,
        httpx.Client(base_url=url) as http,
    ):
        before = http.get(f"/api/tasks/{root}/history").json()["events"]
        s = opened(store_url, clock)
        assert s.archive(before=clock(), to=folder, actor="ops").trees == len(trees.finished)
        s.close()
        last = head(store_url)
        deadline = time.monotonic() + TIMEOUT_S
        while http.get("/api/status").json()["position"] < last:
            assert time.monotonic() < deadline, "the console did not read the archive act"
            time.sleep(0.05)
        after = http.get(f"/api/tasks/{root}/history").json()["events"]
        assert [e["position"] for e in after] == [e["position"] for e in before]
        assert http.get("/api/status").json()["archive"]["findings"] == []


def test_serve_documents_and_checks_the_archive_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        run(["serve", "--help"], capsys)
    said = " ".join(capsys.readouterr().out.split())
    assert "--archive DIR" in said and "archive folder" in said
    location = str(tmp_path / "trail.db")
    opened(location, ManualClock(0)).close()
    ran = run(["serve", location, "--port", "0", "--archive", str(tmp_path / "nope")], capsys)
    assert ran.code == 2 and "--archive" in ran.err and "not a folder" in ran.err


def test_a_renewed_view_checks_only_the_segments_it_had_not(
    store_url: str, clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console renews its view at each archive act (a worker's keeper makes many
    small ones): the segments it found good under the same acts are not read again."""
    from tasktrail.domain import open_store
    from tasktrail.domain.retention import across
    from tasktrail.domain.retention.segments import read_segment

    folder = tmp_path / "archive"
    folder.mkdir()
    s = opened(store_url, clock)
    record(s, clock, trees=3)
    first = s.archive(before=clock(), to=folder, batch=40)
    s.close()
    with open_store(store_url, read_only=True) as store:
        store.archive = across.ArchiveView(store, folder)
        list(store.read())
        s = opened(store_url, clock)
        record(s, clock, trees=3)
        second = s.archive(before=clock(), to=folder, batch=40)
        s.close()
        opened_segments: list[str] = []

        def counted(path: Path) -> Any:
            opened_segments.append(path.name)
            return read_segment(path)

        monkeypatch.setattr(across, "read_segment", counted)
        store.archive = store.archive.renewed(store)
        renewed = [(r.position, r.originator_version) for r in store.read()]
        assert sorted(opened_segments) == sorted(str(act.segment) for act in second.acts)
        store.archive = across.ArchiveView(store, folder)
        assert renewed == [(r.position, r.originator_version) for r in store.read()]
        assert len(opened_segments) == len(first.acts) + 2 * len(second.acts)
        assert store.archive.findings == []


def test_an_archived_tree_erased_while_it_serves_shows_no_value(archived: dict[str, Any]) -> None:
    """An erasure rewrites the segments that hold the tree: the console reads them again
    (never the copy it checked before), so the page shows the erased events."""
    trees: Trees = archived["trees"]
    root = trees.finished[0]
    with (
        in_process(archived["url"], archive=archived["folder"]) as url,
        httpx.Client(base_url=url) as http,
    ):
        assert f"{HOSTILE}-result-0" in http.get(f"/api/tasks/{root}/history").text
        s = opened(archived["url"], ManualClock(0))
        s.erase(root, actor="dpo", reason="request 9", archive=archived["folder"])
        s.close()
        last = head(archived["url"])
        deadline = time.monotonic() + TIMEOUT_S
        while http.get("/api/status").json()["position"] < last:
            assert time.monotonic() < deadline, "the console did not read the erasure"
            time.sleep(0.05)
        history = http.get(f"/api/tasks/{root}/history")
        assert history.json()["events"][0]["event_type"] == "TaskSubmitted"
        assert "-result-0" not in history.text and "-memo-0" not in history.text
        assert http.get("/api/status").json()["archive"]["findings"] == []


def test_serve_says_at_its_start_how_it_reads_the_archive(
    sqlite_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    from helpers.console_server import as_process

    s = opened(sqlite_url, clock)
    record(s, clock, trees=2)
    folder = tmp_path / "archive"
    folder.mkdir()
    s.archive(before=clock(), to=folder)
    s.close()
    with as_process(sqlite_url) as served:
        said = "\n".join(served.lines)
        assert "  note: skipped archived ranges: positions " in said
        assert "serve with --archive DIR to read them" in said
    with as_process(sqlite_url, "--archive", str(folder)) as served:
        said = "\n".join(served.lines)
        assert f"  archive: read across {folder}, each segment checked" in said
        assert "skipped archived ranges" not in said
