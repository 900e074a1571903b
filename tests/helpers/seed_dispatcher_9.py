"""Constants of the dispatcher's ninth round tests (seed 003, glasses-server's
task-dispatcher; tests/test_seed_dispatcher_9_*.py): the instant they start at, its day
and the next, the last instant before that midnight, the spans of time they step by and
the default windows."""

from __future__ import annotations

import math

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
DAY, NEXT_DAY = "2026-01-01", "2026-01-02"
SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
MIDNIGHT = T0 + 16 * HOUR
"""2026-01-02 00:00 UTC: where 2026-01-01 ends in the default zone."""
LAST_INSTANT = math.nextafter(float(MIDNIGHT), 0.0)
"""The last clock value (a float, a fraction of a ms) before that midnight."""
SPACING = 2 * MINUTE
"""The default submit spacing."""
LOST = 6 * HOUR
"""The default lost window (``job_lost_ms``)."""
CATCH_UP = 3 * HOUR
"""The default catch-up window (``catch_up_ms``)."""
