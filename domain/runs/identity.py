"""How a dispatch run is named: its identity, its streams, its client job id and its day.

A **run** is one attempt to hand a task to an executor on a local ``day``. Its
identity is ``task|day|attempt`` (also its id), where ``attempt`` is 1 + the
runs that task already has that day, whatever their status. A run outlives its
task's terminal event, so its events live on a stream of their own,
``run:task|day|attempt``: two writers that mint the same attempt both write
version 1 of that stream, and the second loses (optimistic concurrency). A
task's scheduled time lives on a stream of its own too, ``schedule:task``. The
client job id a run submits, and the local day it belongs to, are derived here
(SPEC.md section 3).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from zoneinfo import ZoneInfo

RUN_STREAM_PREFIX = "run:"
SCHEDULE_STREAM_PREFIX = "schedule:"


def run_identity(task_id: str, day: str, attempt: int) -> str:
    """A run's identity and id: ``task|day|attempt``."""
    return f"{task_id}|{day}|{attempt}"


def run_stream_id(run_id: str) -> str:
    """The stream a run's events are appended to."""
    return f"{RUN_STREAM_PREFIX}{run_id}"


def schedule_stream_id(task_id: str) -> str:
    """The stream a task's scheduled time is kept on."""
    return f"{SCHEDULE_STREAM_PREFIX}{task_id}"


def client_job_id(task_id: str, tz: str, day: str, attempt: int) -> str:
    """The deterministic, UUIDv4-shaped client job id of a run.

    sha256 of ``task|{task}|{tz}|{day}|{attempt}`` (the zone before the day),
    its first 16 bytes as a version-4 UUID (``uuid.UUID(bytes=..., version=4)`` sets
    the version nibble to 4 and the variant bits to ``10``), in its standard
    8-4-4-4-12 lowercase form. A retry or redrive of a run reuses it, which is what
    lets a redrive adopt a job a lost answer left.
    """
    digest = hashlib.sha256(f"task|{task_id}|{tz}|{day}|{attempt}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def local_day(now_ms: float, tz: str) -> str:
    """The calendar date (``YYYY-MM-DD``) in zone ``tz`` at scheduler time ``now_ms``,
    read in whole milliseconds."""
    # runs.whole_ms (dispatcher: a JavaScript date drops a fraction of a ms): a time in the
    # last fraction of a ms before midnight is that day's; as float seconds it would round
    # up to midnight. Zone offsets are whole seconds, so whole seconds decide the date.
    seconds = int(now_ms) // 1000
    return datetime.fromtimestamp(seconds, ZoneInfo(tz)).date().isoformat()
