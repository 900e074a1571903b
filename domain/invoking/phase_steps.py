"""One invocation's run through its phases, as steps its driver performs.

What an invocation does between its phases (the rules of ``run_pass``,
:mod:`..app.phases`: stop once the task is not running here, the scheduler closes or
drains, or an abort mark came; fault a phase that names no phase, returns without a
decision, or spins; route one that raised or overran through its retry policy) is
written once, as a generator: :meth:`PhaseSteps._steps` yields what it needs done and
is sent what came of it.

- :class:`CallHandler`: call the phase (or abort) handler; sent what it returned, or
  thrown what it raised.
- :class:`MoveOn`: the phase returned the name of the next one: its checkpoint.
- :class:`Commit`: anything else that takes the scheduler's lock: a fault, a retry or
  the end of a failed phase, a drained task noted, a finish without an abort handler.

Two drivers perform them. :func:`drive` does each in the calling thread (``run_pass``,
and a worker's sync invocations: ``domain/app/invocations.py``). A worker's ``async``
invocation is driven by a coroutine on its event loop (:mod:`.loop_invocations`): a
handler's coroutine is awaited there, a checkpoint goes to the group commit through
its awaitable form, and a :class:`Commit` runs in a small pool of threads, so the loop
never waits for the lock. Both see the same rules, in the same order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, Union

from ..commands.task_commands import _message
from ..errors import LeaseLost, PhaseTimeout, RuleViolation
from ..tasks import decide
from ..tasks.definitions import Registry, TaskDefinition
from ..tasks.events import Mode, OutcomeStatus
from ..tasks.invocation import Invocation
from ..tasks.state import TaskState
from ..tasks.streams import decisions
from ..telemetry import live as telemetry
from ..world import World
from .phase_calls import AwaitableRunner, call_handler

if TYPE_CHECKING:
    from ..service.retries import Overran

T = TypeVar("T")
MAX_PHASE_STEPS = 10_000
"""A run invocation that commits this many checkpoints in one pass is faulted
(reason ``step_limit``): a phase that never moves on would otherwise spin."""


@dataclass(frozen=True, slots=True)
class CallHandler:
    """Call ``handler(invocation)``, bounded by ``limit`` (``overran``: what a sync
    handler's timer calls at the deadline)."""

    handler: Callable[[Any], Any]
    limit: PhaseTimeout | None = None
    overran: Overran | None = None


@dataclass(frozen=True, slots=True)
class MoveOn:
    """Checkpoint ``phase``, the name the handler returned."""

    phase: str


@dataclass(frozen=True, slots=True)
class Commit:
    """Run ``action``, which takes the scheduler's lock (and may append)."""

    action: Callable[[], Any]


Step = Union[CallHandler, MoveOn, Commit]  # noqa: UP007 (a runtime alias, for isinstance)
Steps = Generator[Step, Any, None]


def advance(steps: Steps, sent: Any = None, error: BaseException | None = None) -> Step | None:
    """The next step, after sending ``sent`` (or throwing ``error``) into ``steps``;
    ``None`` once they are over. What the steps do not catch is raised here."""
    try:
        return steps.throw(error) if error is not None else steps.send(sent)
    except StopIteration:
        return None


def drive(
    steps: Steps,
    perform: Callable[[Step], Any],
    first: Step | None = None,
    hand_over: Callable[[Step], bool] | None = None,
) -> Step | None:
    """Perform ``steps`` in this thread, from ``first`` if given, until they end
    (``None``) or ``hand_over`` takes one: that step is returned, not performed, for
    another driver to go on from."""
    step = first if first is not None else advance(steps)
    while step is not None:
        if hand_over is not None and hand_over(step):
            return step
        sent: Any = None
        error: BaseException | None = None
        try:
            sent = perform(step)
        except Exception as raised:  # the steps' to handle, as a phase's error
            error = raised
        step = advance(steps, sent, error)
    return None


class PhaseSteps:
    """:meth:`_steps` and what they decide, mixed into the Scheduler (see the module
    docstring)."""

    registry: Registry
    world: World
    closing: bool
    draining: bool
    _invocations: dict[str, Invocation]
    _drained: set[str]
    _resumed: set[str]

    if TYPE_CHECKING:
        _lock: threading.RLock

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _is_running(self, task_id: str) -> bool: ...
        def _fenced(self) -> bool: ...
        def _task_now(self, task_id: str) -> TaskState: ...
        def _record_streams_of(self, task_id: str) -> None: ...

        def _phase_limit(
            self, invocation: Invocation, definition: TaskDefinition | None, report: Any
        ) -> tuple[PhaseTimeout | None, Overran | None]: ...

        def _phase_failed(
            self,
            invocation: Invocation,
            definition: TaskDefinition | None,
            message: str,
            cause: str,
            report: Any,
        ) -> None: ...

        def finish(
            self,
            task_id: str,
            status: OutcomeStatus = "completed",
            error: Any = None,
            *,
            reason: str | None = None,
        ) -> None: ...

    def _steps(self, invocation: Invocation, mode: Mode, report: Any) -> Steps:
        """The steps of ``invocation``'s run, in ``mode``, reporting to ``report``."""
        definition = self.registry.get(self._task_now(invocation.task_id).kind)
        if mode == "abort":
            return self._abort_steps(invocation, definition, report)
        return self._phase_steps(invocation, definition, report)

    def _perform(self, invocation: Invocation, run: AwaitableRunner, step: Step) -> Any:
        """Do ``step`` in this thread; ``run`` runs what an ``async`` handler returned."""
        if isinstance(step, CallHandler):
            with telemetry.phase_context(self, invocation.task_id):
                return call_handler(step.handler, invocation, run, step.limit, step.overran)
        if isinstance(step, MoveOn):
            invocation.checkpoint(step.phase)
            return None
        return step.action()

    def _end_invocation(self, invocation: Invocation) -> None:
        """The invocation's run is over: it decides nothing more, and no longer counts
        as this scheduler's (unless the task was reserved for another one meanwhile)."""
        invocation.ended = True
        if self._invocations.get(invocation.task_id) is not invocation:
            return  # its last decision let it go (the usual end): and it is never put back
        with self._lock:
            if self._invocations.get(invocation.task_id) is invocation:
                del self._invocations[invocation.task_id]

    def _phase_steps(
        self, invocation: Invocation, definition: TaskDefinition | None, report: Any
    ) -> Steps:
        task_id = invocation.task_id
        noticed = definition
        for step in range(MAX_PHASE_STEPS):
            task = self._task_now(task_id)
            # 1. Not running here, or no longer this invocation's: its own decision ended
            # it (a wait or sleep), and the task may run again already, reserved anew
            # here or by another worker; 2. closing (or draining: a worker that stops
            # starts no further phase; its close returns the task; the phase it was
            # reserved for runs, whether or not its driver began before the stop), 3.
            # abort-marked.
            ended = invocation.ended or not self._is_running(task_id)
            if ended or self.closing or task.abort_requested:
                return
            if self.draining and step > 0:
                yield Commit(partial(self._drain, task_id))
                return
            # An invocation keeps the definition it started with; a registry change
            # meanwhile is reported once per definition it changed to (pi-durable).
            current = self.registry.get(task.kind)
            if current is not definition and current is not noticed:
                noticed = current
                why = "missing_definition" if current is None else "replaced_definition"
                report.outdated[task_id] = why
            assert task.checkpoint is not None
            phase = task.checkpoint.phase
            handler = definition.phases.get(phase) if definition else None
            if handler is None:
                message = f"no phase {phase!r} in {task.kind}"
                yield Commit(partial(self._fault, task_id, message, "unknown_phase", report))
                return
            before = decisions(task)  # what its phase emits to a stream decides nothing
            limit, overran = self._phase_limit(invocation, definition, report)
            try:
                result = yield CallHandler(handler, limit, overran)
                if isinstance(result, str):
                    yield MoveOn(result)
            except RuleViolation as refusal:
                if refusal.task_id == task_id and (
                    refusal.rule in (1, 2, 3, 24) or isinstance(refusal, LeaseLost)
                ):
                    return  # the invocation has ended (or was taken); nothing to record
                failed = (invocation, definition, str(refusal), "threw", report)
                yield Commit(partial(self._phase_failed, *failed))
                return
            except Exception as error:  # retried under its policy, else its task faults
                cause = "timeout" if isinstance(error, PhaseTimeout) else "threw"
                failed = (invocation, definition, _message(error), cause, report)
                yield Commit(partial(self._phase_failed, *failed))
                return
            after = self._task_now(task_id)
            if (
                after.status == "running"
                and decisions(after) == before
                and not after.abort_requested
            ):
                message = f"phase {phase!r} returned without a decision"
                yield Commit(partial(self._fault, task_id, message, "no_decision", report))
                return
        message = f"more than {MAX_PHASE_STEPS} checkpoints in one pass"
        yield Commit(partial(self._fault, task_id, message, "step_limit", report))

    def _abort_steps(
        self, invocation: Invocation, definition: TaskDefinition | None, report: Any
    ) -> Steps:
        task_id = invocation.task_id
        task = self._task_now(task_id)
        if definition is None or definition.abort is None:
            reason = task.abort_reason or "abort_requested"
            yield Commit(partial(self.finish, task_id, "aborted", reason=reason))
            return
        try:
            yield CallHandler(definition.abort)
        except RuleViolation as refusal:
            ended = refusal.rule in (1, 2) or isinstance(refusal, LeaseLost)
            if not (refusal.task_id == task_id and ended):
                yield Commit(partial(self._fault, task_id, str(refusal), "threw", report))
            return
        except Exception as error:
            yield Commit(partial(self._fault, task_id, _message(error), "threw", report))
            return
        if self._is_running(task_id) and not self.closing:
            message = f"abort handler of task {task_id} returned without a terminal outcome"
            yield Commit(partial(self._fault, task_id, message, "no_outcome", report))

    def _drain(self, task_id: str) -> None:
        with self._lock:
            self._drained.add(task_id)  # the close that follows returns it

    def _fault(self, task_id: str, message: str, reason: str, report: Any) -> None:
        self._record_streams_of(task_id)  # what its phase emitted first (rule 29)
        # A fenced worker records nothing for a task a peer may have taken (rule 9).
        if self._is_running(task_id) and not self.closing and not self._fenced():
            try:
                self._decide(decide.fault, task_id, message, reason)
            except RuleViolation as refusal:
                if refusal.rule != 3:  # an abort mark came first: no fault, the handler runs
                    raise
            else:
                report.faulted[task_id] = reason
        self._invocations.pop(task_id, None)
