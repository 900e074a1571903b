"""tasktrail's domain: task events, the rules that decide them, and the Scheduler.

>>> from tasktrail.domain import Scheduler, TaskDefinition, Registry, RuleViolation
"""

from .app.fleet import HeartbeatReport
from .app.phases import PassReport
from .app.scheduler import Scheduler
from .app.worker import TickReport, Worker
from .app.worker_setup import WorkerSetup
from .clock import Clock, ManualClock, system_clock
from .dispatch.run_ticks import DispatchReport, ReconcileReport
from .errors import (
    ClockConflict,
    ConflictError,
    CorruptEvent,
    InvalidArgument,
    InvalidFlowPolicy,
    InvalidPolicy,
    LeaseLost,
    LogReplaced,
    NewerEventVersion,
    PhaseFenced,
    PhaseTimeout,
    Refused,
    RuleViolation,
    StoreError,
    TaskIdTaken,
    TasktrailError,
    UnknownEventTopic,
    UnknownTask,
)
from .frozen import FrozenDict, FrozenList
from .runs.admission import AdmissionRefused
from .runs.executor import (
    ActiveJobError,
    AnswerCommittingError,
    CancelResult,
    DrainError,
    Executor,
    ExecutorError,
    ExecutorPersistenceError,
    GenerationOrderError,
    IdentityConflictError,
    JobNotFoundError,
    JobSnapshot,
    JobStatus,
    OrphanFenceError,
    SubmitError,
    SubmitRequest,
    TransientError,
)
from .runs.gate import DispatchGate, OpenGate, SwitchedGate
from .runs.identity import client_job_id, local_day
from .runs.ledger import Ledger, ledger_of
from .runs.memory_executor import InMemoryExecutor
from .runs.outcomes import SubmitFailed
from .runs.reading import UnknownRun
from .runs.settings import RunSettings
from .runs.state import RunState
from .schedules.state import CronSchedule
from .store.leases import Lease
from .store.store import Store, open_store
from .tasks.ask_inbox import Ask
from .tasks.definitions import BlockedReason, Registry, TaskDefinition, blocked_reason
from .tasks.events import EVENT_TYPES, TaskEvent
from .tasks.evolve import InvalidTransition, evolve
from .tasks.flow import Debounce, Limit, Rate
from .tasks.invocation import Invocation
from .tasks.limits import HeldBack
from .tasks.retry import Retry
from .tasks.retrying import PhaseRetried
from .tasks.state import AskState, Checkpoint, Outcome, StreamState, TaskState
from .tasks.streams import ChunksEmitted, StreamClosed, StreamRefused
from .turns.deadlines import next_deadline
from .turns.delivery import DELIVERY_OUTCOMES, DeliveryOutcome
from .turns.folds import pending_wakeups
from .turns.keys import OPERATOR_KEY, parse_key, role_key, task_key
from .turns.refusals import StaleCompletion, TurnRuleViolation
from .turns.report import ControllerPassReport
from .turns.runtime import Runtime
from .turns.settings import (
    DEFAULT_TURN_SETTINGS,
    MAX_TASK_CONCURRENCY,
    TurnSettings,
    retry_delay_ms,
)
from .turns.state import LEADER, RoleState, TurnState, WakeupState
from .world import Draft, World

__all__ = [
    "DEFAULT_TURN_SETTINGS",
    "DELIVERY_OUTCOMES",
    "EVENT_TYPES",
    "LEADER",
    "MAX_TASK_CONCURRENCY",
    "OPERATOR_KEY",
    "ActiveJobError",
    "AdmissionRefused",
    "AnswerCommittingError",
    "Ask",
    "AskState",
    "BlockedReason",
    "CancelResult",
    "Checkpoint",
    "ChunksEmitted",
    "Clock",
    "ClockConflict",
    "ConflictError",
    "ControllerPassReport",
    "CorruptEvent",
    "CronSchedule",
    "Debounce",
    "DeliveryOutcome",
    "DispatchGate",
    "DispatchReport",
    "Draft",
    "DrainError",
    "Executor",
    "ExecutorError",
    "ExecutorPersistenceError",
    "FrozenDict",
    "FrozenList",
    "GenerationOrderError",
    "HeartbeatReport",
    "HeldBack",
    "IdentityConflictError",
    "InMemoryExecutor",
    "InvalidArgument",
    "InvalidFlowPolicy",
    "InvalidPolicy",
    "InvalidTransition",
    "Invocation",
    "JobNotFoundError",
    "JobSnapshot",
    "JobStatus",
    "Lease",
    "LeaseLost",
    "Ledger",
    "Limit",
    "LogReplaced",
    "ManualClock",
    "NewerEventVersion",
    "OpenGate",
    "OrphanFenceError",
    "Outcome",
    "PassReport",
    "PhaseFenced",
    "PhaseRetried",
    "PhaseTimeout",
    "Rate",
    "ReconcileReport",
    "Refused",
    "Registry",
    "Retry",
    "RoleState",
    "RuleViolation",
    "RunSettings",
    "RunState",
    "Runtime",
    "Scheduler",
    "StaleCompletion",
    "Store",
    "StoreError",
    "StreamClosed",
    "StreamRefused",
    "StreamState",
    "SubmitError",
    "SubmitFailed",
    "SubmitRequest",
    "SwitchedGate",
    "TaskDefinition",
    "TaskEvent",
    "TaskIdTaken",
    "TaskState",
    "TasktrailError",
    "TickReport",
    "TransientError",
    "TurnRuleViolation",
    "TurnSettings",
    "TurnState",
    "UnknownEventTopic",
    "UnknownRun",
    "UnknownTask",
    "WakeupState",
    "Worker",
    "WorkerSetup",
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
