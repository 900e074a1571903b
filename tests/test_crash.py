"""Crashes: a writer killed with SIGKILL at random moments loses nothing it acknowledged.

The writer (``helpers/crash_writer.py``) runs a mixed workload on one store
and acknowledges, in a side file it fsyncs, every append before and after it
happens and every command once it returned. After each kill:

- every acknowledged append is in the store, at its position (nothing lost);
- the append that was in flight is in the store whole or not at all, and
  nothing else is (no command half-recorded, nothing phantom);
- the store folds without error and leaves nothing a whole command could not
  (held outcomes with owned work, cascades complete, ...), and ``verify``
  agrees;
- opening it runs recovery: nothing is left running, and the log still holds;
- the read models the writer kept (it was killed mid-batch too, now and then)
  catch up to the same tables a rebuild from position 0 gives.

The default profile kills 10 times per store; the long one (TASKTRAIL_LONG=1)
50 times. TASKTRAIL_CRASH_SEED picks other random moments.
"""

from __future__ import annotations

import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.checks import AckLog, fold, read_acks, verify_problems, world_problems

from tasktrail.domain import Scheduler, Store, open_store
from tasktrail.projections import Projector

WRITER = Path(__file__).parent / "helpers" / "crash_writer.py"
SEED = int(os.environ.get("TASKTRAIL_CRASH_SEED", "8"))
READY_TIMEOUT = 60.0


@dataclass
class Figures:
    """What a run of kills showed (printed for docs/reliability.md)."""

    kills: int = 0
    kills_before_ready: int = 0
    commands_acknowledged: int = 0
    events_acknowledged: int = 0
    in_flight_committed: int = 0
    in_flight_rolled_back: int = 0
    torn_ack_lines: int = 0
    recoveries: int = 0
    tasks_recovered: int = 0
    events_in_store: int = 0


class Writers:
    """The crash writer's fork server: each writer starts without paying for imports."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WRITER), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._buffer = b""
        self._early: list[str] = []

    def line(self, timeout: float = READY_TIMEOUT) -> str:
        """The next line the server or its writer printed."""
        if self._early:
            return self._early.pop(0)
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(left, 0))
            chunk = os.read(self.process.stdout.fileno(), 4096) if ready else b""
            if not chunk:
                raise AssertionError(f"the writer server went quiet: {self.stderr()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def start(self, *args: str) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write((" ".join(args) + "\n").encode())
        self.process.stdin.flush()
        while True:
            line = self.line()
            if line.startswith("started "):
                return int(line.split()[1])
            self._early.append(line)  # the writer was quicker than its server's report

    def exited(self, pid: int) -> tuple[int, bool]:
        """Wait for a writer to end: its exit code, and whether it had said ``ready``."""
        was_ready = False
        while True:
            words = self.line().split()
            if words == ["ready"]:
                was_ready = True
            elif words[:2] == ["exited", str(pid)]:
                return int(words[2]), was_ready

    def stderr(self) -> str:
        self.close()
        assert self.process.stderr is not None
        return self.process.stderr.read().decode()[-3000:]

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _sqlite_copy(location: str, copy: Path) -> str:
    """A copy of a SQLite store (WAL included) through the backup API."""
    source, target = sqlite3.connect(location), sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    return str(copy)


def _check_after_kill(
    location: str, acks: Path, head_before: int, figures: Figures, n: int, tmp: Path
) -> None:
    with open_store(location) as store:  # one connection for every check
        _check_log(store, read_acks(acks), head_before, figures)
        # Recovery: in place every other kill; on a copy otherwise (SQLite), so that
        # the next writer runs it itself and a kill can land in the middle of it.
        if "://" not in location and n % 2:
            with open_store(_sqlite_copy(location, tmp / f"recovered-{n}.db")) as copy:
                _check_recovery(copy, figures)
        else:
            _check_recovery(store, figures)
        # The read models the writer kept catch up to what a rebuild gives.
        with Projector(store, tmp / "views.db") as projector:
            projector.catch_up()
            incremental = projector.table_checksums()
        with Projector(store, tmp / f"rebuilt-{n}.db") as rebuilt:
            rebuilt.rebuild()
            assert rebuilt.table_checksums() == incremental
        (tmp / f"rebuilt-{n}.db").unlink()


def _check_log(store: Store, log: AckLog, head_before: int, figures: Figures) -> None:
    """The log as the crash left it, before any recovery, against what was acknowledged."""
    figures.torn_ack_lines += log.torn_lines
    figures.commands_acknowledged += len(log.commands)
    figures.events_acknowledged += len(log.appended)
    folded = fold(store)
    rows = folded.rows

    # Nothing lost: each acknowledged event is there, at the position the append returned.
    for stream, version, topic, position in log.appended:
        assert rows.get((stream, version)) == (topic, position), (stream, version, topic)
    # Nothing that raised is there.
    for intent in log.failed:
        assert not any((s, v) in rows for s, v, _ in intent), intent
    # The append in flight at the kill is there whole or not at all.
    landed: list[bool] = []
    if log.pending is not None:
        landed = [rows.get((s, v), ("", 0))[0] == t for s, v, t in log.pending]
        assert all(landed) or not any(landed), f"half-recorded: {log.pending} -> {landed}"
        if all(landed):
            figures.in_flight_committed += 1
        else:
            figures.in_flight_rolled_back += 1
    # Nothing else: every event since the writer started is accounted for.
    accounted = {(s, v) for s, v, _, _ in log.appended}
    if landed and all(landed):
        accounted |= {(s, v) for s, v, _ in log.pending or ()}
    extra = [k for k, (_, p) in rows.items() if p > head_before and k not in accounted]
    assert not extra, f"events no acknowledged append wrote: {extra[:5]}"

    # What each acknowledged command did is there.
    tasks = folded.world.tasks
    for command in log.commands:
        task_id = command.get("task")
        if command["command"] in ("submit", "submit_child"):
            assert task_id in tasks, command
        elif command["command"] == "finish":
            assert tasks[task_id].status in ("completing", "terminal"), command
        elif command["command"] == "abort" and command["changed"]:
            assert tasks[task_id].abort_requested or not tasks[task_id].live, command

    # No whole command leaves these; a half-recorded one could.
    assert world_problems(folded.world) == []
    violations = verify_problems(store)
    assert not violations, violations  # None: tasktrail.replay.verify is not there
    figures.tasks_recovered += sum(1 for t in tasks.values() if t.status == "running")


def _check_recovery(store: Store, figures: Figures) -> None:
    """Opening runs recovery: nothing is left running and the log still holds."""
    scheduler = Scheduler.open(store, restart_limit=3)  # not closed: the store is ours
    assert not scheduler.tasks("running")
    assert world_problems(scheduler.world) == []
    assert world_problems(fold(store).world) == []
    violations = verify_problems(store)
    assert not violations, violations
    figures.recoveries += 1


def kill_repeatedly(location: str, tmp: Path, kills: int, seed: int) -> Figures:
    """Start the writer, SIGKILL it at a random moment, check the store; ``kills`` times."""
    rng = random.Random(seed)
    figures = Figures()
    writers = Writers()
    try:
        for n in range(kills * 3):  # bounded: a writer that ends by itself is not a kill
            if figures.kills == kills:
                break
            acks = tmp / f"acks-{n}.jsonl"
            with open_store(location) as store:
                head_before = store.head()
            pid = writers.start(
                location,
                str(acks),
                str(tmp / "views.db"),
                str(seed * 1000 + n),
                str(1_000_000 + n * 10_000_000),
            )
            early = rng.random() < 0.3
            if early:
                # The kill may land while the writer opens the store and recovers.
                time.sleep(rng.uniform(0.0, 0.15))
            else:
                assert writers.line() == "ready"
                time.sleep(rng.uniform(0.02, 0.5))
            os.kill(pid, signal.SIGKILL)
            returncode, said_ready = writers.exited(pid)
            assert returncode in (-signal.SIGKILL, 0), writers.stderr()
            if returncode == -signal.SIGKILL:
                figures.kills += 1
                figures.kills_before_ready += early and not said_ready
            _check_after_kill(location, acks, head_before, figures, n, tmp)
    finally:
        writers.close()
    with open_store(location) as store:
        figures.events_in_store = store.head()
    print(f"\ncrash figures ({location.split('?')[0]}, seed {seed}): {figures}")
    assert figures.kills == kills
    assert figures.commands_acknowledged > kills  # the writer got work done between kills
    return figures


@pytest.fixture
def crash_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "trail.db")
    return str(request.getfixturevalue("postgres_url"))


STORES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("crash_store", STORES, indirect=True)
def test_kills_lose_nothing_acknowledged(crash_store: str, tmp_path: Path) -> None:
    kill_repeatedly(crash_store, tmp_path, kills=10, seed=SEED)


@pytest.mark.slow
@pytest.mark.parametrize("crash_store", STORES, indirect=True)
def test_many_kills_lose_nothing_acknowledged(crash_store: str, tmp_path: Path) -> None:
    kill_repeatedly(crash_store, tmp_path, kills=50, seed=SEED + 1)
