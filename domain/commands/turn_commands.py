"""Scheduler commands for agent Turns, Leader wakeups and passes (SPEC.md section 2).

Each command runs one pure decision of the rules in :mod:`..turns`
through the scheduler's decision cycle: refused commands raise and append
nothing; the others append their events atomically before returning. The one
refusal that *is* recorded is a stale completion (:class:`~.turns.StaleCompletion`,
raised after its :class:`~.turns.TurnCompletionRefused` event is appended).

Settings (windows and limits, :class:`~.turns.TurnSettings`) are
:attr:`TurnCommands.turn_settings`; change them with
:meth:`TurnCommands.configure_turns`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar
from weakref import WeakValueDictionary

from ..clock import Clock
from ..errors import InvalidArgument
from ..turns import (
    checks,
    deadlines,
    delivery,
    engine,
    folds,
    liveness,
    task_pass,
    wakeups,
)
from ..turns import rules as turn_rules
from ..turns.delivery import DeliveryDecision
from ..turns.engine import Maintenance
from ..turns.queue import PassQueue
from ..turns.refusals import StaleCompletion
from ..turns.report import CleanupReport, ControllerPassReport
from ..turns.rules import CompletionStatus
from ..turns.runtime import Runtime
from ..turns.settings import TurnSettings, change_turn_settings, turn_settings_of
from ..turns.state import RoleState, TaskPassRetry, TurnState, WakeupState
from ..turns.wakeups import WakeupDispatch, WakeupRequestStatus
from ..world import Draft, World
from .cleanup_commands import CleanupCommands

if TYPE_CHECKING:
    from ..tasks.context import Context
    from ..tasks.state import TaskState

T = TypeVar("T")


class TurnCommands(CleanupCommands):
    """Turn, wakeup and pass commands, mixed into :class:`~.scheduler.Scheduler`.

    Roles need no declaring: a role exists once its first Turn starts. Turn ids
    are ``<role>.<n>`` (the role's n-th Turn), so a replay names the same Turns.
    """

    world: World
    clock: Clock
    closing: bool
    _lock: Any  # the scheduler's RLock: decisions are serialized under it

    if TYPE_CHECKING:

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

        def _context(self) -> Context: ...

        def task(self, task_id: str) -> TaskState: ...

        def refresh(self) -> int: ...

        def _catch_up(self) -> None: ...

    # ─── settings ───────────────────────────────────────────────────────────

    @property
    def turn_settings(self) -> TurnSettings:
        """The windows and limits in force: the last recorded with
        :meth:`configure_turns` (by any writer of the store), else
        :data:`~.turns.DEFAULT_TURN_SETTINGS`."""
        return turn_settings_of(self.world)

    @turn_settings.setter
    def turn_settings(self, settings: TurnSettings) -> None:
        if not isinstance(settings, TurnSettings):
            raise InvalidArgument(f"turn_settings must be a TurnSettings, not {settings!r}")
        self.configure_turns(settings)

    def configure_turns(
        self,
        settings: TurnSettings | None = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
        **changes: Any,
    ) -> TurnSettings:
        """Set the Turn settings: a whole :class:`~.turns.TurnSettings`, or changes to
        the current ones (``configure_turns(aggregation_window_ms=5_000)``). Returns
        the settings now in force.

        They decide, so they are recorded (a ``TurnSettingsChanged`` event, only when
        they differ from those in force, with ``actor`` and ``reason``: who set them
        and why): replay and the read models then decide with them, and every worker
        of a fleet on the store uses them.
        """
        updated: TurnSettings = self._decide(
            change_turn_settings, settings, changes, actor=actor, why=reason
        )
        return updated

    def _decide_turn(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a rule of :mod:`..turns` with the settings in force when it decides."""
        result: T = self._decide(_with_settings, fn, *args, **kwargs)
        return result

    # ─── Turns ──────────────────────────────────────────────────────────────

    def start_turn(self, task_id: str, role: str, *, reasons: Iterable[str] = ()) -> str:
        """Start a Turn of ``role``; returns its id.

        Refused (``turns.one_active``) while the role has an active Turn, and on a
        task that holds (``turns.outcome_decided``) or reached (rule 4) its outcome.
        A due completion of the role's Turn is folded first.
        """
        turn_id: str = self._decide_turn(
            turn_rules.start_turn, task_id, role, reasons=tuple(reasons)
        )
        return turn_id

    def deliver_turn(self, task_id: str, role: str, turn_id: str, outcome: str) -> DeliveryDecision:
        """Record how delivering the active Turn to its runtime went.

        ``delivered``/``already-delivered`` move it to ``delivered``;
        ``not-ready``/``runtime-unavailable`` schedule a retry after
        ``min(2000, base * 2**min(attempt, 3))`` ms, and once
        ``delivery_retry_limit`` retries are used up record a delivery failure and
        end the Turn ``failed``; ``writer-attached``/``delivery-uncertain`` hold it
        (not retried).
        """
        decision: DeliveryDecision = self._decide_turn(
            delivery.deliver_turn, task_id, role, turn_id, outcome
        )
        return decision

    def progress_turn(self, task_id: str, role: str, turn_id: str) -> None:
        """The active Turn made progress: its stall window starts again."""
        self._decide_turn(turn_rules.progress_turn, task_id, role, turn_id)

    def complete_turn(
        self,
        task_id: str,
        role: str,
        turn_id: str,
        *,
        due_at: float | None = None,
        summary: str | None = None,
    ) -> CompletionStatus:
        """Complete the active Turn ``turn_id`` of ``role``.

        Returns ``completed`` (applied now) or ``pending`` (``due_at`` is later: a
        pass folds it once due, before any exit or stall observation of the Turn).

        A completion naming another Turn is stale: it is recorded as refused
        (:class:`~.turns.TurnCompletionRefused`), never applied, and
        :class:`~.turns.StaleCompletion` is raised **after** recording it. On a
        terminal task nothing can be recorded: :class:`~.errors.RuleViolation`
        (rule 4), nothing appended.
        """
        status: CompletionStatus = self._decide_turn(
            turn_rules.complete_turn,
            task_id,
            role,
            turn_id,
            due_at=due_at,
            summary=summary,
        )
        if status == "stale":
            active = checks.active_turn(self.world.get(task_id), role)
            raise StaleCompletion(task_id, role, turn_id, active.turn_id if active else None)
        return status

    def fail_turn(
        self,
        task_id: str,
        role: str,
        turn_id: str,
        *,
        reason: str = "failed",
        message: str | None = None,
    ) -> None:
        """End the active Turn ``failed``. Refused while a completion of it is due
        (``turns.completion_wins``): the completion is folded first."""
        self._decide_turn(
            turn_rules.fail_turn,
            task_id,
            role,
            turn_id,
            reason=reason,
            message=message,
        )

    def observe_exit(self, task_id: str, role: str, turn_id: str | None = None) -> str:
        """Record that the runtime saw the Turn's process gone (``turn_id`` ``None``:
        the role's active Turn). The next pass over the task judges it: the Turn
        ends ``exited``, unless a due completion wins first. Returns ``observed``,
        or ``dropped`` (recorded) when the named Turn is no longer active."""
        status: str = self._decide_turn(liveness.observe, task_id, role, "exit", turn_id)
        return status

    def observe_stall(self, task_id: str, role: str, turn_id: str | None = None) -> str:
        """Record that the runtime saw the Turn stuck; the next pass ends it ``stalled``
        unless a due completion wins first. (A pass also ends a Turn ``stalled`` on
        its own once it shows no progress for the stall window.)"""
        status: str = self._decide_turn(liveness.observe, task_id, role, "stall", turn_id)
        return status

    def roles(self, task_id: str) -> dict[str, RoleState]:
        """The task's roles and their Turns."""
        with self._lock:
            return dict(self.task(task_id).roles)

    def active_turn(self, task_id: str, role: str) -> TurnState | None:
        """The role's active Turn, or ``None``."""
        with self._lock:
            return checks.active_turn(self.task(task_id), role)

    # ─── Leader wakeups ─────────────────────────────────────────────────────

    def request_wakeup(self, task_id: str, reason: str) -> WakeupRequestStatus:
        """Ask for a Leader Turn: ``requested`` (a pending wakeup is created, its
        first time now), ``aggregated`` (the reason joins the pending one, first
        time kept) or ``dropped`` (the task decided its outcome; on a terminal
        task nothing is recorded)."""
        status: WakeupRequestStatus = self._decide_turn(wakeups.request_wakeup, task_id, reason)
        return status

    def dispatch_wakeup(self, task_id: str, *, runtime: Runtime | None = None) -> WakeupDispatch:
        """The wakeup step of a pass, for one task: dispatch its pending wakeup if
        the aggregation window passed and the Leader is idle, drop it if the task
        decided its outcome. Past the force window with the Leader busy, its reasons
        are handed to the busy Turn through ``runtime.steer`` and only then recorded
        (``steered``); a hand-off that raises records nothing."""
        dispatch: WakeupDispatch = self._decide_turn(wakeups.dispatch_wakeup, task_id)
        return task_pass.hand_off(self, self.turn_settings, runtime, task_id, dispatch)

    def pending_wakeup(self, task_id: str) -> WakeupState | None:
        """The task's pending Leader wakeup, or ``None``."""
        with self._lock:
            self.task(task_id)
            return wakeups.pending_wakeup(self.world, task_id)

    def pending_wakeups(self) -> dict[str, WakeupState]:
        """Every pending Leader wakeup, by task id."""
        with self._lock:
            return folds.pending_wakeups(self.world)

    # ─── controller passes ──────────────────────────────────────────────────

    def controller_pass(
        self,
        scope: str | Iterable[str] = "full",
        *,
        runtime: Runtime | None = None,
        concurrency: int | None = None,
        maintenance: Maintenance = (),
    ) -> ControllerPassReport:
        """Run one controller pass (see :mod:`..turns.engine`).

        ``scope`` is ``"full"`` or dirty keys (``task:ID``, ``role:ID/ROLE``,
        ``operator``; build them with :func:`~..turns.keys.task_key` and
        :func:`~..turns.keys.role_key`). ``runtime`` is what the pass asks of the agent
        runtime (drain events, deliver, steer, clean up); ``concurrency`` bounds
        the per-task passes run at once (default ``turn_settings.task_concurrency``,
        at most 32); ``maintenance`` names the projects under maintenance (or is a
        predicate, asked about each project of each task at each pass), whose tasks are
        deferred; a predicate that raises fails that task's pass alone, like any per-task
        failure. A malformed key or bound raises
        :class:`~.errors.InvalidArgument` before anything is written.
        """
        return engine.run_pass(
            self, scope, runtime=runtime, concurrency=concurrency, maintenance=maintenance
        )

    def run_cleanups(self, *, runtime: Runtime, maintenance: Maintenance = ()) -> CleanupReport:
        """Attempt the runtime cleanups due now (:meth:`next_cleanup_attempt`) outside a
        controller pass: each is claimed for this worker (once; one another live worker
        claimed is left to it, ``held``), asked of ``runtime.cleanup``, then recorded
        (``RuntimeCleanupSettled``, or ``RuntimeCleanupFailed`` when it raised); one that
        answers ``False`` (not done yet) appends nothing and is due again after the
        backoff. Tasks of projects under ``maintenance`` are deferred, as a pass defers
        them."""
        return engine.run_cleanups(self, runtime, maintenance=maintenance)

    @property
    def pass_queue(self) -> PassQueue:
        """The passes requested with :meth:`request_pass` and not run yet."""
        with self._lock:
            queue: PassQueue | None = getattr(self, "_pass_queue", None)
            if queue is None:
                queue = self._pass_queue = PassQueue()
            return queue

    def request_pass(self, scope: str | Iterable[str] = "full") -> None:
        """Ask for a controller pass of ``scope`` (``"full"`` or dirty keys), run by the
        next :meth:`pump`. Requests coalesce as in yui: dirty keys into one dirty pass;
        a full pass takes over every dirty key queued (and a dirty pass running now
        skips the tasks it has not started). A malformed key raises
        :class:`~.errors.InvalidArgument` and queues nothing."""
        self.pass_queue.request(scope if isinstance(scope, str) else list(scope))

    def pump(
        self,
        *,
        runtime: Runtime | None = None,
        concurrency: int | None = None,
        maintenance: Maintenance = (),
    ) -> list[ControllerPassReport]:
        """Run the requested passes until none is left; returns their reports. While
        another pump runs (another thread, or a runtime hook inside a pass), returns
        ``[]`` at once: that pump runs what was requested once its pass is done."""
        reports = []
        queue = self.pass_queue
        # passes.one_pump (yui, one coalescing loop: "full pump requests remain
        # exclusive"): a pass requested while passes run never starts beside them.
        while queue.start_pumping():
            try:
                while not self.closing:
                    scope = queue.take()
                    if scope is None:
                        break
                    reports.append(
                        self.controller_pass(
                            scope, runtime=runtime, concurrency=concurrency, maintenance=maintenance
                        )
                    )
            finally:
                queued = queue.stop_pumping()
            if not queued or self.closing:
                break
        return reports

    def task_pass_retry(self, task_id: str) -> TaskPassRetry | None:
        """The task's armed task-pass retry, or ``None``."""
        with self._lock:
            return folds.task_pass_retries(self.world).get(task_id)

    def next_turn_deadline(self) -> float | None:
        """The earliest time a controller pass has Turn work (a past time: due now)."""
        with self._lock:
            return deadlines.next_deadline(self.world, self.turn_settings, self.clock())

    def _task_lock(self, task_id: str) -> threading.RLock:
        """The lock that serializes per-task passes of one task, across passes. Kept
        only while someone holds or waits for it (weakly): a Worker that runs for months
        keeps no lock per task it ever worked, and one asked for while held is the same."""
        with self._lock:
            locks: WeakValueDictionary[str, threading.RLock] | None = getattr(
                self, "_turn_task_locks", None
            )
            if locks is None:
                locks = WeakValueDictionary()
                self._turn_task_locks = locks
            lock = locks.get(task_id)
            if lock is None:
                lock = threading.RLock()
                locks[task_id] = lock
            return lock


def _with_settings(
    draft: Draft, ctx: Context, fn: Callable[..., T], *args: Any, **kwargs: Any
) -> T:
    """A Turn rule, given the settings in force in the world it decides on (folded
    fresh: another writer may have changed them)."""
    return fn(draft, ctx, turn_settings_of(draft), *args, **kwargs)
