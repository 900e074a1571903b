"""Concurrent writers: of two conflicting commands exactly one wins.

Several processes (``helpers/contender.py``), each with its own scheduler on
the same store, issue commands to the same tasks. Each round they all decide
on the same snapshot, so every command but the first to commit conflicts on
the task's next version: the loser gets ConflictError, appends nothing, and
``Scheduler.retrying`` decides again on fresh state. Both stores run it:
SQLite in WAL mode with a busy timeout, and PostgreSQL.

Two races the version check cannot see (a decision that reads one task's
stream and writes another's) are refused by the store's read guards (below).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import LONG
from helpers.checks import fold, stale, verify_problems, world_problems
from helpers.contender import registry

from tasktrail.domain import ConflictError, ManualClock, Refused, Scheduler, TaskIdTaken
from tasktrail.domain.tasks.events import TaskReserved

CONTENDER = Path(__file__).parent / "helpers" / "contender.py"
CONTENDERS = 4
ROUNDS = 25 if LONG else 4


class Contenders:
    """Processes with a scheduler each, on one store, answering one message at a time."""

    def __init__(self, location: str, count: int) -> None:
        # One worker name for every contender: the race under test is the store's
        # version check between writers, not a fleet's fencing (tests/test_fleet.py).
        env = {
            **os.environ,
            "PYTHONPATH": str(Path(__file__).parent),
            "TASKTRAIL_WORKER": "contenders",
        }
        self.processes = [
            subprocess.Popen(
                [sys.executable, str(CONTENDER), location, f"c{k}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            for k in range(count)
        ]
        for process in self.processes:
            assert "ready" in self._read(process)

    @staticmethod
    def _read(process: subprocess.Popen[bytes]) -> dict[str, Any]:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, "a contender died"
        answer: dict[str, Any] = orjson.loads(line)
        assert answer.get("outcome") != "error", answer["error"]
        return answer

    def ask(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send every contender its message first, then collect the answers."""
        for process, message in zip(self.processes, messages, strict=True):
            assert process.stdin is not None
            process.stdin.write(orjson.dumps(message) + b"\n")
            process.stdin.flush()
        return [self._read(process) for process in self.processes]

    def refresh(self) -> None:
        self.ask([{"op": "refresh"}] * len(self.processes))

    def race(self, commands: list[str], task_id: str, *, retry: bool) -> list[dict[str, Any]]:
        self.refresh()  # everybody decides on the same snapshot
        return self.ask(
            [
                {"op": "race", "command": c, "task": task_id, "retry": retry, "attempts": 10}
                for c in commands
            ]
        )

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                assert process.stdin is not None
                process.stdin.write(b'{"op": "quit"}\n')
                process.stdin.close()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def contenders(store_url: str) -> Any:
    opened = Contenders(store_url, CONTENDERS)
    yield opened
    opened.close()


def _appended(s: Scheduler, head: int, answers: list[dict[str, Any]]) -> int:
    """Events the round appended: exactly those the winners say they wrote."""
    s.refresh()
    new = sum(1 for _ in s.store.read(after=head))  # PostgreSQL positions may skip
    assert new == sum(a["written"] for a in answers), answers
    for answer in answers:
        if answer["outcome"] != "won":
            assert answer["written"] == 0, answer  # a loser appends nothing
    return new


@pytest.mark.grows
def test_one_of_conflicting_commands_wins(store_url: str, contenders: Contenders) -> None:
    clock = ManualClock(1_000_000)
    s = Scheduler.open(store_url, clock=clock, registry=registry())
    tally: Counter[str] = Counter()
    try:
        for round_number in range(ROUNDS):
            retry = round_number % 2 == 0

            # Everybody reserves one pending task: one reservation, the others conflict.
            task_id = s.submit("job")
            head = s.store.head()
            answers = contenders.race(["reserve"] * CONTENDERS, task_id, retry=retry)
            won = [a for a in answers if a["outcome"] == "won"]
            assert len(won) == 1 and won[0]["value"] == "run", answers
            assert _appended(s, head, answers) == 1
            for loser in (a for a in answers if a["outcome"] != "won"):
                assert loser["conflicts"] == 1, loser
                # Retrying decided again on fresh state: the task runs, so it refuses.
                assert loser["outcome"] == ("refused" if retry else "conflict"), loser
            reserved = [e for e in s.history(task_id) if isinstance(e, TaskReserved)]
            assert len(reserved) == 1
            tally["reserve"] += sum(a["conflicts"] for a in answers)

            # Everybody records a memo on the running task, retrying: all of them land.
            head = s.store.head()
            answers = contenders.race(["memo"] * CONTENDERS, task_id, retry=True)
            assert [a["outcome"] for a in answers] == ["won"] * CONTENDERS, answers
            assert _appended(s, head, answers) == CONTENDERS
            assert set(s.task(task_id).memos) == {f"c{k}" for k in range(CONTENDERS)}
            conflicts = sum(a["conflicts"] for a in answers)
            assert conflicts >= CONTENDERS - 1  # one snapshot: only one first try can win
            tally["memo"] += conflicts

            # Finish, abort and checkpoints race: whichever wins, the others re-decide.
            head = s.store.head()
            answers = contenders.race(
                ["finish", "abort", "checkpoint", "checkpoint"], task_id, retry=True
            )
            _appended(s, head, answers)
            task = s.task(task_id)
            finished, aborted = answers[0], answers[1]
            assert (finished["outcome"] == "won") == (task.status == "terminal"), answers
            if aborted["outcome"] == "won" and aborted["value"]:
                assert task.abort_requested
            tally["finish/abort/checkpoint"] += sum(a["conflicts"] for a in answers)

            # Everybody submits the same id: one task, the others refused on retry.
            head = s.store.head()
            answers = contenders.race(["submit"] * CONTENDERS, f"dup-{round_number}", retry=retry)
            assert [a["outcome"] for a in answers].count("won") == 1, answers
            assert _appended(s, head, answers) == 1
            tally["submit"] += sum(a["conflicts"] for a in answers)

        folded = fold(s.store)
        assert world_problems(folded.world) == []
        violations = verify_problems(s.store)
        assert not violations, violations
        print(f"\nconflicts tried ({store_url.split('?')[0]}): {dict(tally)}")
        assert tally.total() >= ROUNDS * (3 * (CONTENDERS - 1))
    finally:
        s.close()


OPEN_AT_ONCE = """
import sys
from tasktrail.domain import Scheduler, TasktrailError
print("ready", flush=True)
sys.stdin.readline()  # every process opens the new store at the same moment
try:
    Scheduler.open(sys.argv[1]).store.close()
    print("opened")
except TasktrailError as error:
    print(type(error).__name__, error)
"""


def test_writers_opening_a_new_store_at_once_all_open(postgres_url: str) -> None:
    """Creating the tables of a new store races in PostgreSQL's catalog. (SQLite
    creates them under its write lock; the contenders above open at once there too.)"""
    store_url = postgres_url
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AT_ONCE, store_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(CONTENDERS)
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    outputs = [p.communicate(timeout=120)[0].strip() for p in processes]
    assert outputs == ["opened"] * CONTENDERS, outputs


def test_a_writer_waits_out_another_writers_lock(sqlite_url: str) -> None:
    """SQLite in WAL mode with a busy timeout: a locked store delays a command, never
    fails it."""
    s = Scheduler.open(sqlite_url, clock=ManualClock(0), registry=registry())
    task_id = s.submit("job")
    connection = s.store.app.factory.datastore.pool.get_connection()
    try:
        mode = connection._sqlite_conn.execute("PRAGMA journal_mode").fetchone()[0]
        timeout = connection._sqlite_conn.execute("PRAGMA busy_timeout").fetchone()[0]
    finally:
        s.store.app.factory.datastore.pool.put_connection(connection)
    assert mode == "wal" and timeout >= 5_000

    blocker = sqlite3.connect(sqlite_url, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")  # another process's write transaction
    done = threading.Event()

    def release() -> None:
        done.wait(timeout=0.5)
        blocker.execute("COMMIT")

    releaser = threading.Thread(target=release)
    releaser.start()
    try:
        assert s.reserve(task_id) == "run"  # waited for the lock, then committed
    finally:
        done.set()
        releaser.join()
        blocker.close()
    assert s.task(task_id).status == "running"
    s.close()


def test_stale_hold_is_refused_when_a_child_ended_meanwhile(store_url: str) -> None:
    # The decision reads the child (live, in its stale view) and writes only the
    # owner: its read guard on the child makes the store refuse it.
    first = Scheduler.open(store_url, clock=ManualClock(0), registry=registry(), worker="w")
    owner = first.submit("job", id="owner")
    child = first.submit("job", id="child", owner=owner)
    first.reserve(owner)
    first.reserve(child)
    second = Scheduler.open(store_url, clock=ManualClock(0), registry=registry(), worker="w")
    # Opening ran recovery: the tasks are pending again; take them back.
    first.refresh()
    first.reserve(owner)
    first.reserve(child)
    second.refresh()
    first.finish(child, "completed")  # writes the child's stream only
    head = second.store.head()
    try:
        with stale(second), pytest.raises(ConflictError):
            second.finish(owner, "completed")  # stale: would hold for a child that ended
        assert second.store.head() == head  # the loser appended nothing
        second.retrying(lambda: second.finish(owner, "completed"))
        assert second.task(owner).status == "terminal"  # re-decided: nothing left to hold for
        assert world_problems(fold(second.store).world) == []
    finally:
        first.store.close()  # not close(): it would stop tasks the other writer holds
        second.store.close()


def test_stale_submit_under_a_just_marked_owner_is_refused(store_url: str) -> None:
    first = Scheduler.open(store_url, clock=ManualClock(0), registry=registry(), worker="w")
    owner = first.submit("job", id="owner")
    second = Scheduler.open(store_url, clock=ManualClock(0), registry=registry(), worker="w")
    second.refresh()
    first.abort(owner)  # writes the owner's stream
    head = second.store.head()
    try:
        with stale(second), pytest.raises(ConflictError):
            second.submit("job", id="child", owner=owner)  # stale: the owner looks unmarked
        assert second.store.head() == head
        second.retrying(lambda: second.submit("job", id="child", owner=owner))
        assert second.task("child").abort_requested  # re-decided: the cascade mark is there
        assert world_problems(fold(second.store).world) == []
    finally:
        first.store.close()  # not close(): it would stop tasks the other writer holds
        second.store.close()


def race_to_submit(
    writers: list[Scheduler], task_id: str, hold: bool, **options: object
) -> list[object]:
    """Each writer submits ``task_id`` in a thread of its own, the threads started behind
    a barrier; what each returned or raised. ``hold``: each append waits until both
    writers have decided, so that both decide before either appends. ``options``: more
    of ``submit``'s arguments (an idempotency ``key``, tests/test_keys.py)."""
    start, decided = threading.Barrier(2, timeout=10), threading.Barrier(2, timeout=10)
    outcomes: list[object] = [None] * len(writers)

    def submit(n: int, writer: Scheduler) -> None:
        real = writer.store.append
        if hold:
            writer.store.append = lambda *a, **k: (decided.wait(), real(*a, **k))[1]  # type: ignore[method-assign]
        start.wait()
        try:
            outcomes[n] = writer.submit("job", **{"id": task_id, **options})
        except Exception as error:  # what the caller sees
            outcomes[n] = error
        finally:
            writer.store.append = real  # type: ignore[method-assign]

    threads = [threading.Thread(target=submit, args=(n, w)) for n, w in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


def test_a_taken_id_is_refused_alike_when_two_writers_race_to_submit_it(store_url: str) -> None:
    """Two schedulers on one store submit the same id at once (threads behind a
    barrier): one records it, the other gets ``TaskIdTaken`` (a ``Refused``), as a
    submit of a taken id does alone, never a ``ConflictError``, on either store. On
    PostgreSQL each append waits until both have decided, so both decide before
    either appends and the store settles the race; SQLite's writers take turns (a
    hold there would only wait out the other's turn), so the second decides on the
    first's submission."""
    writers = [
        Scheduler.open(store_url, clock=ManualClock(0), registry=registry(), worker=f"w{n}")
        for n in range(2)
    ]
    try:
        for round_ in range(3):
            task_id = f"same-{round_}"
            events = len(list(writers[0].store.read()))
            outcomes = race_to_submit(writers, task_id, store_url.startswith("postgresql"))
            assert sorted(map(type, outcomes), key=str) == sorted([str, TaskIdTaken], key=str)
            (refusal,) = [o for o in outcomes if isinstance(o, TaskIdTaken)]
            assert isinstance(refusal, Refused) and not isinstance(refusal, ConflictError)
            assert refusal.task_id == task_id and "already exists" in str(refusal)
            # The winner's submission only (PostgreSQL's positions may skip the loser's).
            assert len(list(writers[0].store.read())) == events + 1
            assert len(writers[0].store.stream_records(task_id)) == 1
            with pytest.raises(TaskIdTaken):  # the same refusal without a race
                writers[round_ % 2].submit("job", id=task_id)
            with pytest.raises(TaskIdTaken):  # and for a fork's id
                writers[round_ % 2].fork(task_id, id=task_id)
    finally:
        for writer in writers:
            writer.close()
