"""Marks the concurrency benchmark's phases leave, read the same way for both systems.

A worker process (a ``tasktrail worker`` or a DBOS executor) appends one line to the
file named by ``$TASKTRAIL_BENCH_MARKS`` when a task's first phase starts (``S``) and
when its last phase has recorded the task's end (``E``): the kind, the process id, the
wall time and the process's CPU time (every thread). Lines are short writes to a file
opened ``O_APPEND``, so the processes of a run share it without a lock. The
benchmark reads its clock (first start to last end), its count of tasks done and each
process's CPU from them: the same measure on both sides, taken inside the workers.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

WAIT_S = float(os.environ.get("TASKTRAIL_BENCH_WAIT_S", "0.1"))
"""How long each phase waits, as the benchmark sets it (``--phase-ms``; 0 to measure
what the store takes)."""
_PATH = os.environ.get("TASKTRAIL_BENCH_MARKS")
_fd: int | None = None


def mark(kind: str) -> None:
    """Append one mark (``S`` a task started, ``E`` a task ended) to the marks file."""
    global _fd
    if _PATH is None:
        return
    if _fd is None:
        _fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = f"{kind} {os.getpid()} {time.time():.6f} {time.process_time():.6f}\n"
    os.write(_fd, line.encode())


def ended(path: Path) -> int:
    """How many tasks ended so far (the ``E`` lines)."""
    try:
        return path.read_bytes().count(b"E ")  # "E " begins an end line, and only that
    except FileNotFoundError:
        return 0


@dataclass(frozen=True)
class Window:
    """What a run's marks say: tasks ended, wall seconds from the first start to the
    last end, and the CPU seconds the worker processes spent in between."""

    tasks: int
    seconds: float
    cpu_s: float


def window(path: Path) -> Window:
    """Read a run's marks file."""
    starts: list[float] = []
    ends: list[float] = []
    cpu: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        kind, pid, wall, process = line.split()
        (starts if kind == "S" else ends).append(float(wall))
        cpu.setdefault(pid, []).append(float(process))
    spent = sum(max(times) - min(times) for times in cpu.values())
    return Window(len(ends), max(ends) - min(starts), spent)
