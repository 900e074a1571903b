"""The store's news (issue 42 item 7): an idle worker wakes on another writer's append
at once, not at its next poll; ``result_async`` waiters hold no thread each; a read
command that waits leaves a SQLite store's folder as it was."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import folder_state, run

from tasktrail.domain import Registry, Scheduler, TaskDefinition, Worker


def test_an_idle_worker_wakes_on_another_writers_append(store_url: str) -> None:
    """The worker polls the head only every 5 s here: it starts the phase within a
    fraction of that, woken by the news of a submit made through another store object
    (another connection: PRAGMA data_version on SQLite, NOTIFY on PostgreSQL)."""
    started = threading.Event()

    def go(inv: Any) -> None:
        started.set()
        inv.finish("completed")

    registry = Registry([TaskDefinition("go", 1, {"go": go})])
    scheduler = Scheduler.open(store_url, registry=registry, worker="w")
    worker = Worker(scheduler, poll_ms=5_000)
    running = threading.Thread(target=worker.run)
    running.start()
    try:
        with Scheduler.open(store_url, worker="submitter") as submitter:
            time.sleep(0.5)  # the worker's first tick found nothing: it idles
            submitter.submit("go", phase="go")
            submitted = time.monotonic()
            assert started.wait(5)
            assert time.monotonic() - submitted < 1.0
    finally:
        worker.stop()
        running.join(30)


def test_result_async_waiters_hold_no_thread_each(store_url: str) -> None:
    with Scheduler.open(store_url) as s:
        task_ids = [s.submit("job", phase="a") for _ in range(40)]

        async def main() -> tuple[int, float, list[Any]]:
            began = time.monotonic()
            waiting = [asyncio.create_task(s.result_async(t, timeout=0.5)) for t in task_ids]
            await asyncio.sleep(0.3)  # every waiter is waiting
            during = threading.active_count()
            ended = await asyncio.gather(*waiting, return_exceptions=True)
            return during, time.monotonic() - began, ended

        before = threading.active_count()
        during, took, ended = asyncio.run(main())
        # The news watcher, and the loop's default executor (a few threads, shared).
        assert during - before < 12, (before, during)
        # All 40 waited at once: not a few at a time on the executor's threads.
        assert all(isinstance(e, TimeoutError) for e in ended)
        assert took < 2.0, took


def test_the_result_command_waits_without_touching_a_sqlite_store(
    tmp_path: Path, capsys: Any
) -> None:
    store = tmp_path / "trail.db"
    with Scheduler.open(str(store)) as s:
        task_id = s.submit("job", phase="a")
    before = folder_state(tmp_path)
    ran = run(["result", str(store), task_id, "--wait", "0.3"], capsys)
    assert ran.code == 1 and "has not ended after 0.3 s: it is pending" in ran.err
    assert folder_state(tmp_path) == before


def _generation_after(news: Any, seconds: float) -> int:
    """The generation after waiting ``seconds`` for news all along (a waiter: the
    watcher looks every 2 ms meanwhile)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        news.wait(news.generation, left)
    return int(news.generation)


def _news_after(news: Any, before: int) -> bool:
    """Whether news comes within 2 s of waiting for it (a loaded machine may keep the
    watcher waiting)."""
    deadline = time.monotonic() + 2
    while news.generation == before and (left := deadline - time.monotonic()) > 0:
        news.wait(before, left)
    return bool(news.generation != before)


def test_a_stores_own_append_is_news_once_anothers_at_once(sqlite_url: str) -> None:
    """SQLite's ``data_version`` changes for the watcher's connection on every commit,
    this store's own too: an own append wakes its waiters itself and is not news again
    (a worker ticked once more for each before); another writer's append still is, and
    so is another connection's write of anything else."""
    path = sqlite_url
    with Scheduler.open(path, worker="a") as mine, Scheduler.open(path, worker="b") as other:
        news = mine.store.news
        news.wait(news.generation, 0.01)  # the watcher runs from the first wait on
        time.sleep(0.05)
        before = news.generation
        for _ in range(5):
            mine.submit("job", phase="a")
            _generation_after(news, 0.05)
        # Once each (a look that falls between a commit and its count sees it twice,
        # rarely: one such is let by); twice each before.
        assert news.generation - before <= 6, news.generation - before
        before = news.generation
        other.submit("job", phase="a")
        assert _news_after(news, before)
        # Not an append: the head stays where this store's last append left it.
        mine.submit("job", phase="a")
        _generation_after(news, 0.05)  # a waiter meanwhile: the watcher saw the append
        before = news.generation
        with sqlite3.connect(path) as raw:
            raw.execute("CREATE TABLE elsewhere (x)")
        assert _news_after(news, before)


@pytest.mark.postgres
def test_a_notify_of_the_stores_own_writers_is_not_news_again(postgres_url: str) -> None:
    """PostgreSQL's listener hears its own store's NOTIFYs: one sent by a server process
    the store appended on is not news again, another's is. (A channel of this test's
    own: every store of a server shares its table's, and other tests' append.)"""
    import psycopg

    from tasktrail.domain.store.news import Heard
    from tasktrail.domain.store.watchers import postgres_watch

    dsn = postgres_url.split("?", 1)[0]
    with (
        psycopg.connect(dsn, autocommit=True) as ours,
        psycopg.connect(dsn, autocommit=True) as theirs,
    ):
        own = {ours.info.backend_pid}
        i = ours.info
        conninfo = {"dbname": i.dbname, "host": i.host, "port": i.port, "user": i.user}
        channel = f"news_test_{ours.info.backend_pid}"
        signals: list[float] = []
        stopped = threading.Event()

        class Counted(Heard):
            def signal(self) -> None:
                signals.append(time.monotonic())

        watch = postgres_watch(conninfo, channel, own)
        listening = threading.Thread(target=watch, args=(stopped, Counted()), daemon=True)
        listening.start()
        try:
            deadline = time.monotonic() + 5
            while not signals and time.monotonic() < deadline:
                time.sleep(0.01)  # its first signal: connected and listening
            assert len(signals) == 1
            for _ in range(3):
                ours.execute(f"NOTIFY {channel}")
            time.sleep(0.5)
            assert len(signals) == 1
            theirs.execute(f"NOTIFY {channel}")
            deadline = time.monotonic() + 5
            while len(signals) == 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(signals) == 2
        finally:
            stopped.set()
            listening.join(5)


def test_the_sqlite_watcher_looks_only_while_somebody_waits(sqlite_url: str) -> None:
    """A busy worker (every slot taken) waits for no news: its watcher looked every
    2 ms all the same, a tenth of its CPU. It looks only while somebody waits, and
    then at once, so a change made while nobody waited is news to the next waiter."""
    a, b = Scheduler.open(sqlite_url, worker="a"), Scheduler.open(sqlite_url, worker="b")
    with a as mine, b as other:
        news = mine.store.news
        news.wait(news.generation, 0.01)  # the watcher runs from the first wait on
        time.sleep(0.2)  # its last look, made while the waiter waited, is over
        before = news.generation
        other.submit("job", phase="a")
        time.sleep(0.1)
        assert news.generation == before  # nobody waited: no look
        began = time.monotonic()
        assert news.wait(before, 2.0) != before
        assert time.monotonic() - began < 0.5
