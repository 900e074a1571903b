"""Scheduler commands for dispatch runs and their ledger (SPEC.md section 3)."""

from __future__ import annotations


class RunCommands:
    """Dispatch-run commands, mixed into :class:`~.scheduler.Scheduler`."""
