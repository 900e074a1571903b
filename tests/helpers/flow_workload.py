"""The registry the flow-control fleet test runs in ``tasktrail worker`` processes
(tests/test_flow_fleet.py), with ``tests/helpers`` on ``PYTHONPATH``:

    tasktrail worker flow_workload:registry --store STORE ...

``tenant_job``: one phase that waits ``$TASKTRAIL_TEST_PHASE_S`` seconds of wall time
(default 0.03) and finishes; at most :data:`MAX_RUNNING` of its tasks with the same
``tenant`` memo run at once across the fleet (rule 33).
"""

from __future__ import annotations

import os
import time
from typing import Any

from tasktrail.domain import Limit, Registry, TaskDefinition

MAX_RUNNING = 2


def _work(inv: Any) -> None:
    time.sleep(float(os.environ.get("TASKTRAIL_TEST_PHASE_S", "0.03")))
    inv.finish("completed")


registry = Registry(
    [
        TaskDefinition(
            "tenant_job",
            1,
            {"work": _work},
            limit=Limit(key=lambda memos: memos["tenant"], max_running=MAX_RUNNING),
        )
    ]
)
