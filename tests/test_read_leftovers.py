"""Issue 40, item 12: what a killed read command left, the next command of ours removes.

A read-only open of a WAL store makes an empty ``-wal`` and a ``-shm``, which its close
lets SQLite remove; an output is written to a hidden temporary file renamed into
place. A read command killed before either (``helpers/stalled_read.py``, SIGKILLed
at its first read of the log) left them for good. Now:

- the next read of the store lets SQLite remove an empty ``-wal`` and a ``-shm``
  (``files.remove_read_leftovers``: SQLite deletes them only as the last connection
  to close, so never while a writer, or any reader, is at work; a ``-wal`` with frames
  is a writer's, left to the next writer to checkpoint);
- the next output to the same file removes a temporary file whose writer is gone
  (its process id, and its ``flock`` free: ``store/temporaries.py``);
- a read beside a writer at work, its ``-wal`` empty, removes none of its files.
"""

from __future__ import annotations

import os
import select
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cli import folder_state, run
from helpers.read_paths import KIND, registry

from tasktrail.domain import Scheduler

STALLED = Path(__file__).parent / "helpers" / "stalled_read.py"
STARTUP_S = 30.0


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with a task run, closed: nothing beside it."""
    path = tmp_path / "store" / "s.db"
    path.parent.mkdir()
    scheduler = Scheduler.open(str(path), registry=registry())
    scheduler.submit(KIND)
    scheduler.run_until_idle()
    scheduler.close()
    assert sorted(path.parent.iterdir()) == [path]
    return path


@pytest.fixture
def killed_read() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def read_killed_at_its_first_read(
    argv: list[str], started: list[subprocess.Popen[bytes]], then: list[Path]
) -> None:
    """``tasktrail ARGV`` in a process of its own, SIGKILLed once it reads; ``then``:
    files that must be there while it reads, and stay after the kill."""
    process = subprocess.Popen(
        [sys.executable, str(STALLED), *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    started.append(process)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], STARTUP_S)
    line = process.stdout.readline() if ready else b""
    if line != b"reading\n":
        process.kill()
        stderr = process.stderr.read().decode() if process.stderr else ""
        pytest.fail(f"the read did not start: {line!r}\n{stderr[-3000:]}")
    assert all(path.exists() for path in then), then
    process.kill()
    process.wait()
    assert all(path.exists() for path in then), "a killed process left nothing"


def test_a_killed_reads_wal_and_shm_are_removed_by_the_next_read(
    store: Path, killed_read: list[subprocess.Popen[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    before = folder_state(store.parent)
    left = [Path(f"{store}-wal"), Path(f"{store}-shm")]
    read_killed_at_its_first_read(["replay", str(store)], killed_read, then=left)
    assert os.path.getsize(left[0]) == 0  # a read's: no frame in it
    assert run(["tasks", str(store)], capsys).code == 0
    assert folder_state(store.parent) == before  # the store byte for byte, nothing beside


def test_a_killed_exports_temporary_file_is_removed_by_the_next_export(
    store: Path,
    tmp_path: Path,
    killed_read: list[subprocess.Popen[bytes]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "log.jsonl"
    read_killed_at_its_first_read(["export", str(store), str(out)], killed_read, then=[])
    (temporary,) = tmp_path.glob(".log.jsonl.*.tmp")
    assert not out.exists()
    assert run(["export", str(store), str(out)], capsys).code == 0
    assert not temporary.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl", "store"]
    assert sorted(store.parent.iterdir()) == [store]  # the read's -wal and -shm too


def test_a_read_beside_a_writer_at_work_removes_none_of_its_files(store: Path) -> None:
    writer = Scheduler.open(str(store), registry=registry(), worker="writer")
    try:
        checkpoint = sqlite3.connect(store)
        checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        checkpoint.close()
        wal = Path(f"{store}-wal")
        assert wal.stat().st_size == 0  # a writer at work, its -wal as a read leaves one
        inode = wal.stat().st_ino
        reader = [sys.executable, "-m", "tasktrail.replay.cli"]
        subprocess.run([*reader, "tasks", str(store)], check=True, capture_output=True)
        assert wal.stat().st_ino == inode and Path(f"{store}-shm").exists()
        task = writer.submit(KIND)  # into the -wal on disk: another process reads it
        seen = subprocess.run([*reader, "history", str(store), task], capture_output=True)
        assert seen.returncode == 0, seen.stderr
    finally:
        writer.close()
    assert sorted(store.parent.iterdir()) == [store]


def test_an_output_of_a_process_at_work_is_left_alone(tmp_path: Path) -> None:
    from tasktrail.domain.store.temporaries import output_temporary, remove_output_leftovers

    target = tmp_path / "log.jsonl"
    descriptor, name = output_temporary(target)  # this process is at work on it
    try:
        parent = os.getppid()  # alive, holding no lock: its process id alone keeps it
        other = tmp_path / f".log.jsonl.{parent}-abcdefgh.tmp"
        other.touch()
        gone = tmp_path / f".log.jsonl.{_gone_pid()}-abcdefgh.tmp"
        gone.touch()
        unlike = tmp_path / ".log.jsonl.notours.tmp"
        unlike.touch()
        assert remove_output_leftovers(target) == [gone]
        assert Path(name).exists() and other.exists() and unlike.exists()
    finally:
        os.close(descriptor)


def _gone_pid() -> int:
    """The id of a process that has ended (and been waited for)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # a pid is free once its process is reaped
        try:
            os.kill(process.pid, 0)
        except ProcessLookupError:
            return process.pid
        time.sleep(0.01)
    pytest.fail(f"process {process.pid} still there")
