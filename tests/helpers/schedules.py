"""What the schedule tests share (tests/test_schedules.py, tests/test_schedules_cron.py
and tests/test_schedules_lifecycle.py, issue 42 item 6): the clock's start ``T0`` and a
minute in ms, and the ``clock`` and ``registry`` fixtures that override the suite's
(each of those modules imports both by name: ``fleet`` uses them)."""

from __future__ import annotations

import pytest

from tasktrail.domain import ManualClock, Registry, TaskDefinition

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
MINUTE = 60_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def registry() -> Registry:
    return Registry([TaskDefinition("report", 1, {"go": lambda inv: inv.finish("completed")})])
