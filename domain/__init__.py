"""tasktrail's domain: task events, the rules that decide them, and the Scheduler.

>>> from tasktrail.domain import Scheduler, TaskDefinition, Registry, RuleViolation
"""

from .clock import Clock, ManualClock, system_clock
from .definitions import BlockedReason, Registry, TaskDefinition, blocked_reason
from .errors import (
    ConflictError,
    CorruptEvent,
    InvalidArgument,
    Refused,
    RuleViolation,
    StoreError,
    TasktrailError,
    UnknownEventTopic,
    UnknownTask,
)
from .events import EVENT_TYPES, TaskEvent
from .evolve import InvalidTransition, evolve
from .invocation import Invocation
from .scheduler import PassReport, Scheduler
from .state import Checkpoint, Outcome, TaskState
from .storage import Store, open_store
from .world import Draft, World

__all__ = [
    "EVENT_TYPES",
    "BlockedReason",
    "Checkpoint",
    "Clock",
    "ConflictError",
    "CorruptEvent",
    "Draft",
    "InvalidArgument",
    "InvalidTransition",
    "Invocation",
    "ManualClock",
    "Outcome",
    "PassReport",
    "Refused",
    "Registry",
    "RuleViolation",
    "Scheduler",
    "Store",
    "StoreError",
    "TaskDefinition",
    "TaskEvent",
    "TaskState",
    "TasktrailError",
    "UnknownEventTopic",
    "UnknownTask",
    "World",
    "blocked_reason",
    "evolve",
    "open_store",
    "system_clock",
]
