"""Scheduler commands for tasks: reserve one for an invocation here (submitting one is
:mod:`.submitting`'s), the decisions a running task takes through that invocation
(checkpoint, memo, wait, sleep, finish), and the operator's acts: abort, retry and the
restart limit (fork is :mod:`.forking`'s), each recorded with who did it and why
(``actor=``, ``reason=``). Each is one pure decision of :mod:`..tasks.decide` run
through the scheduler's decision cycle, mixed into :class:`~.scheduler.Scheduler` as
:class:`TaskCommands`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..errors import InvalidArgument, LeaseLost, PhaseFenced, Refused, RuleViolation
from ..frozen import thawed
from ..tasks import decide
from ..tasks.definitions import Registry, TaskDefinition, definition_fit
from ..tasks.events import Mode, OutcomeStatus, Policy
from ..tasks.invocation import _MISSING, RUNNING_PHASE, Invocation, TaskDecider
from ..tasks.restart_limit import change_restart_limit, check_restart_limit, restart_limit_of
from ..tasks.state import Outcome, TaskState
from ..tasks.stream_buffer import recording_streams
from ..tasks.validation import json_value, shown
from ..world import Draft, World
from .batch import UNRECORDED, OpenBatch
from .group_commit import Call, QueuedDecision

T = TypeVar("T")


class TaskCommands:
    """Task commands, mixed into :class:`~.scheduler.Scheduler`."""

    registry: Registry
    judges_definitions: bool = True
    """Whether this scheduler's registry speaks for the fleet's definitions (rule 13's
    orphaning at an abort); ``False`` for one opened without a registry."""
    _invocations: dict[str, Invocation]
    _failed_migrations: dict[str, TaskDefinition]
    _resumed: set[str]

    if TYPE_CHECKING:
        worker: str
        world: World

        @property
        def _batch(self) -> OpenBatch | None: ...

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _decide_grouped(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _decide_all(self, calls: Sequence[Call]) -> list[QueuedDecision]: ...

        def _is_running(self, task_id: str) -> bool: ...

        def submit_owned(self, owner: str, kind: str, **options: Any) -> str: ...

        def wait_message(  # the Service API's (..service.messages)
            self,
            task_id: str,
            topic: str,
            phase: str | None = None,
            timeout_s: float | None = None,
            attempt: int | None = None,
        ) -> None: ...

        def ask(  # the approval inbox's (..service.asks)
            self,
            task_id: str,
            topic: str,
            request: Any = None,
            phase: str | None = None,
            timeout_s: float | None = None,
            assignees: Sequence[str] | None = None,
            attempt: int | None = None,
        ) -> None: ...

        def task(self, task_id: str) -> TaskState: ...

        def stream_waiting(self, invocation: Invocation) -> None: ...  # service/streams.py
        def flush_streams(self, task_id: str) -> None: ...

        def outcome(self, task_id: str) -> Outcome | None: ...  # service/results.py

        def _catch_up(self) -> None: ...

        def now(self) -> float: ...

        def _context(self) -> decide.Context: ...

        def _readiness(self, draft: Draft, ctx: decide.Context, task: TaskState) -> str: ...

        def _fenced(self) -> bool: ...

        _lock: Any

    # ─── commands ───────────────────────────────────────────────────────────

    def reserve(self, task_id: str) -> Mode | None:
        """Give the task to an invocation here: ``run``, or ``abort`` once marked.

        Returns the mode, or ``None`` when a rule ended the task instead of
        reserving it (rules 12 and 13).
        """
        (outcome,) = self._reserve_all([task_id])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _reserve_all(self, task_ids: Sequence[str]) -> list[Mode | BaseException | None]:
        """:meth:`reserve` each of ``task_ids``, their decisions in one group commit
        (:mod:`.group_commit`); for each, the mode, or the exception it raised."""
        outcomes: list[Mode | BaseException | None] = [None] * len(task_ids)
        calls: dict[int, Call] = {}
        for n, task_id in enumerate(task_ids):
            try:
                if _task_id(task_id) in self._invocations and self._is_running(task_id):
                    raise Refused(
                        "its invocation here is still live; it ends at its next decision",
                        task_id=task_id,
                    )
                migrated_phase = self._migrate_if_needed(task_id)  # may fail it first
                options = {
                    "registry": self.registry,
                    "failed_migrations": dict(self._failed_migrations),
                    "migrated_phase": migrated_phase,
                }
            except Exception as error:  # the caller's to raise
                outcomes[n] = error
                continue
            then = partial(self._reserved, task_id)
            calls[n] = Call(decide.reserve, (task_id,), options, then)
        for n, queued in zip(calls, self._decide_all(list(calls.values())), strict=True):
            outcomes[n] = queued.error or queued.result
        return outcomes

    def _reserved(self, task_id: str, mode: Mode | None) -> None:
        """A reservation was recorded: its invocation, under the lock that recorded it."""
        if mode is not None:
            # The assembled Scheduler is the decider (its awaitable forms included).
            decider = cast("TaskDecider", self)
            invocation = Invocation(decider, task_id, mode, resumed=task_id in self._resumed)
            self._invocations[task_id] = invocation
            self._resumed.discard(task_id)
            batch = self._batch
            if batch is not None:  # recorded once the batch is: its to end if it is not
                batch.reserved.append(invocation)
                UNRECORDED.add(invocation)

    def checkpoint(self, task_id: str, phase: str, attempt: int | None = None) -> None:
        """The running task commits the phase it resumes at (rule 11: progress if new)."""
        self._invocation_decision(task_id, decide.checkpoint, phase, attempt)

    def memo(self, task_id: str, name: str, value: Any = _MISSING) -> Any:
        """Read a memo (``None`` if unset; a copy the caller may change) or, given
        ``value``, record it (running tasks only)."""
        if value is _MISSING:
            if not isinstance(name, str):
                raise InvalidArgument(f"a memo name is a string, not {name!r}", task_id=task_id)
            # A plain copy of the read-only value (..frozen), the phase's to change.
            return thawed(self.task(task_id).memos.get(name))
        self._invocation_decision(task_id, decide.memo, name, value)
        return value

    def wait(
        self,
        task_id: str,
        on: Sequence[str],
        policy: Policy = "all",
        phase: str | None = None,
        attempt: int | None = None,
    ) -> None:
        """The running task waits on ``on`` (rule 7), resuming at the checkpoint
        ``phase`` (default: its current one) and ``attempt``."""
        self._invocation_decision(task_id, decide.wait, on, policy, phase, attempt)

    def sleep(
        self, task_id: str, until: float, phase: str | None = None, attempt: int | None = None
    ) -> None:
        """The running task sleeps until the clock reaches ``until`` (rule 8), resuming
        at the checkpoint ``phase`` (default: its current one) and ``attempt``."""
        self._invocation_decision(task_id, decide.sleep, until, phase, attempt)

    def finish(
        self,
        task_id: str,
        status: OutcomeStatus = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None:
        """The running task decides its outcome; held while it owns live tasks (rule 5).

        ``error`` may be a message, an exception, or ``{"message", "detail"}``; ``result``
        any JSON value the task answers (:meth:`result` returns it), as large as a memo.
        """
        message, detail = _error_fields(error)
        self._invocation_decision(
            task_id,
            decide.finish,
            status,
            message=message,
            detail=detail,
            reason=reason,
            result=result,
        )

    def abort(self, task_id: str, *, actor: str | None = None, reason: str | None = None) -> bool:
        """Put an abort mark on the task and every live descendant (rule 6), recording
        who asked (``actor``) and why (``reason``) on the mark.

        A terminal task is left as it is (rule 4); a task no registered
        definition can take that owns nothing live and is not running ends
        ``orphaned`` at once (rule 13), when this scheduler was opened with a
        registry (one opened without, an operator's, knows no definitions: its
        abort only marks, and the fleet's workers settle the task). Returns whether
        anything was recorded.
        """
        changed: bool = self._decide(
            decide.abort,
            task_id,
            registry=self.registry if self.judges_definitions else None,
            failed_migrations=dict(self._failed_migrations),
            actor=actor,
            why=reason,
        )
        return changed

    def retry(self, task_id: str, *, actor: str | None = None, reason: str | None = None) -> bool:
        """Unpark a task parked at the restart limit (rule 9), recording who did
        (``actor``) and why (``reason``); returns whether it was parked."""
        self._failed_migrations.pop(_task_id(task_id), None)
        parked: bool = self._decide(decide.retry, task_id, actor=actor, why=reason)
        return parked

    @property
    def restart_limit(self) -> int:
        """The restart limit in force (rules 9 and 12): the last recorded by any writer
        of the store (:meth:`configure_restarts`, or an open given ``restart_limit``;
        what other writers appended is folded in first, as for :meth:`task`), else
        :data:`~..tasks.restart_limit.DEFAULT_RESTART_LIMIT`. Setting it is
        :meth:`configure_restarts`."""
        with self._lock:
            self._catch_up()
            return restart_limit_of(self.world)

    @restart_limit.setter
    def restart_limit(self, limit: int) -> None:
        self.configure_restarts(limit)

    def configure_restarts(
        self, limit: int, *, actor: str | None = None, reason: str | None = None
    ) -> int:
        """Set the restart limit: a task cut off ``limit`` times without progress is
        parked (rule 9), an abort handler cut off that often ends faulted (rule 12).
        Returns the limit now in force.

        It decides, so it is recorded (a ``RestartLimitChanged`` event, only when it
        differs from the one in force): every worker of a fleet on the store decides
        with it from then on, and a replay as of any position knows which tasks were
        parked. A raised limit unparks at the next pass, for every worker. A limit that
        is not an int >= 1 raises :class:`~..errors.InvalidArgument`, appending nothing.
        ``actor`` and ``reason``: who set it and why, recorded on the event.
        """
        check_restart_limit(limit)
        recorded: int = self._decide(change_restart_limit, limit, actor=actor, why=reason)
        return recorded

    def _migrate_if_needed(self, task_id: str) -> str | None:
        known = self.world.tasks.get(task_id)  # no lock where no definition migrates
        definition = self.registry.get(known.kind) if known is not None else None
        if known is not None and (definition is None or definition.migrate is None):
            return None
        task = self.task(task_id)
        definition = self.registry.get(task.kind)
        if task.status == "running" or definition is None or definition.migrate is None:
            return None
        if definition_fit(task, definition, self._failed_migrations) != "migrate":
            return None
        with self._lock:
            # pi-durable migrates only where a reservation goes ahead: a parked task, a
            # sleep not due or a wait not over is refused first, and an abort handler
            # cut off at the limit ends faulted (rule 12) before its definition is read.
            ctx = self._context()
            if self._readiness(Draft(self.world), ctx, task) != "ready" or (
                task.abort_requested and task.restarts >= ctx.restart_limit
            ):
                return None
        self._failed_migrations.pop(task_id, None)  # a new definition: tried afresh
        try:
            phase = definition.migrate(task)
        except Exception:
            # Blocked as migration_failed until retry() or a new definition.
            self._migration_failed(task_id, definition)
            return None
        if phase is not None and (not isinstance(phase, str) or not phase):
            self._migration_failed(task_id, definition)
            return None
        return phase

    def _migration_failed(self, task_id: str, definition: TaskDefinition) -> None:
        self._forget_ended_migrations()  # held to the live tasks, with or without a Worker
        self._failed_migrations[task_id] = definition

    def _forget_ended_migrations(self) -> None:
        """Drop the failed migrations of tasks that ended: an ended task never runs again
        (rule 4), and a process that runs for months must not hold one per task it saw
        fail a migration (held until retry(), a new definition or the task's end)."""
        with self._lock:
            live = self.world.live
            for task_id in [t for t in self._failed_migrations if t not in live]:
                del self._failed_migrations[task_id]

    def _invocation_decision(
        self, task_id: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> None:
        """Decide ``fn`` for the running task's invocation (awaited: :mod:`..invoking`)."""
        self._not_timed_out(task_id)
        try:
            decided, reads, invocation = self._invocation_call(task_id, fn)
            with recording_streams(invocation, decided) as decided:
                self._decide_grouped(decided, task_id, *args, **kwargs)
            _marked_read(invocation, reads)
        except RuleViolation as refusal:
            self._refused_invocation(task_id, refusal)
            raise
        self._ended_unless_running(task_id)

    def _not_timed_out(self, task_id: str) -> None:
        phase = RUNNING_PHASE.get()
        # 24. A phase past its timeout was retried or ended without it: fenced for good.
        if phase is not None and phase.timed_out is not None and phase.task_id == task_id:
            raise PhaseFenced(task_id, phase.timed_out.phase, phase.timed_out.timeout_s)

    def _invocation_call(
        self, task_id: str, fn: Callable[..., Any]
    ) -> tuple[Callable[..., Any], list[int], Invocation | None]:
        """What an invocation's decision takes: ``fn``, marking what it read (rule 21);
        the reads; the invocation. Raises :class:`LeaseLost` once this worker is fenced."""
        if self._fenced():  # peers may have taken its tasks: decide nothing for them
            raise LeaseLost(task_id, self.worker, None)
        invocation = self._invocations.get(task_id) if isinstance(task_id, str) else None
        reads = list(invocation.unmarked_reads) if invocation is not None else []
        # 21. What the invocation read is marked read with this decision, in its append.
        return (decide.reading(reads, fn) if reads else fn), reads, invocation

    def _refused_invocation(self, task_id: str, refusal: RuleViolation) -> None:
        # Rules 1 to 3, and fencing (a fleet's rule 9), end the invocation that decided.
        if refusal.rule in (1, 2, 3) or isinstance(refusal, LeaseLost):
            ended = self._invocations.pop(task_id, None)
            if ended is not None:
                ended.ended = True
                ended.lost = isinstance(refusal, LeaseLost)

    def _ended_unless_running(self, task_id: str) -> None:
        if not self._is_running(task_id):
            ended = self._invocations.pop(task_id, None)
            if ended is not None:
                ended.ended = True


def _marked_read(invocation: Invocation | None, reads: list[int]) -> None:
    """The decision that marked ``reads`` read was recorded."""
    if reads and invocation is not None:
        del invocation.unmarked_reads[: len(reads)]


def _task_id(task_id: object) -> str:
    """A task id as commands take it: a non-empty string."""
    if not isinstance(task_id, str) or not task_id:
        raise InvalidArgument(f"a task id must be a non-empty string, not {shown(task_id)}")
    return task_id


def _message(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception:  # its str() fails (or recurses, on a deep argument): its type says
        text = ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _error_fields(error: Any) -> tuple[str | None, Any]:
    if error is None:
        return None, None
    if isinstance(error, BaseException):
        return _message(error), None
    if isinstance(error, str):
        return error, None
    if isinstance(error, dict) and "message" in error:
        message = error["message"]
        if not isinstance(message, str):
            # Checked as any JSON value a task records (a memo): then put in words.
            message = str(json_value(message, "error message", None))
        return message, error.get("detail")
    raise InvalidArgument(
        f"error must be a message, an exception or {{'message', 'detail'}}, not {shown(error)}"
    )
