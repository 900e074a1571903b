"""Issue 30, item 4: an import is all or nothing, and checked like writes.

An import killed (SIGKILL of the ``tasktrail import`` process) at several points, or
failing on a full disk (a small tmpfs when this runs as root and may mount one; a
fault injected into the writes as well), leaves no store at the target: a second
import then succeeds. An export holding what a writer refuses (a 1M-character
phase, a NUL in a kind, a 1 MB memo) or a digest that does not match is refused
(exit 2, naming the line) and leaves no file.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from eventsourcing.persistence import OperationalError

from tasktrail.domain import ManualClock, Registry, Scheduler, StoreError, open_store
from tasktrail.domain.store.chain import digest
from tasktrail.replay import LogError, export, import_log, verify
from tasktrail.replay.cli import main


@pytest.fixture
def exported(tmp_path: Path, registry: Registry) -> tuple[Path, int]:
    """An export of a store of 400 tasks, each submitted, reserved, given a memo and a
    checkpoint (2,000 events, with the run of each phase), with one of each event a
    writer limit applies to."""
    store = tmp_path / "source.db"
    s = Scheduler.open(store, clock=ManualClock(1_000), registry=registry)
    with s.batch():
        ids = [s.submit("job", phase="start") for _ in range(400)]
    for task_id in ids:
        s.reserve(task_id)
        s.memo(task_id, "note", {"seen": task_id})
        s.checkpoint(task_id, "end")
    s.close()
    out = tmp_path / "source.jsonl"
    return out, export(store, out)


def _rechained(lines: list[bytes], edit: Callable[[dict[str, Any]], bool]) -> list[bytes]:
    """The export's event lines with the first line ``edit`` changes changed, every digest
    of the chain recomputed (as someone who knows the unkeyed scheme would), and no
    heads line: only the writers' limits stand in the way."""
    out: list[bytes] = []
    previous: dict[str, str] = {}
    edited = False
    for raw in lines:
        row = orjson.loads(raw)
        if "heads" in row or "seal" in row:
            continue
        payload = row["payload"]
        payload.pop("digest", None)
        if not edited:
            edited = edit(row)
        stream = row["originator_id"]
        body = orjson.dumps(payload)
        value = digest(
            previous.get(stream, ""), stream, row["originator_version"], row["topic"], body
        )
        previous[stream] = value
        payload["digest"] = value
        out.append(orjson.dumps(row) + b"\n")
    assert edited
    return out


def _setting(topic: str, field: str, value: Any) -> Callable[[dict[str, Any]], bool]:
    def edit(row: dict[str, Any]) -> bool:
        if row["topic"] != f"tasktrail.{topic}":
            return False
        row["payload"][field] = value
        return True

    return edit


LIMITS = {
    "a 1M-character phase": (_setting("CheckpointCommitted", "phase", "p" * 1_000_000), "phase"),
    "a NUL in a kind": (_setting("TaskSubmitted", "kind", "jo\x00b"), "NUL"),
    "a 1 MB memo": (_setting("MemoRecorded", "value", {"blob": "x" * 1_000_000}), "limit is"),
    "a 1 MB memo string": (_setting("MemoRecorded", "value", "x" * 1_000_000), "limit is"),
}


@pytest.mark.parametrize("case", list(LIMITS))
def test_an_import_is_refused_for_each_writer_limit_and_leaves_no_file(
    exported: tuple[Path, int], tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source, _ = exported
    edit, said = LIMITS[case]
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(b"".join(_rechained(source.read_bytes().splitlines(True), edit)))
    target = tmp_path / "target.db"
    assert main(["import", str(forged), str(target)]) == 2
    err = capsys.readouterr().err
    assert "a writer refuses this event" in err and said in err and f"{forged}:" in err, err
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "forged.jsonl",
        "source.db",
        "source.jsonl",
    ]


def test_an_import_with_a_broken_digest_is_refused_naming_its_line(
    exported: tuple[Path, int], tmp_path: Path
) -> None:
    source, _ = exported
    lines = source.read_bytes().splitlines(True)
    lines[5] = lines[5].replace(b'"phase":"start"', b'"phase":"other"', 1)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(lines))
    target = tmp_path / "target.db"
    with pytest.raises(LogError, match=r":6: .*does not match its digest"):
        import_log(broken, target)
    assert not target.exists()
    # Digests good, but the heads line says more than the events do: cut short.
    cut = tmp_path / "cut.jsonl"
    heads = next(line for line in lines if line.startswith(b'{"heads"'))
    cut.write_bytes(b"".join(lines[:3]) + heads)
    with pytest.raises(LogError, match="cut short"):
        import_log(cut, target)
    assert not target.exists()


def test_a_good_import_is_whole_and_verifies(exported: tuple[Path, int], tmp_path: Path) -> None:
    source, count = exported
    target = tmp_path / "target.db"
    assert import_log(source, target) == count
    with open_store(target, read_only=True) as store:
        assert store.head() == count
    assert verify(target).ok
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ─── killed ──────────────────────────────────────────────────────────────────

KILLERS = {
    # While every line is checked, before anything is written.
    "checking": """
        from tasktrail.replay import log
        checked = log.LogReader._checked
        def _checked(self, raw, number, *a):
            if number == 700: kill()
            return checked(self, raw, number, *a)
        log.LogReader._checked = _checked
    """,
    # Inside the one transaction, half the rows inserted.
    "inserting": """
        from tasktrail.domain.store import sqlite
        insert = sqlite._BulkSQLiteApplicationRecorder._insert_events
        def _insert(self, cursor, rows, **kw):
            insert(self, cursor, rows[: len(rows) // 2], **kw)
            kill()
        sqlite._BulkSQLiteApplicationRecorder._insert_events = _insert
    """,
    # Committed to the temporary file, not yet synced nor renamed.
    "committed": """
        from tasktrail.replay import importing
        importing._sync = lambda path: kill()
    """,
}


def _killed_import(source: Path, target: Path, killer: str) -> subprocess.CompletedProcess[str]:
    program = (
        textwrap.dedent(
            """
        import os, signal, sys
        def kill():
            os.kill(os.getpid(), signal.SIGKILL)
        """
        )
        + textwrap.dedent(killer)
        + textwrap.dedent(
            """
        from tasktrail.replay.cli import main
        sys.exit(main(["import", sys.argv[1], sys.argv[2]]))
        """
        )
    )
    return subprocess.run(
        [sys.executable, "-c", program, str(source), str(target)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("point", list(KILLERS))
def test_an_import_killed_at_any_point_leaves_no_store(
    exported: tuple[Path, int], tmp_path: Path, point: str
) -> None:
    source, count = exported
    target = tmp_path / "target.db"
    ran = _killed_import(source, target, KILLERS[point])
    assert ran.returncode == -signal.SIGKILL, ran.stderr
    assert not target.exists()
    assert not any(p.exists() for p in (Path(f"{target}-wal"), Path(f"{target}-shm")))
    # Not "not empty": a second import goes through, whole.
    assert import_log(source, target) == count
    assert verify(target).ok


def test_an_import_killed_while_its_file_grows_leaves_no_store(
    exported: tuple[Path, int], tmp_path: Path
) -> None:
    """A SIGKILL from outside, once the temporary store exists (no timing assumed: the
    kill waits for the file, and whatever stage the import reached, the target is
    either absent or whole)."""
    source, count = exported
    target = tmp_path / "target.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "tasktrail.replay.cli", "import", str(source), str(target)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while process.poll() is None and not list(tmp_path.glob(".target.db.import-*")):
            pass
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    if target.exists():  # it finished first: then whole
        with open_store(target, read_only=True) as store:
            assert store.head() == count
    else:
        assert import_log(source, target) == count


# ─── a full disk ─────────────────────────────────────────────────────────────


@contextlib.contextmanager
def small_disk(tmp_path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted under ``tmp_path`` (root only); skips otherwise."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_an_import_onto_a_full_disk_exits_2_and_leaves_no_store(
    exported: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, count = exported
    with small_disk(tmp_path, "256k") as folder:
        target = folder / "target.db"
        assert main(["import", str(source), str(target)]) == 2
        err = capsys.readouterr().err
        assert f"the disk holding {folder} is full" in err and f"{count:,} events" in err, err
        assert "bytes are free" in err and "malformed" not in err
        assert list(folder.iterdir()) == []  # neither the store nor its temporary file


@pytest.mark.parametrize("where", ["insert", "sync"])
def test_a_full_disk_injected_into_the_writes_exits_2_and_leaves_no_store(
    exported: tuple[Path, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """The same without a mount: SQLite's "database or disk is full" from the insert,
    and ENOSPC from the sync, injected (the tmpfs test above shows the real one)."""
    from tasktrail.domain.store import sqlite
    from tasktrail.replay import importing

    def full_insert(self: Any, cursor: Any, rows: Any, **kwargs: Any) -> Any:
        raise OperationalError("database or disk is full")

    def full_sync(path: Path) -> None:
        raise OSError(28, "No space left on device", str(path))

    if where == "insert":
        monkeypatch.setattr(sqlite._BulkSQLiteApplicationRecorder, "_insert_events", full_insert)
    else:
        monkeypatch.setattr(importing, "_sync", full_sync)
    source, _ = exported
    target = tmp_path / "target.db"
    assert main(["import", str(source), str(target)]) == 2
    assert f"the disk holding {tmp_path} is full" in capsys.readouterr().err
    assert not target.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".target.db")]


def test_an_import_into_a_store_with_events_is_refused(
    exported: tuple[Path, int], tmp_path: Path
) -> None:
    source, count = exported
    target = tmp_path / "target.db"
    assert import_log(source, target) == count
    with pytest.raises(StoreError, match="not empty"):
        import_log(source, target)
    with open_store(target, read_only=True) as store:
        assert store.head() == count


def test_an_import_into_postgresql_is_one_transaction(
    exported: tuple[Path, int], postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure inside the one transaction leaves the schema's log empty (not cut short
    at a batch), and a second import goes through."""
    source, count = exported
    from tasktrail.domain.store.postgres import GuardedPostgresRecorder

    original = GuardedPostgresRecorder.insert_events
    calls: list[int] = []

    def failing(self: Any, rows: Any, **kwargs: Any) -> Any:
        calls.append(len(rows))
        raise OperationalError("could not extend file: No space left on device")

    monkeypatch.setattr(GuardedPostgresRecorder, "insert_events", failing)
    with pytest.raises(StoreError, match="No space left"):
        import_log(source, postgres_url)
    assert calls == [count]  # all rows, one call: one transaction
    monkeypatch.setattr(GuardedPostgresRecorder, "insert_events", original)
    with open_store(postgres_url, read_only=True) as store:
        assert store.head() == 0
    assert import_log(source, postgres_url) == count
    assert verify(postgres_url).ok


def test_an_import_onto_a_file_system_without_hard_links_renames(
    exported: tuple[Path, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, count = exported
    from tasktrail.replay import importing

    def no_links(*args: object) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(importing.os, "link", no_links)
    target = tmp_path / "target.db"
    assert import_log(source, target) == count
    assert verify(target).ok
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".target.db")]
