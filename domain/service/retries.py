"""Timeouts and retries of phases (the Service API issue, item 4; rules 23 and 24), mixed
into the ``Scheduler`` as :class:`RetryCommands`.

A phase that raised, or ran past its ``timeout_s``, goes through its definition's
:class:`~..tasks.retry.Retry` policy: tried again at its checkpoint after the backoff,
as a sleep (:func:`~..tasks.retrying.retry_phase`), until ``max_attempts``; then its
task ends ``failed``. Without a policy it faults its task as a phase always did (reason
``threw``, or ``timeout``). The jitter is drawn here, from :attr:`retry_random`, and
the delay it gives is recorded on the event: the fold draws nothing.

An ``async`` phase past its timeout is cancelled (``asyncio.timeout``). A sync one
cannot be: at its deadline a timer fences its invocation (its later decisions are
refused under rule 24, :class:`~..errors.PhaseFenced`, appending nothing), lets the
task go, and records the retry or the end from the timer's thread; the phase's thread,
and so its worker slot, stays taken until the phase returns.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..commands.task_commands import _message
from ..errors import LeaseLost, PhaseTimeout, RuleViolation
from ..tasks.definitions import TaskDefinition
from ..tasks.invocation import Invocation
from ..tasks.retrying import retry_phase

T = TypeVar("T")
log = logging.getLogger("tasktrail.worker")

Overran = Callable[[], None]
"""What a phase's timer calls at its deadline (from the timer's thread)."""


class RetryCommands:
    """Routing a failed phase through its retry policy, mixed into the ``Scheduler``."""

    closing: bool
    _invocations: dict[str, Invocation]
    _retry_random: random.Random | None = None

    if TYPE_CHECKING:
        world: Any

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _is_running(self, task_id: str) -> bool: ...
        def _fenced(self) -> bool: ...
        def _fault(self, task_id: str, message: str, reason: str, report: Any) -> None: ...
        def _record_streams_of(self, task_id: str) -> None: ...

    @property
    def retry_random(self) -> random.Random:
        """Where every retry's jitter is drawn from: this scheduler's own
        ``random.Random``. Seed it (``s.retry_random.seed(7)``) or set another for a
        test that checks the delays; a replay never draws (the delays are recorded)."""
        if self._retry_random is None:
            self._retry_random = random.Random()
        return self._retry_random

    @retry_random.setter
    def retry_random(self, source: random.Random) -> None:
        self._retry_random = source

    def _phase_limit(
        self, invocation: Invocation, definition: TaskDefinition | None, report: Any
    ) -> tuple[PhaseTimeout | None, Overran | None]:
        """The timeout of the phase ``invocation`` is about to run (``None``: none), and
        what its timer does at the deadline."""
        if definition is None or (definition.timeout_s is None and not definition.phase_timeouts):
            return None, None  # the usual case, at no cost: no read of the task
        task = self.world.get(invocation.task_id)
        phase = task.checkpoint.phase if task is not None and task.checkpoint else None
        timeout_s = definition.timeout_for(phase) if phase is not None else None
        if timeout_s is None or phase is None:
            return None, None
        limit = PhaseTimeout(phase, timeout_s)
        return limit, lambda: self._phase_overran(invocation, definition, limit, report)

    def _phase_overran(
        self,
        invocation: Invocation,
        definition: TaskDefinition | None,
        limit: PhaseTimeout,
        report: Any,
    ) -> None:
        """A sync phase ran past its timeout: fence its invocation (rule 24), let its
        task go, and retry or end it as a phase that raised ``limit`` (rule 23)."""
        invocation.timed_out = limit  # first: a decision it takes from now on is refused
        invocation.ended = True
        task_id = invocation.task_id
        if self._invocations.get(task_id) is invocation:
            del self._invocations[task_id]  # the retry may run here while this phase hangs
        try:
            self._phase_failed(invocation, definition, _message(limit), "timeout", report)
        except Exception:  # the store away, say: the task stays running here, stranded
            log.exception("task %s: the timeout of phase %r was not recorded", task_id, limit.phase)

    def _phase_failed(
        self,
        invocation: Invocation,
        definition: TaskDefinition | None,
        message: str,
        cause: str,
        report: Any,
    ) -> None:
        """A run invocation's phase failed: ``cause`` ``threw`` (``message`` its error)
        or ``timeout``. Retried under its policy (rule 23); without one, its task
        faults with reason ``cause``, as a phase that raised always did."""
        task_id = invocation.task_id
        if invocation.timed_out is not None and cause == "threw":
            return  # fenced: its timeout was recorded, what it did later is not (rule 24)
        self._record_streams_of(task_id)  # what the phase emitted before it failed
        task = self.world.get(task_id)
        phase = task.checkpoint.phase if task is not None and task.checkpoint else None
        retry = definition.retry_for(phase) if definition is not None and phase else None
        if retry is None:
            self._fault(task_id, message, cause, report)
            return
        # As a fault: a fenced worker records nothing for a task a peer may hold (rule 9).
        if self._is_running(task_id) and not self.closing and not self._fenced():
            draw = self.retry_random.random()
            try:
                self._decide(
                    retry_phase, task_id, retry=retry, message=message, cause=cause, draw=draw
                )
            except RuleViolation as refusal:
                # Ended meanwhile (1), closing (2), taken (9) or abort-marked (3): the
                # abort handler runs next, and a mark beats the retry.
                if refusal.rule not in (1, 2, 3) and not isinstance(refusal, LeaseLost):
                    raise
        if self._invocations.get(task_id) is invocation:
            del self._invocations[task_id]
