"""What the retry and timeout tests share (tests/test_retries.py and
tests/test_retries_timeouts.py): a phase that finishes its task, and a task's recorded
retries."""

from __future__ import annotations

from typing import Any

from tasktrail.domain import PhaseRetried, Scheduler


def finish(inv: Any) -> None:
    inv.finish("completed")


def retries_of(s: Scheduler, task_id: str) -> list[PhaseRetried]:
    return [e for e in s.store.stream(task_id) if isinstance(e, PhaseRetried)]
