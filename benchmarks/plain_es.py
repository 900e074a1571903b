"""Plain eventsourcing, as it comes: an ``Aggregate`` with ``@event`` methods in an
``Application`` on its SQLite recorder (``synchronous=FULL``: it has no setting)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event


class Job(Aggregate):
    """The same four-step life as tasktrail's workload cycle."""

    @event("Submitted")
    def __init__(self, kind: str, phase: str) -> None:
        self.kind = kind
        self.phase = phase
        self.status = "pending"

    @event("Reserved")
    def reserve(self, mode: str) -> None:
        self.status = "running"

    @event("Checkpointed")
    def checkpoint(self, phase: str) -> None:
        self.phase = phase

    @event("Ended")
    def finish(self, status: str) -> None:
        self.status = "terminal"
        self.outcome = status


class Jobs(Application[Any]):
    """An eventsourcing application of jobs."""


def open_app(path: Path) -> Jobs:
    """A plain application on a SQLite file."""
    return Jobs(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)})


def save_per_event(path: Path, cycles: int) -> tuple[float, int]:
    """Seconds for ``cycles`` four-event lives, one ``save()`` per event."""
    app = open_app(path)
    try:
        started = time.perf_counter()
        for _ in range(cycles):
            job = Job("job", "fetch")
            app.save(job)
            job.reserve("run")
            app.save(job)
            job.checkpoint("write")
            app.save(job)
            job.finish("completed")
            app.save(job)
        return time.perf_counter() - started, cycles * 4
    finally:
        app.close()


def save_many(path: Path, cycles: int) -> tuple[float, int]:
    """Seconds to create ``cycles`` jobs of four events each and ``save()`` them all at once
    (the aggregate method calls included)."""
    app = open_app(path)
    try:
        started = time.perf_counter()
        jobs = []
        for _ in range(cycles):
            job = Job("job", "fetch")
            job.reserve("run")
            job.checkpoint("write")
            job.finish("completed")
            jobs.append(job)
        app.save(*jobs)
        return time.perf_counter() - started, cycles * 4
    finally:
        app.close()


def read_decode(path: Path, page: int = 10_000) -> tuple[float, int]:
    """Seconds to read the whole notification log and decode every event to its object."""
    app = open_app(path)
    try:
        to_domain_event = app.mapper.to_domain_event
        started = time.perf_counter()
        count = 0
        start = 1
        while True:
            notifications = app.recorder.select_notifications(start=start, limit=page)
            for notification in notifications:
                to_domain_event(notification)
            count += len(notifications)
            if len(notifications) < page:
                break
            start = notifications[-1].id + 1
        return time.perf_counter() - started, count
    finally:
        app.close()
