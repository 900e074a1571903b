"""The store's news (issue 42 item 7): an idle worker wakes on another writer's append
at once, not at its next poll; ``result_async`` waiters hold no thread each; a read
command that waits leaves a SQLite store's folder as it was."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

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
