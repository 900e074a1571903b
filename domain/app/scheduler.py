"""The Scheduler application: commands in, events out, phases run.

Every command reads the scheduler's :class:`~.world.World`, lets a pure
function of :mod:`.decide` emit events into a draft, appends the draft's events
to the store in one transaction, and only then folds them into the world. A
refused command raises and appends nothing; a command that lost a race with
another writer raises :class:`~.errors.ConflictError`, appends nothing, and
leaves the scheduler refreshed so that deciding again sees the winner's events.
"""

from __future__ import annotations

import math
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..clock import Clock, system_clock
from ..errors import (
    ConflictError,
    InvalidArgument,
    Refused,
    RuleViolation,
    UnknownTask,
)
from ..store.store import Durability, Store, open_store
from ..tasks import decide
from ..tasks.definitions import BlockedReason, Registry, blocked_reason, definition_fit
from ..tasks.events import Mode, OutcomeStatus, Policy, TaskEvent
from ..tasks.invocation import _MISSING, Invocation
from ..tasks.state import TaskState
from ..telemetry import live as telemetry
from ..world import Draft, World
from .batch import BatchCommands
from .run_commands import RunCommands
from .turn_commands import TurnCommands

T = TypeVar("T")
DEFAULT_RESTART_LIMIT = 3
MAX_PHASE_STEPS = 10_000
"""A run invocation that commits this many checkpoints in one pass is faulted
(reason ``step_limit``): a phase that never moves on would otherwise spin."""


@dataclass
class PassReport:
    """What one :meth:`Scheduler.run_pass` did."""

    reserved: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)

    @property
    def progressed(self) -> bool:
        """Whether the pass changed anything."""
        return bool(self.reserved or self.ended)


class Scheduler(BatchCommands, TurnCommands, RunCommands):
    """A durable task scheduler kept as an event-sourced state machine.

    Open one with :meth:`open`; it loads the store's tasks and runs recovery
    (rule 9). Commands append events and return once they are recorded.
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = system_clock,
        registry: Registry | None = None,
        restart_limit: int = DEFAULT_RESTART_LIMIT,
    ) -> None:
        self.store = store
        self.clock = clock
        self.registry = registry if registry is not None else Registry()
        self.restart_limit = restart_limit
        self.world = World()
        self.position = 0
        """The last store position folded into :attr:`world`."""
        self.parked: list[str] = []
        """Tasks the last recovery parked at the restart limit (rule 9)."""
        self.events_written = 0
        self.closing = False
        self._closed = False
        self._invocations: dict[str, Invocation] = {}
        self._failed_migrations: set[str] = set()
        self._resumed: set[str] = set()
        self._lock = threading.RLock()
        """Serializes decisions: controller passes decide from several threads."""

    # ─── opening and closing ────────────────────────────────────────────────

    @classmethod
    def open(
        cls,
        location: str | os.PathLike[str] | Store,
        *,
        clock: Clock = system_clock,
        registry: Registry | None = None,
        restart_limit: int = DEFAULT_RESTART_LIMIT,
        durability: Durability = "full",
    ) -> Scheduler:
        """Open the store at a SQLite path or ``postgresql://`` URL, load it, recover.

        Recovery (rule 9) puts every task a crash left ``running`` back to
        ``pending``, counting a restart; a task at ``restart_limit`` restarts
        without an abort mark is parked (listed in :attr:`parked`) until
        :meth:`retry`.
        """
        if (
            isinstance(restart_limit, bool)
            or not isinstance(restart_limit, int)
            or restart_limit < 1
        ):
            raise InvalidArgument(f"restart_limit must be an int >= 1, not {restart_limit!r}")
        if not callable(clock):
            raise InvalidArgument(f"clock must be a function returning ms, not {clock!r}")
        if registry is not None and not isinstance(registry, Registry):
            raise InvalidArgument(f"registry must be a Registry, not {registry!r}")
        store = (
            location if isinstance(location, Store) else open_store(location, durability=durability)
        )
        scheduler = cls(store, clock=clock, registry=registry, restart_limit=restart_limit)
        try:
            scheduler.refresh()
            scheduler._resumed = set(scheduler.world.live)
            scheduler.parked = scheduler._decide(decide.recover)
        except BaseException:
            if not isinstance(location, Store):
                store.close()
            raise
        return scheduler

    def close(self) -> None:
        """Stop: tasks this scheduler was running go back to ``pending`` with no
        restart counted (rule 10); later commands are refused (rule 2)."""
        if self._closed:
            return
        running = [tid for tid in self._invocations if self._is_running(tid)]
        self._decide(decide.stop, running)
        for invocation in self._invocations.values():
            invocation.ended = True
        self._invocations.clear()
        self.closing = True
        self._closed = True
        self._flush_batch()  # closed inside a batch: what it decided is appended first
        self.store.close()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def configure_telemetry(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        """Send this scheduler's phase spans and metrics to these OpenTelemetry providers
        (``None``: the process-wide defaults, see :mod:`.telemetry`)."""
        telemetry.configure_telemetry(self, tracer_provider, meter_provider)

    # ─── reading ────────────────────────────────────────────────────────────

    def now(self) -> float:
        """The scheduler clock."""
        return self.clock()

    def task(self, task_id: str) -> TaskState:
        """The current state of one task."""
        state = self.world.get(_task_id(task_id))
        if state is None:
            self.refresh()
            state = self.world.get(task_id)
        if state is None:
            raise UnknownTask(task_id)
        return state

    def tasks(self, status: str | None = None) -> list[TaskState]:
        """Every task (or those with ``status``), in submission order."""
        return [t for t in self.world.tasks.values() if status is None or t.status == status]

    def history(self, task_id: str) -> list[TaskEvent]:
        """Every event of one task, oldest first, as stored."""
        self.task(task_id)
        return self.store.stream(task_id)

    def blocked_reason(self, task_id: str) -> BlockedReason | None:
        """Rule 13: why the task cannot run here, or ``None``."""
        return blocked_reason(
            self.task(task_id), self.registry, self.restart_limit, self._failed_migrations
        )

    def wake(self) -> dict[str, Any]:
        """Rule 15: ``{"active": bool, "at": ms | None}``.

        ``active`` while some task can run now or is running; ``at`` is the
        earliest sleep not yet due.
        """
        ctx = self._context()
        draft = Draft(self.world)
        active = bool(self._invocations)
        at: float | None = None
        for task_id in self.world.live:
            task = self.world.tasks[task_id]
            state = self._readiness(draft, ctx, task)
            if state == "sleeping":
                assert task.until is not None
                at = task.until if at is None else min(at, task.until)
            elif state in ("ready", "running"):
                active = True
        return {"active": active, "at": at}

    def refresh(self) -> int:
        """Fold in events other writers appended since the last read; returns how many."""
        folded = 0
        for recorded in self.store.read(after=self.position):
            event = recorded.event
            have = self.world.version_of(event.stream_id(), type(event).task_stream)
            # An event at or below the version we hold is our own, folded when appended.
            if recorded.originator_version > have:
                self.world.apply_stored(recorded.position, event, recorded.originator_version)
                folded += 1
            self.position = recorded.position
        return folded

    def retrying(self, command: Callable[[], T], attempts: int = 5) -> T:
        """Run ``command`` again, on fresh state, each time it loses a race (up to ``attempts``)."""
        for attempt in range(attempts):
            try:
                return command()
            except ConflictError:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    # ─── commands ───────────────────────────────────────────────────────────

    def submit(
        self,
        kind: str,
        *,
        version: int | None = None,
        owner: str | None = None,
        phase: str | None = None,
        id: str | None = None,
        conversation_id: str | None = None,
        project_ids: Sequence[str] = (),
        trace: dict[str, str] | None = None,
        abandon_on_restart: bool = False,
    ) -> str:
        """Create a ``pending`` task; returns its id.

        ``version`` and ``phase`` default to the registered definition's
        version and first phase. ``owner`` makes it owned work of that task
        (rules 5 and 6).
        """
        definition = self.registry.get(kind) if isinstance(kind, str) else None
        if version is None:
            version = definition.version if definition is not None else 1
        if phase is None:
            if definition is None or not definition.phases:
                raise InvalidArgument(
                    f"submit({kind!r}) needs phase=...: "
                    "no registered definition names a first phase"
                )
            phase = next(iter(definition.phases))
        task_id = id if id is not None else uuid.uuid4().hex
        if trace is None:  # submitted while a span is current: keep its carrier
            trace = telemetry.current_carrier()
        self._decide(
            decide.submit,
            task_id=task_id,
            kind=kind,
            version=version,
            phase=phase,
            owner_id=owner,
            conversation_id=conversation_id,
            project_ids=project_ids,
            trace=trace,
            abandon_on_restart=abandon_on_restart,
        )
        return task_id

    def reserve(self, task_id: str) -> Mode | None:
        """Give the task to an invocation here: ``run``, or ``abort`` once marked.

        Returns the mode, or ``None`` when a rule ended the task instead of
        reserving it (rules 12 and 13).
        """
        if _task_id(task_id) in self._invocations and self._is_running(task_id):
            raise Refused(
                "its invocation here is still live; it ends at its next decision",
                task_id=task_id,
            )
        migrated_phase = self._migrate_if_needed(task_id)
        mode: Mode | None = self._decide(
            decide.reserve,
            task_id,
            registry=self.registry,
            failed_migrations=frozenset(self._failed_migrations),
            migrated_phase=migrated_phase,
        )
        if mode is not None:
            self._invocations[task_id] = Invocation(
                self, task_id, mode, resumed=task_id in self._resumed
            )
            self._resumed.discard(task_id)
        return mode

    def checkpoint(self, task_id: str, phase: str, attempt: int | None = None) -> None:
        """The running task commits the phase it resumes at (rule 11: progress if new)."""
        self._invocation_decision(task_id, decide.checkpoint, phase, attempt)

    def memo(self, task_id: str, name: str, value: Any = _MISSING) -> Any:
        """Read a memo (``None`` if unset) or, given ``value``, record it (running tasks only)."""
        if value is _MISSING:
            if not isinstance(name, str):
                raise InvalidArgument(f"a memo name is a string, not {name!r}", task_id=task_id)
            return self.task(task_id).memos.get(name)
        self._invocation_decision(task_id, decide.memo, name, value)
        return value

    def wait(
        self,
        task_id: str,
        on: Sequence[str],
        policy: Policy = "all",
        phase: str | None = None,
    ) -> None:
        """The running task waits on ``on`` (rule 7), resuming at ``phase``."""
        self._invocation_decision(task_id, decide.wait, on, policy, phase)

    def sleep(self, task_id: str, until: float, phase: str | None = None) -> None:
        """The running task sleeps until the clock reaches ``until`` (rule 8)."""
        self._invocation_decision(task_id, decide.sleep, until, phase)

    def finish(
        self,
        task_id: str,
        status: OutcomeStatus = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
    ) -> None:
        """The running task decides its outcome; held while it owns live tasks (rule 5).

        ``error`` may be a message, an exception, or ``{"message", "detail"}``.
        """
        message, detail = _error_fields(error)
        self._invocation_decision(
            task_id, decide.finish, status, message=message, detail=detail, reason=reason
        )

    def abort(self, task_id: str) -> bool:
        """Put an abort mark on the task and every live descendant (rule 6).

        A terminal task is left as it is (rule 4). Returns whether anything
        was recorded.
        """
        changed: bool = self._decide(decide.abort, task_id)
        return changed

    def retry(self, task_id: str) -> bool:
        """Unpark a task parked at the restart limit (rule 9); returns whether it was parked."""
        self._failed_migrations.discard(_task_id(task_id))
        parked: bool = self._decide(decide.retry, task_id)
        return parked

    # ─── running phases ─────────────────────────────────────────────────────

    def run_pass(self) -> PassReport:
        """Reserve every task that can run now and run its registered phases.

        A phase that raises ends the task ``faulted`` (reason ``threw``); an
        abort handler that returns without an outcome ends it ``faulted``
        (reason ``no_outcome``).
        """
        report = PassReport()
        if self.closing:
            return report
        ctx = self._context()
        draft = Draft(self.world)
        candidates = [
            task_id
            for task_id in list(self.world.tasks)
            if task_id in self.world.live
            and self._readiness(draft, ctx, self.world.tasks[task_id]) == "ready"
        ]
        for task_id in candidates:
            task = self.world.tasks[task_id]
            if not task.live or task_id in self._invocations:
                continue
            try:
                mode = self.reserve(task_id)
            except Refused as refusal:
                report.blocked[task_id] = refusal.reason
                continue
            if mode is None:
                report.ended.append(task_id)
                continue
            report.reserved.append(task_id)
            self._run(task_id, mode)
            if not self.world.tasks[task_id].live:
                report.ended.append(task_id)
            if self.closing:
                break
        return report

    def run_until_idle(self, max_passes: int = 10_000) -> list[PassReport]:
        """Run passes until one changes nothing (sleeps not yet due stay asleep)."""
        reports = []
        for _ in range(max_passes):
            report = self.run_pass()
            reports.append(report)
            if not report.progressed:
                break
        return reports

    def _run(self, task_id: str, mode: Mode) -> None:
        invocation = self._invocations[task_id]
        task = self.world.tasks[task_id]
        definition = self.registry.get(task.kind)
        try:
            if mode == "abort":
                self._run_abort(invocation, definition)
            else:
                self._run_phases(invocation, definition)
        finally:
            invocation.ended = True
            if self._invocations.get(task_id) is invocation:
                del self._invocations[task_id]

    def _run_phases(self, invocation: Invocation, definition: Any) -> None:
        task_id = invocation.task_id
        for _ in range(MAX_PHASE_STEPS):
            task = self.world.tasks[task_id]
            # 1. Not running, 2. closing, 3. abort-marked: the invocation ends.
            if task.status != "running" or self.closing or task.abort_requested:
                return
            assert task.checkpoint is not None
            handler = definition.phases.get(task.checkpoint.phase) if definition else None
            if handler is None:
                self._fault(
                    task_id, f"no phase {task.checkpoint.phase!r} in {task.kind}", "unknown_phase"
                )
                return
            before = task.events
            try:
                with telemetry.phase_context(self, task_id):
                    result = handler(invocation)
                if isinstance(result, str):
                    invocation.checkpoint(result)
            except RuleViolation as refusal:
                if refusal.task_id == task_id and refusal.rule in (1, 2, 3):
                    return  # the invocation has ended; nothing to record
                self._fault(task_id, str(refusal), "threw")
                return
            except Exception as error:  # a phase that raises ends the task faulted
                self._fault(task_id, _message(error), "threw")
                return
            after = self.world.tasks[task_id]
            if after.status == "running" and after.events == before and not after.abort_requested:
                self._fault(
                    task_id,
                    f"phase {task.checkpoint.phase!r} returned without a decision",
                    "no_decision",
                )
                return
        self._fault(task_id, f"more than {MAX_PHASE_STEPS} checkpoints in one pass", "step_limit")

    def _run_abort(self, invocation: Invocation, definition: Any) -> None:
        task_id = invocation.task_id
        task = self.world.tasks[task_id]
        if definition is None or definition.abort is None:
            self.finish(task_id, "aborted", reason=task.abort_reason or "abort_requested")
            return
        try:
            with telemetry.phase_context(self, task_id):
                definition.abort(invocation)
        except RuleViolation as refusal:
            if not (refusal.task_id == task_id and refusal.rule in (1, 2)):
                self._fault(task_id, str(refusal), "threw")
            return
        except Exception as error:
            self._fault(task_id, _message(error), "threw")
            return
        if self._is_running(task_id) and not self.closing:
            self._fault(
                task_id,
                f"abort handler of task {task_id} returned without a terminal outcome",
                "no_outcome",
            )

    def _fault(self, task_id: str, message: str, reason: str) -> None:
        if self._is_running(task_id) and not self.closing:
            self._decide(decide.fault, task_id, message, reason)
        self._invocations.pop(task_id, None)

    def _migrate_if_needed(self, task_id: str) -> str | None:
        task = self.task(task_id)
        definition = self.registry.get(task.kind)
        if task.status == "running" or definition is None or definition.migrate is None:
            return None
        if definition_fit(task, definition, self._failed_migrations) != "migrate":
            return None
        try:
            phase = definition.migrate(task)
        except Exception:
            # Blocked as migration_failed until retry() or a new definition.
            self._failed_migrations.add(task_id)
            return None
        if phase is not None and (not isinstance(phase, str) or not phase):
            self._failed_migrations.add(task_id)
            return None
        return phase

    # ─── the decision cycle ─────────────────────────────────────────────────

    def _context(self) -> decide.Context:
        now = self.clock()
        # Every event carries this time: one that is not a finite number would
        # be recorded as null and read back differently.
        if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
            raise InvalidArgument(f"the clock returned {now!r}, not a finite time in ms")
        return decide.Context(now=now, restart_limit=self.restart_limit, closing=self.closing)

    def _readiness(self, draft: Draft, ctx: decide.Context, task: TaskState) -> str:
        if task.status == "running" and task.id in self._invocations:
            return "running"
        return decide.readiness(draft, ctx, task, self.registry, self._failed_migrations)

    def _is_running(self, task_id: str) -> bool:
        task = self.world.get(task_id)
        return task is not None and task.status == "running"

    def _invocation_decision(
        self, task_id: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> None:
        try:
            self._decide(fn, task_id, *args, **kwargs)
        except RuleViolation as refusal:
            # Rules 1 to 3 end the invocation that tried to decide.
            if refusal.rule in (1, 2, 3):
                ended = self._invocations.pop(task_id, None)
                if ended is not None:
                    ended.ended = True
            raise
        if not self._is_running(task_id):
            ended = self._invocations.pop(task_id, None)
            if ended is not None:
                ended.ended = True

    def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self._lock:
            if self._closed:
                raise RuleViolation(2, "the scheduler is closed; open the store again")
            try:
                return self._decide_once(fn, *args, **kwargs)
            except UnknownTask:
                # Another writer may have submitted it since we last read.
                if self.refresh() == 0:
                    raise
                return self._decide_once(fn, *args, **kwargs)

    def _decide_once(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        draft = Draft(self.world)
        result = fn(draft, self._context(), *args, **kwargs)
        self._commit(draft.events, draft.states, draft.guards() if draft.events else None)
        return result

    def _commit(
        self,
        events: list[TaskEvent],
        states: Sequence[Any] | None = None,
        guards: dict[str, int] | None = None,
    ) -> None:
        """Append ``events`` (in a :meth:`batch`: queue them), then fold them into the
        world; ``states`` are the draft's states after each, folded already;
        ``guards`` the tasks the decision read, at the versions it read them."""
        if not events:
            return
        versions = []
        next_version: dict[str, int] = {}
        for event in events:
            stream_id = event.stream_id()
            current = next_version.get(stream_id)
            if current is None:
                current = self.world.version_of(stream_id, type(event).task_stream)
            next_version[stream_id] = current + 1
            versions.append(current + 1)
        batch = self._batch
        if batch is not None:
            batch.add(events, versions, guards)  # appended when the batch exits
        else:
            try:
                positions = self.store.append(events, versions, guards=guards)
            except ConflictError:
                self.refresh()
                raise
        telemetry.committed(self, events, versions)  # never raises
        for n, event in enumerate(events):
            self.world.apply(event, states[n] if states is not None else None)
        if batch is not None:
            return
        self.events_written += len(events)
        # Contiguous positions right after ours mean no other writer came between.
        if positions[0] == self.position + 1 and positions[-1] == self.position + len(positions):
            self.position = positions[-1]


def _task_id(task_id: object) -> str:
    """A task id as commands take it: a non-empty string."""
    if not isinstance(task_id, str) or not task_id:
        raise InvalidArgument(f"a task id must be a non-empty string, not {task_id!r}")
    return task_id


def _message(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _error_fields(error: Any) -> tuple[str | None, Any]:
    if error is None:
        return None, None
    if isinstance(error, BaseException):
        return _message(error), None
    if isinstance(error, str):
        return error, None
    if isinstance(error, dict) and "message" in error:
        return str(error["message"]), error.get("detail")
    raise InvalidArgument(
        f"error must be a message, an exception or {{'message', 'detail'}}, not {error!r}"
    )
