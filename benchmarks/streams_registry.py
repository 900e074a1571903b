"""The definitions :mod:`benchmarks.streams` runs (``tasktrail worker
benchmarks.streams_registry:registry`` for the worker of another process).

- ``paced``: emits ``count`` chunks ``{"i", "t"}`` (``t``: ``time.time()`` when emitted)
  one every ``every_ms`` (its memos), then finishes;
- ``busy``: phases ``a`` and ``b``, each ``BUSY.phase_s`` of sleep then the other's
  name (a checkpoint), counted in ``BUSY.phases``, until ``BUSY.stop`` is set;
- ``flood``: emits ``{"i"}`` at ``FLOOD.per_s`` chunks a second until ``BUSY.stop``.

The counters and the stop flag are this process's: ``busy`` and ``flood`` run in the
benchmark's own process.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tasktrail.domain import Registry, TaskDefinition


@dataclass
class Busy:
    phase_s: float = 0.01
    phases: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Flood:
    per_s: float = 1000.0
    emitted: int = 0


BUSY, FLOOD = Busy(), Flood()


def _paced(inv: Any) -> None:
    count, every_s = inv.memo("count"), inv.memo("every_ms") / 1000.0
    start = time.monotonic()
    for i in range(inv.streamed(), count):
        time.sleep(max(0.0, start + i * every_s - time.monotonic()))
        inv.emit({"i": i, "t": time.time()})
    inv.finish("completed")


def _busy(then: str) -> Any:
    def phase(inv: Any) -> str | None:
        if BUSY.stop.is_set():
            inv.finish("completed")
            return None
        time.sleep(BUSY.phase_s)
        with BUSY.lock:
            BUSY.phases += 1
        return then

    return phase


def _flood(inv: Any) -> None:
    start, i = time.monotonic(), 0
    while not BUSY.stop.is_set():
        time.sleep(max(0.0, start + i / FLOOD.per_s - time.monotonic()))
        inv.emit({"i": i})
        i += 1
    FLOOD.emitted = i
    inv.finish("completed")


registry = Registry(
    [
        TaskDefinition("paced", 1, {"talk": _paced}),
        TaskDefinition("busy", 1, {"a": _busy("b"), "b": _busy("a")}),
        TaskDefinition("flood", 1, {"go": _flood}),
    ]
)
