"""Datasette reads a store and its read models as a person wants them (issue 18).

- the default read-model file has one dot (``STORE-views.db``), so Datasette serves it
  at ``/STORE-views``; a file of the earlier name ``STORE.views.db`` stays in use;
- the store holds an ``event_log`` view (position, stream, version, type, ISO time, the
  event as JSON text), created by writers, never by read commands;
- every millisecond time of a read model has an ISO-8601 text column beside it;
- the shipped metadata's canned queries answer through a real Datasette server.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tasktrail.domain import ManualClock, Scheduler, open_store
from tasktrail.domain.demo.workload import run_demo
from tasktrail.domain.store.event_view import EVENT_VIEW, ensure_event_view
from tasktrail.domain.tasks.describe import format_at
from tasktrail.projections import (
    METADATA_FILE,
    Projector,
    datasette_metadata,
    default_out,
    default_projections,
)
from tasktrail.replay import export, import_log, replay
from tasktrail.replay.cli import main


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo store, under the demo's own file name, and its read models."""
    store = tmp_path_factory.mktemp("datasette") / "tasktrail-demo.db"
    run_demo(store, 60, log=lambda _: None)
    views = default_out(store)
    with Projector(store, views) as projector:
        projector.catch_up()
    return store, views


def _has_view(path: Path) -> bool:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'view' AND name = ?", (EVENT_VIEW,)
        ).fetchone()
    return bool(row[0])


# ─── the read-model file's name ──────────────────────────────────────────────


def test_default_read_model_file_has_a_single_dot(tmp_path: Path) -> None:
    assert default_out(tmp_path / "trail.db") == tmp_path / "trail-views.db"
    assert default_out("postgresql://u@h/db?schema=s") == Path("tasktrail-views.db")


def test_a_read_model_file_of_the_old_name_is_kept_with_a_note(
    tmp_path: Path, registry: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "trail.db"
    s = Scheduler.open(store, clock=ManualClock(0), registry=registry)
    s.submit("leaf")
    s.close()
    legacy = tmp_path / "trail.views.db"
    with Projector(store, legacy) as projector:
        projector.catch_up()
    s = Scheduler.open(store, clock=ManualClock(0), registry=registry)
    s.submit("leaf")
    s.close()
    assert default_out(store) == legacy
    assert main(["project", str(store), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "note:" in captured.err and "trail-views.db" in captured.err
    assert not (tmp_path / "trail-views.db").exists()  # nothing the user did not ask for
    with sqlite3.connect(legacy) as conn:  # the old file caught up
        assert (
            conn.execute("SELECT max(position) FROM audit").fetchone()[0]
            == open_store(store).head()
        )
    # Once the new name is there, it is the one in use.
    (tmp_path / "trail-views.db").write_bytes(legacy.read_bytes())
    assert default_out(store) == tmp_path / "trail-views.db"


# ─── the event_log view of the store ─────────────────────────────────────────


def _check_event_log(rows: list[tuple[Any, ...]], location: str) -> None:
    with open_store(location) as store:
        stored = list(store.rows())
    assert len(rows) == len(stored) > 0
    for (position, stream, version, kind, at, event), row in zip(rows, stored, strict=True):
        assert (position, stream, version) == row[:3]
        assert kind == row[3].removeprefix("tasktrail.")
        assert event == bytes(row[4]).decode()
        assert at == format_at(json.loads(event)["at"])


def test_event_log_view_shows_position_stream_version_type_iso_time_and_json(
    store_url: str, registry: Any
) -> None:
    s = Scheduler.open(store_url, clock=ManualClock(1_767_603_600_123), registry=registry)
    s.submit("job", id="a")
    s.run_until_idle()
    s.close()
    if store_url.startswith("postgresql://"):
        import psycopg

        dsn, schema = store_url.split("?schema=")
        with psycopg.connect(dsn) as conn:
            rows = conn.execute(f'SELECT * FROM "{schema}".{EVENT_VIEW} ORDER BY position')
            found = [tuple(r) for r in rows]
    else:
        with sqlite3.connect(store_url) as conn:
            found = conn.execute(f"SELECT * FROM {EVENT_VIEW} ORDER BY position").fetchall()
    _check_event_log(found, store_url)
    assert found[0][4] == "2026-01-05T09:00:00.123Z"


def test_read_commands_never_create_the_view(
    tmp_path: Path, registry: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "trail.db"
    s = Scheduler.open(store, clock=ManualClock(0), registry=registry)
    s.submit("job", id="a")
    s.close()
    with sqlite3.connect(store) as conn:  # a store an earlier release wrote: no view
        conn.execute(f"DROP VIEW {EVENT_VIEW}")
    assert not _has_view(store)
    for argv in (
        ["tasks", str(store)],
        ["history", str(store), "a"],
        ["replay", str(store)],
        ["verify", str(store)],
        ["explain", str(store), "a"],
        ["export", str(store), str(tmp_path / "out.jsonl")],
        ["trace", str(store), "a", "--out", str(tmp_path / "trace.json")],
    ):
        main(argv)
        assert not _has_view(store), argv
    capsys.readouterr()
    # A writer's open creates it; so does importing into a new store.
    Scheduler.open(store, clock=ManualClock(0), registry=registry).close()
    assert _has_view(store)
    imported = tmp_path / "imported.db"
    import_log(tmp_path / "out.jsonl", imported)
    assert _has_view(imported)


def test_a_store_opened_read_only_opens_without_the_view(tmp_path: Path, registry: Any) -> None:
    store = tmp_path / "trail.db"
    s = Scheduler.open(store, clock=ManualClock(0), registry=registry)
    s.submit("job", id="a")
    s.close()
    with sqlite3.connect(store) as conn:
        conn.execute(f"DROP VIEW {EVENT_VIEW}")
    before = store.read_bytes()
    # SQLite's own read-only mode (root ignores file permissions; this it cannot).
    s = Scheduler.open(f"file:{store}?mode=ro", clock=ManualClock(0), registry=registry)
    assert s.task("a").status == "pending"
    assert ensure_event_view(s.store) is False
    s.store.close()
    assert not _has_view(store)
    assert store.read_bytes() == before


# ─── ISO-8601 text beside the ms times ───────────────────────────────────────


def test_every_ms_time_of_a_read_model_has_an_iso_text_column(demo: tuple[Path, Path]) -> None:
    _, views = demo
    checked = 0
    with sqlite3.connect(views) as conn:
        conn.row_factory = sqlite3.Row
        for projection in default_projections():
            for spec in projection.tables:
                for column in spec.times:
                    rows = conn.execute(
                        f"SELECT [{column}] AS ms, [{column}_iso] AS iso FROM [{spec.name}]"
                    ).fetchall()
                    for row in rows:
                        expected = None if row["ms"] is None else format_at(row["ms"])
                        assert row["iso"] == expected, (spec.name, column)
                        checked += row["ms"] is not None
                # Every time column (named *_at, until, or a deadline) is covered.
                assert {
                    c
                    for c, kind in spec.columns.items()
                    if kind is float
                    and (c.endswith(("_at", "_deadline")) or c in {"at", "until", "scheduled_for"})
                } == set(spec.times), spec.name
    assert checked > 100


def test_a_read_model_file_of_an_earlier_release_gains_the_iso_columns(
    tmp_path: Path, registry: Any
) -> None:
    store = tmp_path / "trail.db"
    s = Scheduler.open(store, clock=ManualClock(5_000), registry=registry)
    s.submit("job", id="a")
    s.close()
    views = tmp_path / "trail-views.db"
    with sqlite3.connect(views) as conn:  # the audit table as an earlier release created it
        conn.execute(
            "CREATE TABLE audit (position INTEGER PRIMARY KEY, at FLOAT, task_id TEXT, "
            "stream_id TEXT, event_type TEXT, status_before TEXT, status_after TEXT, "
            "command TEXT, rule INTEGER, refused INTEGER, detail TEXT)"
        )
    with Projector(store, views) as projector:
        projector.catch_up()
    with sqlite3.connect(views) as conn:
        assert conn.execute("SELECT at_iso FROM audit").fetchall() == [
            ("1970-01-01T00:00:05.000Z",)
        ]


# ─── the shipped metadata, through a real Datasette ──────────────────────────


def test_shipped_metadata_names_other_files(tmp_path: Path) -> None:
    metadata = datasette_metadata(tmp_path / "trail-views.db", tmp_path / "trail.db")
    assert set(metadata["databases"]) == {"trail-views", "trail"}
    assert set(metadata["databases"]["trail-views"]["queries"]) == {
        "task_trail",
        "running_at",
        "runs_of_day",
        "acts",
    }
    assert json.loads(METADATA_FILE.read_text())["databases"]["tasktrail-demo-views"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def datasette(demo: tuple[Path, Path]) -> Iterator[str]:
    """A Datasette server on 127.0.0.1 serving the demo store and its read models with
    the shipped metadata; stopped (killed if need be) afterwards."""
    store, views = demo
    port = _free_port()
    command = [sys.executable, "-m", "datasette", "serve", str(store), str(views)]
    command += ["--metadata", str(METADATA_FILE), "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/-/versions.json", timeout=2):
                    break
            except OSError:
                if process.poll() is not None:
                    output = process.stdout.read().decode() if process.stdout else ""
                    pytest.fail(f"datasette exited with {process.returncode}: {output}")
                if time.monotonic() > deadline:
                    pytest.fail("datasette did not answer within 60 s")
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _get(url: str, **params: str) -> Any:
    query = urllib.parse.urlencode({**params, "_shape": "array"})
    with urllib.request.urlopen(f"{url}?{query}", timeout=30) as response:
        assert response.status == 200
        return json.loads(response.read())


def test_datasette_serves_the_read_models_at_a_plain_url(datasette: str) -> None:
    with urllib.request.urlopen(f"{datasette}/tasktrail-demo-views.json", timeout=30) as response:
        tables = {t["name"] for t in json.loads(response.read())["tables"]}
    assert {"audit", "live_tasks", "runs", "day_counters"} <= tables
    audit = _get(f"{datasette}/tasktrail-demo-views/audit.json", _size="1")
    assert audit[0]["at_iso"] == format_at(audit[0]["at"])


def test_canned_query_one_tasks_trail(datasette: str, demo: tuple[Path, Path]) -> None:
    store, _ = demo
    rows = _get(f"{datasette}/tasktrail-demo-views/task_trail.json", task_id="fragile-0001")
    with open_store(store) as opened:
        expected = [r.position for r in opened.read() if r.event.task_id == "fragile-0001"]
    assert [row["position"] for row in rows] == expected
    assert rows[0]["event_type"] == "TaskSubmitted" and rows[0]["at"].endswith("Z")
    assert "TaskRecovered" in {row["event_type"] for row in rows}


def test_canned_query_what_was_running_at_a_time(datasette: str, demo: tuple[Path, Path]) -> None:
    store, _ = demo
    with open_store(store) as opened:
        recovered = next(
            r.event.at for r in opened.read() if type(r.event).__name__ == "TaskRecovered"
        )
        moments = sorted({r.event.at for r in opened.read()})
    # Just before the crash's recovery, and a few other moments of the demo.
    for at in [recovered - 1, *moments[:: max(1, len(moments) // 25)]]:
        rows = _get(f"{datasette}/tasktrail-demo-views/running_at.json", at=format_at(at))
        state = replay(store, until=format_at(at))
        running = sorted(t for t, task in state.tasks.items() if task.status == "running")
        assert sorted(row["task_id"] for row in rows) == running, format_at(at)
        for row in rows:
            assert row["reserved_at"] <= format_at(at)
            assert row["kind"] == state.tasks[row["task_id"]].kind
    assert _get(f"{datasette}/tasktrail-demo-views/running_at.json", at=format_at(recovered - 1)), (
        "the crashed task was running just before its recovery"
    )


def test_canned_query_runs_of_a_day(datasette: str, demo: tuple[Path, Path]) -> None:
    store, _ = demo
    ledger = replay(store).ledger
    days = {row["day"] for row in ledger}
    assert days
    for day in days:
        rows = _get(f"{datasette}/tasktrail-demo-views/runs_of_day.json", day=day)
        assert sorted(r["run_id"] for r in rows) == sorted(
            r["run_id"] for r in ledger if r["day"] == day
        )
        assert all(r["fired_at"] is None or r["fired_at"].endswith("Z") for r in rows)
    assert _get(f"{datasette}/tasktrail-demo-views/runs_of_day.json", day="1999-01-01") == []


def test_canned_query_one_streams_events_from_the_store(
    datasette: str, demo: tuple[Path, Path]
) -> None:
    store, _ = demo
    rows = _get(f"{datasette}/tasktrail-demo/stream_events.json", stream="fragile-0001")
    with open_store(store) as opened:
        assert len(rows) == len(opened.stream("fragile-0001"))
    assert [r["version"] for r in rows] == list(range(1, len(rows) + 1))
    log = _get(f"{datasette}/tasktrail-demo/event_log.json", _size="3")
    assert [r["position"] for r in log] == [1, 2, 3]


def test_export_of_a_store_with_the_view_is_unchanged(demo: tuple[Path, Path], tmp_path: Path):
    store, _ = demo
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    export(store, first)
    import_log(first, tmp_path / "copy.db")
    export(tmp_path / "copy.db", second)
    assert first.read_bytes() == second.read_bytes()
