"""tasktrail's domain: task events, the rules that decide them, and the Scheduler.

>>> from tasktrail.domain import Scheduler, TaskDefinition, Registry, RuleViolation
"""

from .app.phases import PassReport
from .app.run_commands import DispatchReport, ReconcileReport
from .app.scheduler import Scheduler
from .clock import Clock, ManualClock, system_clock
from .errors import (
    ConflictError,
    CorruptEvent,
    InvalidArgument,
    NewerEventVersion,
    Refused,
    RuleViolation,
    StoreError,
    TasktrailError,
    UnknownEventTopic,
    UnknownTask,
)
from .runs.executor import (
    CancelResult,
    Executor,
    InMemoryExecutor,
    JobSnapshot,
    RunSettings,
    SubmitRequest,
)
from .runs.rules import AdmissionRefused, UnknownRun
from .runs.state import Ledger, RunState, client_job_id, ledger_of, local_day
from .store.store import Store, open_store
from .tasks.definitions import BlockedReason, Registry, TaskDefinition, blocked_reason
from .tasks.events import EVENT_TYPES, TaskEvent
from .tasks.evolve import InvalidTransition, evolve
from .tasks.invocation import Invocation
from .tasks.state import Checkpoint, Outcome, TaskState
from .turns.passes import (
    OPERATOR_KEY,
    ControllerPassReport,
    Runtime,
    next_deadline,
    parse_key,
    pending_wakeups,
    role_key,
    task_key,
)
from .turns.state import (
    DEFAULT_TURN_SETTINGS,
    DELIVERY_OUTCOMES,
    LEADER,
    MAX_TASK_CONCURRENCY,
    RoleState,
    StaleCompletion,
    TurnRuleViolation,
    TurnSettings,
    TurnState,
    WakeupState,
    retry_delay_ms,
)
from .world import Draft, World

__all__ = [
    "DEFAULT_TURN_SETTINGS",
    "DELIVERY_OUTCOMES",
    "EVENT_TYPES",
    "LEADER",
    "MAX_TASK_CONCURRENCY",
    "OPERATOR_KEY",
    "AdmissionRefused",
    "BlockedReason",
    "CancelResult",
    "Checkpoint",
    "Clock",
    "ConflictError",
    "ControllerPassReport",
    "CorruptEvent",
    "DispatchReport",
    "Draft",
    "Executor",
    "InMemoryExecutor",
    "InvalidArgument",
    "InvalidTransition",
    "Invocation",
    "JobSnapshot",
    "Ledger",
    "ManualClock",
    "NewerEventVersion",
    "Outcome",
    "PassReport",
    "ReconcileReport",
    "Refused",
    "Registry",
    "RoleState",
    "RuleViolation",
    "RunSettings",
    "RunState",
    "Runtime",
    "Scheduler",
    "StaleCompletion",
    "Store",
    "StoreError",
    "SubmitRequest",
    "TaskDefinition",
    "TaskEvent",
    "TaskState",
    "TasktrailError",
    "TurnRuleViolation",
    "TurnSettings",
    "TurnState",
    "UnknownEventTopic",
    "UnknownRun",
    "UnknownTask",
    "WakeupState",
    "World",
    "blocked_reason",
    "client_job_id",
    "evolve",
    "ledger_of",
    "local_day",
    "next_deadline",
    "open_store",
    "parse_key",
    "pending_wakeups",
    "retry_delay_ms",
    "role_key",
    "system_clock",
    "task_key",
]
