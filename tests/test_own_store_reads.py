"""Issue 40, item 1: a host that reads its own store loses nothing it was told was
recorded.

A process's POSIX locks on a file all go when any descriptor of it is closed
(SQLite's "How To Corrupt An SQLite Database File", 2.2). A read of ours that opened
the store's file with ``open()`` (to look at its header) dropped the locks of the
host's writer: another process's close then checkpointed and deleted the ``-wal``
the host went on appending to, and ten acknowledged submits were gone after a kill.
Nothing of tasktrail opens a store's file or its companions but SQLite (and
``os.stat``):

- the host (``helpers/reading_host.py``) runs every read path on its own store, lets
  another process write and close, submits ten tasks and is SIGKILLed: all are there;
- each read path, run against a store this process writes, opens none of its files
  outside SQLite (``helpers/read_paths.py`` watches Python's ``open`` audit event);
- a store (or its ``-wal``) named where a plain file is read (seals, an export, a
  key), or where an output or a store is written, is refused without being opened.
"""

from __future__ import annotations

import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from helpers.cli import folder_state
from helpers.read_paths import (
    KIND,
    READ_PATHS,
    Reading,
    cli,
    prepare,
    registry,
    store_file_opens,
)

from tasktrail.domain import Scheduler, open_store
from tasktrail.replay.cli import main

HOST = Path(__file__).parent / "helpers" / "reading_host.py"
HOST_TIMEOUT_S = 60.0
"""How long the host may take to import, read and submit on a loaded 2-core machine."""


def lines_until_done(process: subprocess.Popen[bytes]) -> list[str]:
    """What the host printed, up to its ``done`` (it waits there to be killed)."""
    assert process.stdout is not None
    deadline, buffer = time.monotonic() + HOST_TIMEOUT_S, b""
    while not buffer.endswith(b"done\n"):
        ready, _, _ = select.select([process.stdout], [], [], max(deadline - time.monotonic(), 0))
        chunk = process.stdout.read1(65536) if ready else b""
        if not chunk:
            process.kill()
            stderr = process.stderr.read().decode() if process.stderr else ""
            pytest.fail(f"the host stopped before done: {buffer.decode()}\n{stderr[-3000:]}")
        buffer += chunk
    return buffer.decode().splitlines()


def test_a_host_that_reads_its_own_store_loses_no_acknowledged_submit(tmp_path: Path) -> None:
    store = str(tmp_path / "own.db")
    process = subprocess.Popen(
        [sys.executable, str(HOST), store, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        printed = lines_until_done(process)
    finally:
        process.kill()  # SIGKILL: no close, no checkpoint of its own
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    opened = next(orjson.loads(line.split(" ", 1)[1]) for line in printed if line[:7] == "opened ")
    acked = [line.split()[1] for line in printed if line.startswith("acked ")]
    assert len(acked) == 10
    left = {k: v for k, v in folder_state(tmp_path).items() if not k.endswith("-shm")}
    assert Path(f"{store}-wal").stat().st_size > 0  # the killed writer's, not checkpointed
    with open_store(store, read_only=True) as reopened:
        submitted = [r.event for r in reopened.read() if type(r.event).__name__ == "TaskSubmitted"]
    # A read leaves the killed writer's -wal to the next writer (SQLite rebuilds its -shm).
    assert {k: v for k, v in folder_state(tmp_path).items() if not k.endswith("-shm")} == left
    ids = {event.task_id for event in submitted}
    assert set(acked) <= ids, f"lost {len(set(acked) - ids)} of {len(acked)} acknowledged submits"
    assert len(ids) == 12  # the host's first task, the other process's, the ten
    assert opened == [], "a read opened the store's files outside SQLite"


@pytest.fixture
def reading(tmp_path: Path) -> Iterator[Reading]:
    """A store this process writes (a scheduler holds it open), one task run, and what
    the reads read besides it."""
    store = str(tmp_path / "s.db")
    scheduler = Scheduler.open(store, registry=registry(), worker="host")
    try:
        task = scheduler.submit(KIND)
        scheduler.run_until_idle()
        read = Reading(store, tmp_path, task)
        prepare(read)
        yield read
    finally:
        scheduler.close()


@pytest.mark.parametrize("name", list(READ_PATHS))
def test_no_read_path_opens_the_store_outside_sqlite(name: str, reading: Reading) -> None:
    with store_file_opens(reading.store) as opened:
        READ_PATHS[name](reading)
    assert opened == []


REFUSED = {
    "verify --seals STORE": lambda r: ["verify", r.store, "--seals", r.store],
    "verify --against STORE": lambda r: ["verify", r.store, "--against", r.store],
    "verify --key-file STORE": lambda r: ["verify", r.store, "--key-file", r.store],
    "verify --seals STORE-wal": lambda r: ["verify", r.store, "--seals", r.store + "-wal"],
    "replay STORE-shm": lambda r: ["replay", r.store + "-shm"],
    "import into STORE": lambda r: ["import", r.export, r.store],
    "project --out STORE-shm": lambda r: ["project", r.export, "--out", r.store + "-shm"],
    "trace --out STORE-wal": lambda r: ["trace", r.export, "--out", r.store + "-wal"],
    "worker --stats STORE": lambda r: ["worker", "m:r", "--store", r.store, "--stats", r.store],
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_store_named_as_another_file_is_refused_unopened(
    name: str, reading: Reading, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = REFUSED[name](reading)
    with store_file_opens(reading.store) as opened:
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert Path(reading.store).name in err, err  # refused for naming the store
    assert opened == []
    cli("verify", reading.store)  # the store as it was
