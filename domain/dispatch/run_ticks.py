"""The run ledger's periodic work: scheduled dispatch and reconcile (SPEC.md section 3).

:class:`RunTicks` is the part of :class:`~.run_commands.RunCommands` a host
calls on a timer: :meth:`~RunTicks.dispatch_due` fires scheduled runs of due
tasks and :meth:`~RunTicks.reconcile` visits live runs round-robin and settles
them. Neither raises a refusal; what each did comes back as a
:class:`DispatchReport` or a :class:`ReconcileReport`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConflictError
from ..runs.admission import AdmissionRefused, dispatch_blocked, due_tasks
from ..runs.events import Trigger
from ..runs.executor import Executor
from ..runs.ledger import ledger_of
from ..runs.reconcile import (
    reconcile_dispatching,
    reconcile_running,
    record_cancel,
    record_snapshot,
)
from ..runs.state import RunState
from ..world import Draft, World
from .executor_calls import cancel, quietly

if TYPE_CHECKING:
    from ..runs.gate import GateCaller
    from ..runs.settings import RunSettings
    from ..tasks.context import Context
    from .run_runtime import RunRuntime
    from .run_submits import SubmitOutcome

T = TypeVar("T")


@dataclass
class DispatchReport:
    """What one :meth:`RunCommands.dispatch_due` did."""

    fired: list[str] = field(default_factory=list)
    """Runs minted whose job was taken (submitted or adopted)."""
    minted: list[str] = field(default_factory=list)
    """Every run minted, taken or not."""
    submit_errors: dict[str, str] = field(default_factory=dict)
    """Run id -> submit error class, for minted runs not taken."""
    payload_errors: dict[str, str] = field(default_factory=dict)
    """Task id -> what the host's payload hook raised (or gave that is no JSON) for a due
    task: no run of it was minted (no attempt, no place under the cap); the next tick
    asks again."""
    reason: str | None = None
    """Why it stopped early or fired nothing: the gate's ``durable_jobs_off``,
    ``admissions_closed``, ``maintenance_drain_active``; ``cap_off``, ``cap_reached``,
    ``dispatch_slots_busy``, ``task_running``, ``admissions_closed`` (a submit the
    executor refused for a drain), ``tick_budget`` (its wall-time budget was spent)."""


@dataclass
class ReconcileReport:
    """What one :meth:`RunCommands.reconcile` did: the runs visited and what each came to."""

    visited: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    """Run id -> ``done``, ``failed:<code>``, ``orphaned``, ``superseded[:<code>]``,
    ``running`` (taken by a redrive), or ``unchanged``."""
    reason: str | None = None
    """Why it visited nothing: ``maintenance_drain_active`` (the gate's drain)."""


class RunTicks:
    """Scheduled dispatch and reconcile, mixed into :class:`~.run_commands.RunCommands`."""

    if TYPE_CHECKING:
        world: World

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _context(self) -> Context: ...
        def refresh(self) -> int: ...
        def _catch_up(self) -> None: ...
        def _runs_runtime(self) -> RunRuntime: ...
        def _require_executor(self) -> Executor: ...
        def _mint(
            self,
            task_id: str,
            trigger: Trigger,
            *,
            slot_free: bool,
            day: str | None,
            payload: Any = None,
            payload_errors: dict[str, str] | None = None,
        ) -> RunState | None: ...
        def _adopt_or_submit(self, run_id: str) -> SubmitOutcome: ...
        def _gate_lease(
            self, *, caller: GateCaller, before_drain: Callable[[], None] | None = None
        ) -> Callable[[], None]: ...
        def run(self, run_id: str) -> RunState: ...
        @property
        def run_settings(self) -> RunSettings: ...

    # ─── scheduled dispatch ─────────────────────────────────────────────────

    def dispatch_due(self) -> DispatchReport:
        """Fire scheduled runs of due tasks, at most ``per_tick``; never raises a refusal.

        A task is due once its scheduled time has come, within the catch-up
        window, and nothing has taken that schedule yet. The daily cap is
        checked before every fire. The loop stops at ``task_running``,
        ``dispatch_slots_busy``, ``cap_reached`` or a drain; other submit errors
        go on to the next task, as does a task whose payload hook failed (noted in
        ``payload_errors``, nothing minted).
        """
        report = DispatchReport()
        self._require_executor()
        self._catch_up()  # inside a batch its commands decide on its own view: no read
        try:
            # A cap of 0 is answered before a drain (the dispatcher's order).
            release = self._gate_lease(caller="tick", before_drain=self._cap_not_off)
        except AdmissionRefused as refused:
            report.reason = refused.code  # the gate: nothing minted, no attempt used
            return report
        try:
            self._dispatch_due(report)
        finally:
            release()
        return report

    def _cap_not_off(self) -> None:
        if self.run_settings.cap_per_day == 0:
            raise AdmissionRefused("cap_off", "the daily cap is 0: scheduled dispatch is off")

    def _dispatch_due(self, report: DispatchReport) -> None:
        runtime = self._runs_runtime()
        settings = self.run_settings
        wall = settings.dispatch_wall_s
        deadline = time.monotonic() + wall if wall is not None else None
        ctx = self._context()
        draft = Draft(self.world)
        report.reason = dispatch_blocked(draft, ctx, settings)
        if report.reason is not None:
            return
        tried = False
        for task_id in due_tasks(draft, ctx, settings):
            if len(report.fired) >= settings.per_tick:
                break
            # A tick tries one task before it looks at its budget: on a loaded machine
            # the look-up above may spend a short budget alone, and a tick that then
            # stopped would leave every later tick stopped the same way.
            if tried and deadline is not None and time.monotonic() > deadline:
                report.reason = "tick_budget"  # the rest waits for the next tick
                break
            if not runtime.slots.try_acquire("background", settings.per_tick):
                report.reason = "dispatch_slots_busy"
                break
            tried = True
            try:
                try:
                    run = self._mint(
                        task_id,
                        "scheduled",
                        slot_free=True,
                        day=None,
                        payload_errors=report.payload_errors,
                    )
                except (AdmissionRefused, ConflictError) as refusal:
                    code = getattr(refusal, "code", "task_running")
                    if code in ("task_running", "dispatch_slots_busy", "cap_reached", "cap_off"):
                        report.reason = code
                        break
                    continue
                if run is None:
                    continue  # the host's payload hook failed: noted, the tick goes on
                report.minted.append(run.run_id)
                outcome = self._adopt_or_submit(run.run_id)
                if outcome in ("submitted", "adopted"):
                    report.fired.append(run.run_id)
                    continue
                report.submit_errors[run.run_id] = outcome
                if outcome == "drain":
                    report.reason = "admissions_closed"
                    break
            finally:
                runtime.slots.release("background")

    # ─── reconcile ──────────────────────────────────────────────────────────

    def reconcile(self) -> ReconcileReport:
        """Visit live runs round-robin, ``reconcile_per_tick`` a call, and settle them.

        A running run: orphaned when its task ended; superseded (its job
        cancelled) when the task was rescheduled; done or failed as its job
        ended; ``failed job_lost`` with no job after the lost window. A
        dispatching run: ``failed expired`` once its day is over, ``failed
        submit_exhausted`` once its submits are used up, else redriven when its
        ``retry_after`` has come.
        """
        report = ReconcileReport()
        self._require_executor()
        self._catch_up()  # inside a batch its commands decide on its own view: no read
        try:
            release = self._gate_lease(caller="reconcile")
        except AdmissionRefused as refused:
            report.reason = refused.code  # reconcile skips while maintenance drains
            return report
        try:
            self._reconcile(report)
        finally:
            release()
        return report

    def _reconcile(self, report: ReconcileReport) -> None:
        runtime = self._runs_runtime()
        settings = self.run_settings
        live = list(ledger_of(self.world).live)  # the world's own: no copy (see ledger)
        start = runtime.reconcile_cursor % len(live) if live else 0
        ordered = live[start:] + live[:start]
        wall = settings.reconcile_wall_s
        deadline = time.monotonic() + wall if wall is not None else None
        for run_id in ordered[: settings.reconcile_per_tick]:
            if deadline is not None and time.monotonic() > deadline:
                break
            before = self.run(run_id)
            # Another writer changed the run first: the next visit sees what it did.
            with contextlib.suppress(ConflictError):
                self._reconcile_one(run_id)
            report.visited.append(run_id)
            report.outcomes[run_id] = _outcome(before, self.run(run_id))
        runtime.reconcile_cursor += settings.reconcile_per_tick

    def _reconcile_one(self, run_id: str) -> None:
        runtime = self._runs_runtime()
        settings = self.run_settings
        run = self.run(run_id)
        if run.status == "dispatching":
            step = self._decide(
                reconcile_dispatching,
                run_id,
                settings,
                submit_in_flight=run_id in runtime.submit_live,
            )
            if step == "redrive" and runtime.executor is not None:
                self._adopt_or_submit(run_id)
            return
        step = self._decide(reconcile_running, run_id, settings)
        executor = runtime.executor
        if executor is None or run.job_id is None:
            return
        job_id = run.job_id
        if step == "cancel":
            observation = cancel(executor, job_id)
            self._decide(record_cancel, run_id, observation)
        elif step == "snapshot":
            snapshot = quietly(lambda: executor.snapshot(job_id))
            self._decide(record_snapshot, run_id, snapshot, settings)


def _outcome(before: RunState, after: RunState) -> str:
    if after.events == before.events:
        return "unchanged"
    if after.status == "dispatching":
        return f"dispatching:{after.last_submit_error}"
    if after.error is not None and (after.status == "failed" or after.error.code != after.status):
        return f"{after.status}:{after.error.code}"
    return after.status
