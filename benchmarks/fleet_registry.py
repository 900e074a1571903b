"""The registry the fleet benchmark runs in ``tasktrail worker`` processes.

A ``tree`` submits three ``leaf`` tasks, waits on all of them, then finishes; a
``leaf`` finishes at once, unless ``$TASKTRAIL_BENCH_PHASE_MS`` asks each phase
to take that much wall time (the recovery benchmark does, so that a kill lands
mid-phase). Four tasks a tree, six phases.
"""

from __future__ import annotations

import os
import time
from typing import Any

from tasktrail.domain import Registry, TaskDefinition

_PHASE_S = float(os.environ.get("TASKTRAIL_BENCH_PHASE_MS", "0")) / 1000


def _work() -> None:
    if _PHASE_S:
        time.sleep(_PHASE_S)


def _plan(inv: Any) -> None:
    _work()
    inv.wait([inv.submit("leaf") for _ in range(3)], "all", then="done")


def _done(inv: Any) -> None:
    _work()
    inv.finish("completed")


registry = Registry(
    [
        TaskDefinition("tree", 1, {"plan": _plan, "done": _done}),
        TaskDefinition("leaf", 1, {"go": _done}),
    ]
)
TASKS_PER_TREE = 4
