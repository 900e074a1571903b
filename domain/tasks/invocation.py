"""What a phase handler is given: the invocation that owns a running task."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from ..errors import ConflictError, PhaseTimeout
from ..frozen import thawed
from .events import Mode, OutcomeStatus, Policy
from .messages import next_unread
from .state import Outcome, TaskState

_MISSING: Any = object()
T = TypeVar("T")


class TaskDecider(Protocol):
    """What an invocation decides through: the scheduler's task reads and commands."""

    @property
    def worker(self) -> str: ...

    def task(self, task_id: str) -> TaskState: ...

    def now(self) -> float: ...

    def checkpoint(self, task_id: str, phase: str, attempt: int | None = None) -> None: ...

    def memo(self, task_id: str, name: str, value: Any = _MISSING) -> Any: ...

    def wait(
        self,
        task_id: str,
        on: Sequence[str],
        policy: Policy = "all",
        phase: str | None = None,
        attempt: int | None = None,
    ) -> None: ...

    def sleep(
        self, task_id: str, until: float, phase: str | None = None, attempt: int | None = None
    ) -> None: ...

    def finish(
        self,
        task_id: str,
        status: OutcomeStatus = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None: ...

    def outcome(self, task_id: str) -> Outcome | None: ...

    def submit_owned(self, owner: str, kind: str, **options: Any) -> str: ...

    def wait_message(
        self,
        task_id: str,
        topic: str,
        phase: str | None = None,
        timeout_s: float | None = None,
        attempt: int | None = None,
    ) -> None: ...

    # The awaitable forms (issue 43): the same decisions, the event loop free meanwhile.

    async def checkpoint_async(
        self, task_id: str, phase: str, attempt: int | None = None
    ) -> None: ...

    async def memo_async(self, task_id: str, name: str, value: Any = _MISSING) -> Any: ...

    async def wait_async(
        self,
        task_id: str,
        on: Sequence[str],
        policy: Policy = "all",
        phase: str | None = None,
        attempt: int | None = None,
    ) -> None: ...

    async def sleep_async(
        self, task_id: str, until: float, phase: str | None = None, attempt: int | None = None
    ) -> None: ...

    async def finish_async(
        self,
        task_id: str,
        status: OutcomeStatus = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None: ...

    async def submit_owned_async(self, owner: str, kind: str, **options: Any) -> str: ...

    async def wait_message_async(
        self,
        task_id: str,
        topic: str,
        phase: str | None = None,
        timeout_s: float | None = None,
        attempt: int | None = None,
    ) -> None: ...


class Invocation:
    """One invocation of one task, in ``run`` or ``abort`` mode.

    A phase decides through it: ``checkpoint`` the next phase, ``wait`` on
    other tasks or ``wait_message`` for a message, ``sleep``, or ``finish`` with an
    outcome; it may ``submit`` tasks it owns, keep ``memo`` values and read its
    ``message`` values. Each call is one scheduler
    decision, recorded before it returns. Once the task stops running (it
    waits, sleeps or ends) or is abort-marked during a run, the invocation has
    ended and further decisions raise :class:`~.errors.RuleViolation`.

    Each decision has an awaitable form for ``async`` phases (``await
    inv.checkpoint_async("next")``, ``finish_async``, ``memo_async``, ``wait_async``,
    ``sleep_async``, ``wait_message_async``, ``submit_async``): the same decision,
    recorded before the await returns, while the event loop runs the other phases. The
    plain forms work from an ``async`` phase too, holding the loop for one command.
    Reads (``task``, ``phase``, a memo's value, ``message``, ``outcome``) are plain:
    a moment under the scheduler's lock.
    """

    def __init__(self, scheduler: TaskDecider, task_id: str, mode: Mode, *, resumed: bool) -> None:
        self.scheduler = scheduler
        self.task_id = task_id
        self.mode = mode
        self.resumed = resumed
        """Whether this is the first invocation of the task since the store was opened."""
        self.ended = False
        self.lost = False
        """Whether another worker took the task (this worker's lease expired): its
        decisions raise :class:`~..errors.LeaseLost` and record nothing."""
        self.unmarked_reads: list[int] = []
        """The messages :meth:`message` read (their ``seq``) that its next decision
        marks read (rule 21)."""
        self.timed_out: PhaseTimeout | None = None
        """Set when its phase ran past its timeout (rule 24): its decisions raise
        :class:`~..errors.PhaseFenced` and record nothing."""

    @property
    def worker(self) -> str:
        """The worker (scheduler process of a fleet) running this invocation."""
        return self.scheduler.worker

    @property
    def task(self) -> TaskState:
        """The task as last recorded."""
        return self.scheduler.task(self.task_id)

    @property
    def phase(self) -> str | None:
        """The phase the task is at."""
        checkpoint = self.task.checkpoint
        return checkpoint.phase if checkpoint is not None else None

    def now(self) -> float:
        """The scheduler clock, in ms since the epoch."""
        return self.scheduler.now()

    def checkpoint(self, phase: str, attempt: int | None = None) -> None:
        """Commit the phase to run next (or the same one again, which is not progress)."""
        _deciding(lambda: self.scheduler.checkpoint(self.task_id, phase, attempt))

    def memo(self, name: str, value: Any = _MISSING) -> Any:
        """Read the memo ``name`` (``None`` if unset) or, given ``value``, record it."""
        if value is _MISSING:
            return self.scheduler.memo(self.task_id, name)
        return _deciding(lambda: self.scheduler.memo(self.task_id, name, value))

    def wait(
        self,
        on: Sequence[str],
        policy: Policy = "all",
        then: str | None = None,
        attempt: int | None = None,
    ) -> None:
        """Wait on tasks, resuming at ``then`` (default: the current phase) with
        ``attempt`` as the checkpoint's attempt."""
        _deciding(
            lambda: self.scheduler.wait(
                self.task_id, on, policy=policy, phase=then, attempt=attempt
            )
        )

    def sleep(self, until: float, then: str | None = None, attempt: int | None = None) -> None:
        """Sleep until the clock reaches ``until``, resuming at ``then`` (default: the
        current phase) with ``attempt`` as the checkpoint's attempt (a retry's backoff)."""
        _deciding(lambda: self.scheduler.sleep(self.task_id, until, phase=then, attempt=attempt))

    def finish(
        self,
        status: str = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None:
        """Decide the outcome: ``completed``, ``failed`` or ``aborted``; ``result`` is
        what the task answers its caller (any JSON value, as large as a memo)."""
        _deciding(
            lambda: self.scheduler.finish(
                self.task_id,
                status,  # type: ignore[arg-type]
                error=error,
                reason=reason,
                result=result,
            )
        )

    def wait_message(
        self, topic: str, phase: str | None = None, timeout_s: float | None = None
    ) -> None:
        """Wait for a message on ``topic`` (a wait: the invocation ends and frees its
        slot), resuming at ``phase`` (default: the current one) once one is unread, at
        once if one is already, or after ``timeout_s`` seconds without one (rule 21).
        The phase resumed then reads it with :meth:`message`."""
        _deciding(
            lambda: self.scheduler.wait_message(
                self.task_id, topic, phase=phase, timeout_s=timeout_s
            )
        )

    def message(self, topic: str) -> Any:
        """The value of the oldest unread message on ``topic`` this invocation has not
        read yet, or ``None`` (none came: a wait's timeout). A plain copy. It is marked
        read when the invocation's next decision is recorded, in the same append: a
        crash before that leaves it unread, and the phase reads it again (rule 21)."""
        found = next_unread(self.task, topic, self.unmarked_reads)
        if found is None:
            return None
        self.unmarked_reads.append(found.seq)
        return thawed(found.value)

    def outcome(self, task_id: str) -> Outcome | None:
        """The outcome (status, result, error) of a task this one waited on, or
        ``None`` while it has none: how an owner collects its children's answers."""
        return self.scheduler.outcome(task_id)

    def submit(self, kind: str, **options: Any) -> str:
        """Submit a task this one owns; returns its id. A decision of this invocation:
        once it has ended (rules 1 and 3), refused like the others. ``options`` are
        ``Scheduler.submit``'s: with ``key=`` (rule 18), a phase run again (after a
        restart) gets the task it submitted before, and nothing is recorded."""
        return _deciding(lambda: self.scheduler.submit_owned(self.task_id, kind, **options))

    # ─── the awaitable forms ────────────────────────────────────────────────

    async def checkpoint_async(self, phase: str, attempt: int | None = None) -> None:
        """:meth:`checkpoint`, awaited."""
        await _deciding_async(lambda: self.scheduler.checkpoint_async(self.task_id, phase, attempt))

    async def memo_async(self, name: str, value: Any = _MISSING) -> Any:
        """:meth:`memo`: recording ``value`` is awaited (a read is the plain one)."""
        if value is _MISSING:
            return self.scheduler.memo(self.task_id, name)
        return await _deciding_async(lambda: self.scheduler.memo_async(self.task_id, name, value))

    async def wait_async(
        self,
        on: Sequence[str],
        policy: Policy = "all",
        then: str | None = None,
        attempt: int | None = None,
    ) -> None:
        """:meth:`wait`, awaited."""
        await _deciding_async(
            lambda: self.scheduler.wait_async(
                self.task_id, on, policy=policy, phase=then, attempt=attempt
            )
        )

    async def sleep_async(
        self, until: float, then: str | None = None, attempt: int | None = None
    ) -> None:
        """:meth:`sleep`, awaited."""
        await _deciding_async(
            lambda: self.scheduler.sleep_async(self.task_id, until, phase=then, attempt=attempt)
        )

    async def finish_async(
        self,
        status: str = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None:
        """:meth:`finish`, awaited."""
        await _deciding_async(
            lambda: self.scheduler.finish_async(
                self.task_id,
                status,  # type: ignore[arg-type]
                error=error,
                reason=reason,
                result=result,
            )
        )

    async def wait_message_async(
        self, topic: str, phase: str | None = None, timeout_s: float | None = None
    ) -> None:
        """:meth:`wait_message`, awaited."""
        await _deciding_async(
            lambda: self.scheduler.wait_message_async(
                self.task_id, topic, phase=phase, timeout_s=timeout_s
            )
        )

    async def submit_async(self, kind: str, **options: Any) -> str:
        """:meth:`submit`, awaited."""
        return await _deciding_async(
            lambda: self.scheduler.submit_owned_async(self.task_id, kind, **options)
        )


RUNNING_PHASE: ContextVar[Invocation | None] = ContextVar("tasktrail_phase", default=None)
"""The invocation whose phase handler runs in this context (a thread, or an ``async``
phase's task): a decision it takes after its timeout is fenced (rule 24)."""

DECISION_ATTEMPTS = 5
"""How often an invocation's decision is taken again after losing a race with another
writer (each refused append wrote nothing, and left the scheduler refreshed)."""


def _deciding(decide: Callable[[], T]) -> T:
    """Take a phase's decision, again on fresh state each time another writer's append
    came first (:class:`~..errors.ConflictError`): a phase is not faulted for another
    worker's timing. A rule that refuses it on fresh state raises as it would have."""
    for attempt in range(DECISION_ATTEMPTS):
        try:
            return decide()
        except ConflictError:
            if attempt == DECISION_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


async def _deciding_async(decide: Callable[[], Awaitable[T]]) -> T:
    """:func:`_deciding` for an awaitable decision."""
    for attempt in range(DECISION_ATTEMPTS):
        try:
            return await decide()
        except ConflictError:
            if attempt == DECISION_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
