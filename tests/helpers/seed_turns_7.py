"""What the seventh-round yui Turn tests (seed 001, yui 0.13.9 -> 0.14.0) share: the
Leader wake windows. The tests are tests/test_seed_turns_7_*.py; docs/seed-fidelity.md,
"Round seven (Turns: delivery outcomes, retries, force windows)", says what changed."""

from __future__ import annotations

from tasktrail.domain.turns.settings import TurnSettings

AGGREGATION = TurnSettings().aggregation_window_ms  # yui's LEADER_WAKE_AGGREGATION_MS
FORCE = TurnSettings().force_window_ms  # yui's LEADER_WAKE_FORCE_MS
