"""Task definitions, the registry that holds them, and blocked reasons (rule 13)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .flow import Limit, Rate, check_flow_policies
from .retry import Retry, check_policies, check_timeout
from .state import TaskState

if TYPE_CHECKING:
    from .invocation import Invocation

PhaseHandler = Callable[["Invocation"], Any]
"""A phase: called with the invocation running it. It decides through the
invocation (``checkpoint``, ``wait``, ``sleep``, ``finish``) or returns the name
of the next phase as a shorthand for ``checkpoint``."""

AbortHandler = Callable[["Invocation"], Any]
"""Runs once an abort-marked task's owned work is gone; must ``finish`` the task."""

Migrate = Callable[[TaskState], str | None]
"""Takes a task recorded under an older version; returns the phase to resume at
(``None`` keeps the current one) or raises to refuse (``migration_failed``)."""

BlockedReason = Literal[
    "missing_definition", "version_too_old", "migration_failed", "restart_limit"
]


@dataclass(frozen=True)
class TaskDefinition:
    """What a kind of task does: its phases by name, and how it aborts and migrates.

    ``version`` is recorded on every task submitted under it. A task recorded
    under an older version runs only through ``migrate``; one recorded under a
    newer version than the registry has is blocked (``version_too_old``).

    ``timeout_s`` bounds each run of a phase handler and ``retry`` tries a phase that
    raised or overran again (rules 23-24); ``phase_timeouts`` and ``phase_retries``
    override them for the phases they name (``None`` there: none for that phase).
    Neither by default: a phase that raises faults its task, as it always did.

    ``limit`` and ``rate`` hold its tasks back from a phase per key (rules 33, 34): at
    most ``Limit.max_running`` running at once with the same key, across every worker on
    the store; phase starts per key within ``Rate``'s token bucket. Each task's keys are
    computed from its memos when it is submitted and recorded (rule 36 checks both).
    """

    kind: str
    version: int
    phases: Mapping[str, PhaseHandler] = field(default_factory=dict)
    abort: AbortHandler | None = None
    migrate: Migrate | None = None
    timeout_s: float | None = None
    retry: Retry | None = None
    phase_timeouts: Mapping[str, float | None] = field(default_factory=dict)
    phase_retries: Mapping[str, Retry | None] = field(default_factory=dict)
    limit: Limit | None = None
    rate: Rate | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise ValueError("TaskDefinition.kind must be a non-empty string")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"TaskDefinition {self.kind}: version must be an int >= 1")
        for name in self.phases:
            if not isinstance(name, str) or not name:
                raise ValueError(f"TaskDefinition {self.kind}: phase names must be non-empty")
        check_timeout(self.timeout_s, f"TaskDefinition {self.kind}: timeout_s")
        check_policies(self.kind, self.phases, self.retry, self.phase_timeouts, self.phase_retries)
        check_flow_policies(self.kind, self.limit, self.rate)

    def timeout_for(self, phase: str) -> float | None:
        """How long a run of ``phase`` may take, in seconds (``None``: no bound)."""
        return self.phase_timeouts.get(phase, self.timeout_s)

    def retry_for(self, phase: str) -> Retry | None:
        """How ``phase`` is tried again when it raises or overruns (``None``: never)."""
        return self.phase_retries.get(phase, self.retry)


class Registry:
    """The task definitions a scheduler can run, one per kind.

    Registering a new version of a kind replaces the old one; tasks recorded
    under the old version then need the new one's ``migrate``.
    """

    def __init__(self, definitions: Iterable[TaskDefinition] = ()) -> None:
        self._definitions: dict[str, TaskDefinition] = {}
        for definition in definitions:
            self.register(definition)

    def register(self, definition: TaskDefinition) -> TaskDefinition:
        """Add (or replace) the definition of ``definition.kind``; returns it."""
        self._definitions[definition.kind] = definition
        return definition

    def unregister(self, kind: str) -> None:
        """Forget the definition of ``kind``; its tasks become ``missing_definition``."""
        self._definitions.pop(kind, None)

    def get(self, kind: str) -> TaskDefinition | None:
        """The definition of ``kind``, if registered."""
        return self._definitions.get(kind)

    def __contains__(self, kind: object) -> bool:
        return kind in self._definitions

    def __iter__(self) -> Iterator[TaskDefinition]:
        return iter(self._definitions.values())

    def __len__(self) -> int:
        return len(self._definitions)


def parked(task: TaskState, restart_limit: int) -> bool:
    """Rule 9: cut off ``restart_limit`` times without progress and without an abort mark."""
    return not task.abort_requested and task.restarts >= restart_limit


def parked_now(task: TaskState, restart_limit: int) -> bool:
    """Rule 13 as far as the restart limit goes (what a reader without the definitions
    can tell): a live task parked at ``restart_limit``; a running, completing or
    ended task never is."""
    return task.status not in ("running", "completing", "terminal") and parked(task, restart_limit)


def migration_failed(
    task_id: str, definition: TaskDefinition, failed_migrations: Iterable[str]
) -> bool:
    """Whether ``definition``'s migration of the task failed here. ``failed_migrations``
    maps each task to the definition whose ``migrate`` failed (or, as before, names
    the tasks): a definition registered since is tried afresh (pi-durable)."""
    if isinstance(failed_migrations, Mapping):
        return failed_migrations.get(task_id) is definition
    return task_id in failed_migrations


def definition_fit(
    task: TaskState, definition: TaskDefinition | None, failed_migrations: Iterable[str] = ()
) -> BlockedReason | Literal["same", "migrate"]:
    """Whether ``definition`` can take ``task``: as is, through ``migrate``, or why not."""
    if definition is None:
        return "missing_definition"
    if definition.version < task.version:
        return "version_too_old"
    if definition.version > task.version:
        # 13. A failed migration blocks the task until retry() or a new definition.
        if definition.migrate is None or migration_failed(task.id, definition, failed_migrations):
            return "migration_failed"
        return "migrate"
    return "same"


def blocked_reason(
    task: TaskState,
    registry: Registry,
    restart_limit: int,
    failed_migrations: Iterable[str] = (),
) -> BlockedReason | None:
    """Rule 13: why a live task cannot run here, computed, never stored.

    A running or completing task, and one abort-marked by a request (which
    runs its handler or ends ``orphaned``), is never blocked.
    """
    if task.status in ("running", "completing", "terminal"):
        return None
    if task.request_marked:
        return None
    if parked(task, restart_limit):
        return "restart_limit"
    fit = definition_fit(task, registry.get(task.kind), failed_migrations)
    return None if fit in ("same", "migrate") else fit  # type: ignore[return-value]
