"""Constants of the dispatcher's seventh round tests (seed 003, glasses-server's
task-dispatcher; tests/test_seed_dispatcher_7_*.py): the instant they start at, its day,
and the spans of time they step by."""

from __future__ import annotations

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
DAY = "2026-01-01"
SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY_MS = 24 * HOUR
SPACING = 2 * MINUTE
"""The default submit spacing."""
