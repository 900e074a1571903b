"""What the tests of yui's behaviour where tasktrail once differed (issue 16; seeds 000
and 001) share: the default Turn windows and a runtime that delivers every Turn. The
tests are tests/test_seed_yui_delivery.py, _wakeups.py, _wakeup_deadlines.py,
_cleanups.py and _full_passes.py; docs/seed-fidelity.md writes down the rules."""

from __future__ import annotations

from typing import Any

from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings

AGGREGATION = TurnSettings().aggregation_window_ms
FORCE = TurnSettings().force_window_ms
STALL = TurnSettings().stall_window_ms
DIAGNOSTIC = TurnSettings().diagnostic_after_ms


class Delivering(Runtime):
    """Delivers every Turn (``outcome``), remembering what it was handed."""

    def __init__(self, outcome: str = "delivered") -> None:
        self.outcome = outcome
        self.delivered: list[tuple[str, str, str]] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.delivered.append((task_id, role, turn_id))
        return self.outcome
