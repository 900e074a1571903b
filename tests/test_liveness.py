"""A dead process is known at once (issue 27, item 5; rule 9 for a fleet): a writer holds
a lock for its process's life, a flock (SQLite) or a session advisory lock (PostgreSQL).
These tests free a worker's lock as its process's death would, in one process; the
process tests (tests/test_worker_processes.py) kill real ones."""

from __future__ import annotations

import gc
import os
import sqlite3
import threading
import time
from typing import Any

import orjson

from tasktrail.domain import ManualClock, Registry, Scheduler
from tasktrail.domain.store.leases import Leases
from tasktrail.domain.store.liveness import FileLiveness
from tasktrail.domain.tasks.events import TaskRecovered
from tasktrail.replay.cli import main

LEASE = 10_000


def die(scheduler: Scheduler) -> None:
    """What the system does when the process dies: its liveness lock is let go, and
    nothing else (the lock file stays; the lease row stays as it was)."""
    liveness = scheduler._liveness
    if isinstance(liveness, FileLiveness):
        assert liveness._fd is not None
        os.close(liveness._fd)  # the kernel's part: the flock goes with the descriptor
        liveness._fd = None
    else:
        assert liveness is not None
        liveness.release()  # the server's part: the session and its lock end


def running_task(
    store_url: str, clock: ManualClock, registry: Registry, name: str, lease: float = LEASE
) -> Any:
    s = Scheduler.open(store_url, clock=clock, registry=registry, worker=name, lease=lease)
    task = s.submit("job")
    s.reserve(task)
    return s, task


def test_rule_09_liveness_an_open_recovers_a_gone_workers_task_while_its_lease_runs(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    dead, task = running_task(store_url, clock, registry, "dead")
    die(dead)
    with Scheduler.open(store_url, clock=clock, registry=registry, worker="next") as s:
        state = s.task(task)
        assert (state.status, state.restarts) == ("pending", 1)
        [recovered] = [e for e in s.history(task) if isinstance(e, TaskRecovered)]
        assert recovered.worker == "dead"
        assert recovered.at < clock.now + 1  # at once: the lease runs till clock + LEASE


def test_rule_09_liveness_a_live_but_silent_worker_keeps_its_task_until_its_lease_lapses(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    silent, task = running_task(store_url, clock, registry, "silent")
    peer = Scheduler.open(store_url, clock=clock, registry=registry, worker="peer", lease=LEASE)
    assert peer.recover_gone().recovered == []
    clock.advance(LEASE / 2)
    assert peer.heartbeat().recovered == []
    assert peer.task(task).status == "running"
    clock.advance(LEASE)  # the lease lapsed; the process still holds its lock
    assert peer.heartbeat().recovered == [task]
    peer.close()
    die(silent)


def test_rule_09_liveness_a_peer_recovers_a_worker_that_dies_after_it_opened(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    peer = Scheduler.open(store_url, clock=clock, registry=registry, worker="peer", lease=LEASE)
    dead, task = running_task(store_url, clock, registry, "dead")
    assert peer.recover_gone().recovered == []  # alive: nothing to do
    die(dead)
    report = peer.recover_gone()
    assert report.recovered == [task] and report.lost == {task: "dead"}
    assert peer.task(task).restarts == 1
    peer.close()


def test_a_worker_that_closed_is_not_taken_for_gone_and_leaves_no_lock(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w")
    assert s._liveness is not None
    key = s._liveness_key
    assert key is not None
    folder = s._liveness.folder  # type: ignore[attr-defined]
    assert (folder / key).exists()
    s.close()
    assert not (folder / key).exists()


def test_a_worker_whose_process_died_leaves_its_lock_file_free(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    dead, _ = running_task(sqlite_url, clock, registry, "dead")
    liveness = dead._liveness
    assert isinstance(liveness, FileLiveness) and dead._liveness_key is not None
    keys = {"dead": dead._liveness_key}
    assert FileLiveness(sqlite_url).gone(keys) == set()
    die(dead)
    assert FileLiveness(sqlite_url).gone(keys) == {"dead"}


def test_lease_rows_of_workers_gone_for_a_day_are_dropped_with_their_locks(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    old, _ = running_task(store_url, clock, registry, "old")
    die(old)
    clock.advance(2 * 86_400_000)
    with Scheduler.open(store_url, clock=clock, registry=registry, worker="new") as s:
        assert set(s.leases.all()) == {"new"}


def test_a_lease_table_an_earlier_release_made_gains_the_liveness_column(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="made").close()
    with sqlite3.connect(sqlite_url) as db:  # the table as release 2 made it
        db.execute("DROP TABLE tasktrail_leases")
        db.execute(
            "CREATE TABLE tasktrail_leases (worker TEXT PRIMARY KEY, expires_at DOUBLE "
            "PRECISION NOT NULL, renewed_at DOUBLE PRECISION NOT NULL, started_at DOUBLE "
            "PRECISION NOT NULL)"
        )
        db.execute("INSERT INTO tasktrail_leases VALUES ('older', 9e15, 1, 1)")
    with Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w") as s:
        leases = Leases(s.store).all()
        assert leases["older"].liveness is None  # holds no lock: the lease decides
        assert leases["w"].liveness == s._liveness_key


def test_the_workers_command_calls_a_worker_whose_process_died_gone(
    store_url: str, clock: ManualClock, registry: Registry, capsys: Any
) -> None:
    clock.now = time.time() * 1000  # the command reads the system clock
    dead, task = running_task(store_url, clock, registry, "dead", lease=10**9)
    alive, _ = running_task(store_url, clock, registry, "alive", lease=10**9)
    die(dead)
    assert main(["workers", store_url, "--json"]) == 0
    rows = {row["worker"]: row for row in map(orjson.loads, capsys.readouterr().out.split())}
    assert (rows["dead"]["live"], rows["dead"]["process_gone"]) == (False, True)
    assert rows["dead"]["running"] == [task]
    assert (rows["alive"]["live"], rows["alive"]["process_gone"]) == (True, False)
    assert main(["workers", store_url]) == 0
    lines = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()}
    assert (lines["dead"], lines["alive"]) == ("gone", "yes")
    alive.close()


def test_a_liveness_lock_the_open_could_not_take_is_taken_at_a_later_heartbeat(
    postgres_url: str, clock: ManualClock, registry: Registry, monkeypatch: Any
) -> None:
    """The server refused one more connection at open: the worker runs on its lease
    alone, and takes its lock at the next heartbeat the server allows."""
    from tasktrail.domain.store import advisory as liveness

    real = liveness.AdvisoryLiveness._connect
    refused = {"n": 1}

    def connect(self: Any) -> Any:
        if refused["n"]:
            refused["n"] -= 1
            raise OSError("FATAL: sorry, too many clients already")
        return real(self)

    monkeypatch.setattr(liveness.AdvisoryLiveness, "_connect", connect)
    s = Scheduler.open(postgres_url, clock=clock, registry=registry, worker="w")
    assert s._liveness_key is None and s._liveness is not None and s._liveness.unreachable
    s.heartbeat()
    assert s._liveness_key is not None
    assert Leases(s.store).all()["w"].liveness == s._liveness_key
    s.close()


def test_a_scheduler_dropped_without_close_leaves_no_news_watcher_running(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """A host that drops a scheduler without close (a test, a failed start): once it is
    collected, its store's news watcher stops at its next look, with its connection (a
    thread polling every 2 ms, and a descriptor, outlived every such store: the suite ran
    out of descriptors, "filedescriptor out of range in select()")."""

    def watchers() -> int:
        return sum(t.name == "tasktrail-news" for t in threading.enumerate())

    before = watchers()
    for n in range(4):
        s = Scheduler.open(store_url, clock=clock, registry=registry, worker=f"dropped-{n}")
        s.store.news.wait(s.store.news.generation, 0.01)  # its watcher started
        del s
    gc.collect()
    deadline = time.monotonic() + 5
    while watchers() > before and time.monotonic() < deadline:
        time.sleep(0.01)  # a watcher stops at its next look
    assert watchers() <= before
