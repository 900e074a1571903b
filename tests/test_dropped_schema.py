"""A PostgreSQL schema dropped under a running worker (issue 40, item 7).

The next ``Scheduler.open`` of the URL makes a new, empty store there. The worker
must not go on with the old log's state: it stops with a message that says its log
is gone or was replaced, appends nothing to the new log and writes no snapshot of
the old one into it, so ``tasktrail verify`` of the new store passes.
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import psycopg
import pytest
from conftest import _admin_dsn
from helpers.worker_processes import STARTUP_S, events, of, processes, submit, wait_for

from tasktrail.domain import LogReplaced, ManualClock, Registry, Scheduler, open_store
from tasktrail.domain.history import SnapshotTable
from tasktrail.domain.tasks.events import TaskEnded, TaskSubmitted
from tasktrail.replay import verify

pytestmark = pytest.mark.postgres

STOP_S = 10
"""How long the worker may take to stop on its own once its log is gone."""


def test_a_worker_whose_schema_is_dropped_stops_and_writes_nothing_into_the_new_store(
    postgres_url: str, tmp_path: Path
) -> None:
    schema = postgres_url.rsplit("schema=", 1)[1]
    with processes(postgres_url, tmp_path) as started:
        worker = started.worker("w", phase_s=0.05)
        old = submit(postgres_url, "sync", 3)
        wait_for(lambda: len(of(TaskEnded, postgres_url)) == len(old), STARTUP_S, worker)

        with psycopg.connect(_admin_dsn(), autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        new = submit(postgres_url, "sync", 2)  # its open makes a new store in the schema
        try:
            code: int | None = worker.process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:  # went on: stop it, as its operator would
            code = None
            worker.process.send_signal(signal.SIGTERM)
            worker.process.wait(timeout=30)
        output = worker.output()
    # Nothing of the old log in the new store: no decision, no snapshot of it.
    assert [e.task_id for e in events(postgres_url) if isinstance(e, TaskSubmitted)] == new
    assert len(events(postgres_url)) == len(new)
    with open_store(postgres_url) as store:  # the submitter's, at most: within the log
        assert max(SnapshotTable(store).positions(), default=0) <= store.head(), output
    assert verify(postgres_url).ok
    assert code is not None, f"still running {STOP_S} s after its log was replaced:\n{output}"
    assert code != 0, output
    assert re.search(f"the log of {re.escape(postgres_url)} (is gone|was replaced)", output)


def test_a_scheduler_whose_log_was_replaced_by_a_longer_one_writes_nothing_into_it(
    postgres_url: str, clock: ManualClock, registry: Registry
) -> None:
    """The schema dropped and made again before the scheduler looked, and the new log
    already past its position: the table's identity tells, not the head."""
    old = Scheduler.open(postgres_url, clock=clock, registry=registry, worker="old")
    old.submit("job")
    with psycopg.connect(_admin_dsn(), autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{postgres_url.rsplit("schema=", 1)[1]}" CASCADE')
    with Scheduler.open(postgres_url, clock=clock, registry=registry, worker="new") as new:
        for _ in range(5):
            new.submit("job")
    written = len(events(postgres_url))
    assert written > old.position
    with pytest.raises(LogReplaced, match="was replaced: its table was dropped"):
        old.check_log()
    with pytest.raises(LogReplaced):
        old.snapshot()
    with pytest.raises(LogReplaced):
        old.submit("job")  # the next decision folds nothing of the new log either
    old.close()  # writes nothing: no TaskStopped, no snapshot, no lease row
    assert len(events(postgres_url)) == written
    assert verify(postgres_url).ok
