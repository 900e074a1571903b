"""Scheduler commands for agent Turns, Leader wakeups and passes (SPEC.md section 2)."""

from __future__ import annotations


class TurnCommands:
    """Turn, wakeup and pass commands, mixed into :class:`~.scheduler.Scheduler`."""
