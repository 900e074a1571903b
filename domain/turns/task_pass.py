"""The per-task pass of a controller pass (:class:`TaskPass`), run in a worker thread
under the task's lock: it drains the task's runtime events (a failure blocks the task
for the pass), then does its cleanup obligations, deliveries, due completions then
liveness, and the Leader wakeup; a blocked or failed per-task pass is recorded and its
retry armed. :func:`attempt_cleanup` claims a role's cleanup, asks the runtime for it
and records what came of it (a pass, and :func:`~.engine.run_cleanups` outside one).
:func:`hand_off` steers a forced wakeup's reasons into the busy Leader Turn, then
records it. Every decision carries the ``pass_id``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from .checks import active_turn
from .claims import LiveWorkers, claim
from .cleanup import cleanup_state, require_cleanups, settle_cleanup
from .delivery import deliver_turn, deliveries_due
from .host import PassHost
from .keys import task_key
from .liveness import fold_turns, record_stall_diagnostic, stall_candidates
from .pass_decisions import record_task_failure, record_task_success
from .refusals import TurnRuleViolation
from .report import ControllerPassReport, TaskOutcome
from .runtime import Runtime, cleans_up
from .settings import TurnSettings
from .state import LEADER, TurnState
from .wakeups import WakeupDispatch, dispatch_wakeup, pending_wakeup, record_steered


class TaskPass:
    """The per-task pass, run in a worker thread (or the pass's own, for one task at a
    time) under the task's lock."""

    def __init__(
        self,
        host: PassHost,
        settings: TurnSettings,
        pass_id: str,
        runtime: Runtime | None,
        report: ControllerPassReport,
        taken_over: frozenset[str] = frozenset(),
    ) -> None:
        self.host = host
        self.settings = settings
        self.pass_id = pass_id
        self.runtime = runtime
        self.report = report
        self.taken_over = taken_over
        """Tasks whose armed task-pass retry this (full) pass took over."""
        self.alive = LiveWorkers(host.live_workers)
        """Whose lease is current: read once a pass if another worker claimed a cleanup
        the pass would attempt, and again for a worker that read did not find."""
        self._report_lock = threading.Lock()

    def run(self, task_id: str, roles: set[str] | None, keys: tuple[str, ...]) -> TaskOutcome:
        host = self.host
        with host._task_lock(task_id):
            # A full pass requested meanwhile takes over the dirty work not started yet.
            if host.closing or (self.report.scope == "dirty" and host.pass_queue.full):
                return "skipped"
            # Tasks whose runtime events failed are blocked for the pass.
            if self.runtime is not None:
                try:
                    self.runtime.drain(host, task_id)
                except Exception as error:
                    # passes.blocked_whole_task (yui): a blocked task's retry covers the
                    # whole task, whatever keys the pass was asked for.
                    return self.record_failure(task_id, (task_key(task_id),), error, blocked=True)
            try:
                self._work(task_id, roles)
                host._decide(record_task_success, self.pass_id, task_id)
            except Exception as error:
                if host.closing:
                    return "skipped"
                return self.record_failure(task_id, keys, error, blocked=False)
            return "done"

    def record_failure(
        self, task_id: str, keys: tuple[str, ...], error: Exception, *, blocked: bool
    ) -> TaskOutcome:
        """Record the task's per-task pass as blocked or failed by ``error``, arm its
        retry of ``keys``, and report both; returns the task's outcome."""
        message = describe_error(error)
        retry_at: float | None = None
        # passes.full_takes_over (yui): no retry is armed while a full pass is requested,
        # whatever pass failed (a full one too): the requested full pass does this work.
        arm = not self.host.pass_queue.full
        try:
            retry_at = self.host._decide(
                record_task_failure,
                self.settings,
                self.pass_id,
                task_id,
                keys,
                message,
                blocked=blocked,
                taken_over=task_id in self.taken_over,
                arm=arm,
            )
        except Exception as recording:
            # The store refused the record too (closing, gone): the report still says why.
            message = f"{message} (not recorded: {describe_error(recording)})"
        with self._report_lock:
            self.report.errors[task_id] = message
            self.report.retries[task_id] = retry_at
        return "blocked" if blocked else "failed"

    def _ended(self, task_id: str, role: str, how: str) -> None:
        with self._report_lock:
            self.report.turns.setdefault(task_id, {})[role] = how

    def _work(self, task_id: str, roles: set[str] | None) -> None:
        host, settings, pass_id, runtime = self.host, self.settings, self.pass_id, self.runtime
        wakes = roles is None or LEADER in roles  # the Leader's role is in scope
        failed = self._cleanups(task_id, roles)
        if failed:
            # cleanup.failed_excludes (yui): a role whose cleanup failed is left out of the
            # rest of this pass; a failed Leader cleanup holds back the task's wakeups.
            task = host.world.get(task_id)
            every = roles if roles is not None else set(task.roles if task is not None else ())
            roles = every - failed
        # Deliveries of active Turns (none whose completion is due: it is folded below, not
        # delivered again); delivery-uncertain ones are exempt from exit liveness.
        unsettled: set[str] = set()
        if runtime is not None:
            for turn in deliveries_due(host.world.get(task_id), host.clock(), roles, pass_id):
                self._deliver(task_id, turn, unsettled)
        # Stall diagnostics come before the stall window may declare a Turn stalled;
        # the runtime is asked first, then what it said is recorded.
        for turn in stall_candidates(host.world.get(task_id), host.clock(), settings, roles):
            said = runtime.diagnose_stall(task_id, turn.role, turn.turn_id) if runtime else None
            if host._decide(
                record_stall_diagnostic,
                settings,
                task_id,
                turn.role,
                turn.turn_id,
                said,
                pass_id=pass_id,
            ):
                with self._report_lock:
                    self.report.diagnosed.setdefault(task_id, {})[turn.role] = said
        # Due completions, then liveness: a completion meeting an exit or stall wins.
        ended = host._decide(
            fold_turns, settings, task_id, roles, unsettled=unsettled, pass_id=pass_id
        )
        for role, how in ended.items():
            self._ended(task_id, role, how)
        # The Leader wakeup, once the Leader's Turns are settled for this pass.
        if LEADER in failed:
            if pending_wakeup(host.world, task_id) is not None:
                with self._report_lock:
                    self.report.wakeups[task_id] = "held"
        elif wakes:
            self._wakeup(task_id, unsettled)

    def _cleanups(self, task_id: str, roles: set[str] | None) -> set[str]:
        """The task's runtime-cleanup obligations: required (a completed task's roles),
        then attempted through the runtime. Returns the roles whose cleanup failed."""
        host, settings, pass_id, runtime = self.host, self.settings, self.pass_id, self.runtime
        host._decide(require_cleanups, settings, task_id, roles, pass_id=pass_id)
        state = cleanup_state(host.world, task_id)
        failed: set[str] = set()
        if runtime is None or state is None:
            return failed
        for role in state.open_roles():
            if roles is not None and role not in roles:
                continue
            number = state.obligations[role].number
            # A pass tries every open obligation of its scope, due or not (yui's pass
            # cleans up each role of its selection); the attempt counts for the backoff.
            # One another live worker claimed is that worker's to ask (not failed here).
            how = attempt_cleanup(
                host, settings, runtime, task_id, role, number, pass_id, alive=self.alive
            )
            if how == "failed":
                failed.add(role)
        return failed

    def _wakeup(self, task_id: str, unsettled: set[str]) -> None:
        host, settings, pass_id, runtime = self.host, self.settings, self.pass_id, self.runtime
        # wakeups.fence (yui): while the host's Leader wake fence is up, no wakeup is
        # dispatched (nor dropped): they wait, pending, for a pass after it is down.
        if runtime is not None and runtime.leader_wake_fenced():
            if pending_wakeup(host.world, task_id) is not None:
                with self._report_lock:
                    self.report.wakeups[task_id] = "fenced"
            return
        wakeup = host._decide(dispatch_wakeup, settings, task_id, pass_id=pass_id)
        wakeup = hand_off(host, settings, runtime, task_id, wakeup, pass_id=pass_id)
        if wakeup.status != "none":
            with self._report_lock:
                self.report.wakeups[task_id] = wakeup.status
        # A dispatched wakeup is a delivered Leader input (yui): its Turn is handed
        # to the runtime in this same pass, not left for the next one.
        if wakeup.status == "dispatched" and runtime is not None:
            leader = active_turn(host.world.get(task_id), LEADER)
            if leader is not None and leader.turn_id == wakeup.turn_id:
                self._deliver(task_id, leader, unsettled)

    def _deliver(self, task_id: str, turn: TurnState, unsettled: set[str]) -> None:
        """Hand one Turn to the runtime and record what came of it (after it happened)."""
        assert self.runtime is not None
        outcome = self.runtime.deliver(task_id, turn.role, turn.turn_id, turn.delivery_attempts)
        if outcome is None:
            return
        try:
            decision = self.host._decide(
                deliver_turn,
                self.settings,
                task_id,
                turn.role,
                turn.turn_id,
                outcome,
                pass_id=self.pass_id,
            )
        except TurnRuleViolation as refused:
            # turns.ended_in_delivery (yui: a terminalized delivery is settled): the
            # runtime ended the Turn (completed or failed it) while delivering it, so its
            # answer is about a Turn that is over: nothing to record, and no failed pass.
            if refused.rule != "turns.not_active":
                raise
            return
        if outcome == "delivery-uncertain":
            unsettled.add(turn.turn_id)
        if decision.status in ("failed", "completed"):
            self._ended(task_id, turn.role, decision.status)


def hand_off(
    host: PassHost,
    settings: TurnSettings,
    runtime: Runtime | None,
    task_id: str,
    dispatch: WakeupDispatch,
    *,
    pass_id: str | None = None,
) -> WakeupDispatch:
    """A forced wakeup (status ``force``): hand its reasons to the busy Leader Turn
    (``Runtime.steer``), then record that it happened; other dispatches pass through.

    Perform, then record: a hand-off that raises records nothing, so the wakeup
    stays pending and is handed off again (by the task-pass retry, or the next pass);
    a crash between the two hands it off again after recovery.
    """
    if dispatch.status != "force":
        return dispatch
    assert dispatch.turn_id is not None
    if runtime is not None:
        runtime.steer(task_id, dispatch.turn_id, dispatch.reasons)
    recorded = host._decide(
        record_steered,
        settings,
        task_id,
        dispatch.turn_id,
        dispatch.request_count,
        pass_id=pass_id,
    )
    return replace(dispatch, status="steered" if recorded else "busy")


CleanupAttempt = Literal["settled", "failed", "open", "held", "gone"]


def attempt_cleanup(
    host: PassHost,
    settings: TurnSettings,
    runtime: Runtime,
    task_id: str,
    role: str,
    number: int,
    pass_id: str | None = None,
    *,
    alive: Callable[[str], bool] | None = None,
) -> CleanupAttempt:
    """Claim a role's open obligation (``number``) for this process (:mod:`.claims`),
    ask the runtime to clean it up, then record what came of it: ``settled``,
    ``failed`` (it raised; the obligation stays open) or ``open`` (not done yet:
    nothing is recorded). Not asked: ``held`` (another live worker holds the claim)
    or ``gone`` (settled or replaced meanwhile). ``alive`` answers whether a worker's
    lease is current (default: read from the lease table when first needed). A runtime that does not
    implement ``cleanup`` is asked without a claim: its answer changes nothing. The
    attempt is noted in the host's :class:`~.attempts.CleanupAttempts` first, so one
    whose record raises still backs off; a settled obligation is forgotten there once
    recorded."""
    attempts = host.cleanup_attempts
    base_ms = settings.delivery_retry_base_ms
    if cleans_up(runtime):
        live = alive if alive is not None else LiveWorkers(host.live_workers)
        claimed = claim(host, settings, task_id, role, number, live, pass_id)
        if claimed != "ours":
            if claimed == "held":  # its holder asks; this one looks again after the backoff
                attempts.note(task_id, role, number, host.clock(), base_ms)
            return claimed
    try:
        cleaned = runtime.cleanup(task_id, role)
    except Exception as error:
        attempts.note(task_id, role, number, host.clock(), base_ms)
        host._decide(
            settle_cleanup, settings, task_id, role, error=describe_error(error), pass_id=pass_id
        )
        return "failed"
    attempts.note(task_id, role, number, host.clock(), base_ms)
    if not cleaned:
        return "open"
    host._decide(settle_cleanup, settings, task_id, role, pass_id=pass_id)
    attempts.forget(task_id, role)
    return "settled"


def describe_error(error: BaseException) -> str:
    """An error as recorded: its class, then its message if it has one."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
