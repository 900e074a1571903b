"""The registry the flow-control benchmark runs in ``tasktrail worker`` processes.

``tenant_call``: one phase that waits ``$TASKTRAIL_BENCH_PHASE_MS`` of wall time (a
model's answer, say; default 200) and finishes; at most ``$TASKTRAIL_BENCH_LIMIT``
(default 3) of its tasks with the same ``tenant`` memo run at once across the fleet
(rule 33).
"""

from __future__ import annotations

import os
import time
from typing import Any

from tasktrail.domain import Limit, Registry, TaskDefinition


def make_registry(limit: int, phase_ms: float) -> Registry:
    """The definitions, with ``limit`` per tenant and phases of ``phase_ms``. The
    submitter's counts: a task's limit is recorded when it is submitted."""

    def call(inv: Any) -> None:
        time.sleep(phase_ms / 1000)
        inv.finish("completed")

    limit_by_tenant = Limit(key=lambda memos: memos["tenant"], max_running=limit)
    return Registry([TaskDefinition("tenant_call", 1, {"call": call}, limit=limit_by_tenant)])


registry = make_registry(
    int(os.environ.get("TASKTRAIL_BENCH_LIMIT", "3")),
    float(os.environ.get("TASKTRAIL_BENCH_PHASE_MS", "1000")),
)
