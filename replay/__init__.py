"""Replay: any tasktrail log back into scheduler state, as of any position or time.

>>> from tasktrail.replay import replay, SchedulerState
>>> state = replay("trail.db", until=None)      # also a .jsonl export   # doctest: +SKIP
"""

from . import verify_flow as verify_flow  # registers rule 33's check with verify
from .diff import StateDiff, TaskDiff, diff
from .explain import Step, explain, story
from .exporting import export
from .importing import import_log
from .log import LogError, LogReader, Skipped, StoreReader, read_log
from .state import Problem, SchedulerState, Until, fold, replay
from .verify import CHECKS, VerifyReport, Violation, check, verify

__all__ = [
    "CHECKS",
    "LogError",
    "LogReader",
    "Problem",
    "SchedulerState",
    "Skipped",
    "StateDiff",
    "Step",
    "StoreReader",
    "TaskDiff",
    "Until",
    "VerifyReport",
    "Violation",
    "check",
    "diff",
    "explain",
    "export",
    "fold",
    "import_log",
    "read_log",
    "replay",
    "story",
    "verify",
]
