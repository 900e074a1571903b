"""What the dispatch run ledger's tests (``test_runs_*.py``) share: a manual clock's
moment and spans of time, an executor in memory, and a scheduler handing runs to it."""

from __future__ import annotations

import pytest

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
DAY = "2026-01-01"
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY_MS = 24 * HOUR


@pytest.fixture
def executor() -> InMemoryExecutor:
    """An executor in memory that fails only when told to."""
    return InMemoryExecutor()


@pytest.fixture
def runs(scheduler: Scheduler, clock: ManualClock, executor: InMemoryExecutor) -> Scheduler:
    """A scheduler at 2026-01-01 08:00 UTC handing runs to ``executor``, default settings."""
    clock.set(T0)
    scheduler.configure_runs(executor=executor, settings=RunSettings())
    return scheduler
