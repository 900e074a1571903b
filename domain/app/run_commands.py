"""Scheduler commands for dispatch runs and their ledger (SPEC.md section 3).

This is the application layer around :mod:`.run_rules`: it takes the process's
dispatch slots, asks the pure rules what may happen, calls the executor (the
only side effects), and records each outcome as run events through the
scheduler's ``_decide``. An admission refusal raises
:class:`~.run_rules.AdmissionRefused` and appends nothing; what a submit or a
reconcile visit came to is recorded, never raised.

Configure it with :meth:`RunCommands.configure_runs`; until then the settings
are :class:`~.dispatch.RunSettings` defaults and there is no executor.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import ConflictError, InvalidArgument, Refused, RuleViolation
from ..runs import rules
from ..runs.executor import (
    AnswerCommittingError,
    DispatchSlots,
    Executor,
    JobNotFoundError,
    JobSnapshot,
    OrphanFenceError,
    RunSettings,
    SubmitRequest,
    classify_submit_error,
)
from ..runs.state import TRIGGERS, Ledger, RunState, Trigger, ledger_of, run_stream_id
from ..world import Draft, World

if TYPE_CHECKING:
    from ..clock import Clock
    from ..store.store import Store
    from ..tasks.events import TaskEvent
    from ..tasks.rules import Context
    from ..tasks.state import TaskState

T = TypeVar("T")
SubmitOutcome = Literal[
    "submitted", "adopted", "identity_conflict", "adopt", "fence", "drain", "transient", "stale"
]
"""What one adopt-or-submit came to: taken (``submitted``, ``adopted``), a submit
error class, or ``stale`` (the run had ended meanwhile)."""


@dataclass
class DispatchReport:
    """What one :meth:`RunCommands.dispatch_due` did."""

    fired: list[str] = field(default_factory=list)
    """Runs minted whose job was taken (submitted or adopted)."""
    minted: list[str] = field(default_factory=list)
    """Every run minted, taken or not."""
    submit_errors: dict[str, str] = field(default_factory=dict)
    """Run id -> submit error class, for minted runs not taken."""
    reason: str | None = None
    """Why it stopped early or fired nothing: ``cap_off``, ``cap_reached``,
    ``dispatch_slots_busy``, ``task_running``, ``admissions_closed`` (a drain)."""


@dataclass
class ReconcileReport:
    """What one :meth:`RunCommands.reconcile` did: the runs visited and what each came to."""

    visited: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    """Run id -> ``done``, ``failed:<code>``, ``orphaned``, ``superseded[:<code>]``,
    ``running`` (taken by a redrive), or ``unchanged``."""


@dataclass
class _RunRuntime:
    """Process-local dispatch state: settings, executor, slots, submits in flight, cursor."""

    settings: RunSettings = field(default_factory=RunSettings)
    executor: Executor | None = None
    slots: DispatchSlots = field(default_factory=DispatchSlots)
    submit_live: set[str] = field(default_factory=set)
    reconcile_cursor: int = 0


class RunCommands:
    """Dispatch-run commands, mixed into :class:`~.scheduler.Scheduler`."""

    if TYPE_CHECKING:
        world: World
        clock: Clock
        store: Store
        _closed: bool

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _context(self) -> Context: ...
        def task(self, task_id: str) -> TaskState: ...
        def refresh(self) -> int: ...

    # ─── configuration and reading ──────────────────────────────────────────

    def _runs_runtime(self) -> _RunRuntime:
        runtime = getattr(self, "_run_runtime", None)
        if runtime is None:
            runtime = _RunRuntime()
            self._run_runtime = runtime
        assert isinstance(runtime, _RunRuntime)
        return runtime

    def configure_runs(
        self, *, executor: Executor | None = None, settings: RunSettings | None = None
    ) -> None:
        """Set the executor runs are handed to and/or the ledger's settings."""
        runtime = self._runs_runtime()
        if executor is not None:
            runtime.executor = executor
        if settings is not None:
            if not isinstance(settings, RunSettings):
                raise TypeError(f"settings must be RunSettings, not {type(settings).__name__}")
            runtime.settings = settings

    @property
    def run_settings(self) -> RunSettings:
        """The run ledger's settings."""
        return self._runs_runtime().settings

    @property
    def ledger(self) -> Ledger:
        """The run ledger folded from the store (runs, per-day counters, live runs)."""
        return ledger_of(self.world)

    def run(self, run_id: str) -> RunState:
        """The current state of one run (its id is ``task|day|attempt``)."""
        state = self.world.streams.get(run_stream_id(run_id)) if isinstance(run_id, str) else None
        if not isinstance(state, RunState):
            self.refresh()
            state = self.world.streams.get(run_stream_id(run_id))
        if not isinstance(state, RunState):
            raise rules.UnknownRun(run_id)
        return state

    def runs(self, task_id: str, day: str | None = None) -> list[RunState]:
        """The task's runs (on ``day``, or every day), ledger order."""
        self.task(task_id)
        return [
            run
            for run in self.ledger.runs.values()
            if run.task_id == task_id and (day is None or run.day == day)
        ]

    def run_history(self, run_id: str) -> list[TaskEvent]:
        """Every event of one run, oldest first, as stored."""
        self.run(run_id)
        return self.store.stream(run_stream_id(run_id))

    def today(self) -> str:
        """Today's date in the configured zone, from the scheduler clock."""
        return rules.today(self._context(), self.run_settings)

    def schedule_run(self, task_id: str, run_at: float | None) -> None:
        """Schedule the task to run at ``run_at`` (ms; ``None`` clears it).

        Setting it clears the task's marker, so a done schedule fires again at
        its new time; a running run scheduled for the old time is superseded at
        its next reconcile.
        """
        self._decide(rules.set_schedule, task_id, run_at)

    # ─── minting ────────────────────────────────────────────────────────────

    def _require_executor(self) -> Executor:
        if getattr(self, "_closed", False):
            raise RuleViolation(2, "the scheduler is closed; open the store again")
        executor = self._runs_runtime().executor
        if executor is None:
            raise Refused("no executor to hand runs to; call configure_runs(executor=...)")
        return executor

    def mint_run(self, task_id: str, day: str | None = None, trigger: Trigger = "manual") -> str:
        """Admit, mint and submit a run of the task for today; returns the run id.

        Admission refusals raise :class:`~.run_rules.AdmissionRefused` (``code``
        names the rule) and append nothing. ``day``, if given, must be today in
        the configured zone. A submit that fails is recorded on the run (see
        :meth:`run`), not raised; reconcile redrives it.
        """
        self._require_executor()
        if trigger not in TRIGGERS:
            raise InvalidArgument(
                f"trigger must be 'manual' or 'scheduled', not {trigger!r}", task_id=task_id
            )
        runtime = self._runs_runtime()
        kind: Literal["manual", "background"] = "manual" if trigger == "manual" else "background"
        limit = 1 if kind == "manual" else runtime.settings.per_tick
        slot_free = runtime.slots.try_acquire(kind, limit)
        try:
            run = self._mint(task_id, trigger, slot_free=slot_free, day=day)
            self._adopt_or_submit(run.run_id)
            return run.run_id
        finally:
            if slot_free:
                runtime.slots.release(kind)

    def _mint(
        self, task_id: str, trigger: Trigger, *, slot_free: bool, day: str | None
    ) -> RunState:
        settings = self.run_settings
        for attempt in range(2):
            try:
                return self._decide(
                    rules.mint,
                    task_id,
                    trigger=trigger,
                    settings=settings,
                    slot_free=slot_free,
                    day=day,
                )
            except ConflictError:
                # Another writer minted this attempt first; deciding again sees its run.
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def _adopt_or_submit(self, run_id: str) -> SubmitOutcome:
        """Take a live job with the run's client job id, or submit; record what came of it."""
        executor = self._require_executor()
        runtime = self._runs_runtime()
        run = self.run(run_id)
        found = _quietly(lambda: executor.find_by_client_job_id(run.client_job_id))
        if found is not None and found.live:
            return self._record_taken(run_id, found, adopted=True)
        runtime.submit_live.add(run_id)
        try:
            try:
                job = executor.submit(self._request(run))
            except Exception as error:  # every submit error is classified and recorded
                error_class = classify_submit_error(error)
                if error_class == "adopt":
                    existing = _quietly(lambda: executor.find_by_client_job_id(run.client_job_id))
                    if existing is not None and existing.live:
                        return self._record_taken(run_id, existing, adopted=True)
                retry_after_ms = (
                    error.retry_after_ms
                    if isinstance(error, OrphanFenceError)
                    else runtime.settings.submit_spacing_ms
                )
                try:
                    recorded = self._decide(
                        rules.record_submit_failed,
                        run_id,
                        error_class,
                        _message(error),
                        retry_after_ms=retry_after_ms,
                    )
                except ConflictError:
                    return "stale"  # another writer moved the run on first
                return error_class if recorded is not None else "stale"
            return self._record_taken(run_id, job, adopted=False)
        finally:
            runtime.submit_live.discard(run_id)

    def _record_taken(self, run_id: str, job: JobSnapshot, *, adopted: bool) -> SubmitOutcome:
        try:
            recorded = self._decide(rules.record_taken, run_id, job, adopted=adopted)
        except ConflictError:
            # Another writer moved the run on first; a redrive adopts this job if it
            # is still dispatching.
            return "stale"
        if recorded is None:
            return "stale"
        return "adopted" if adopted else "submitted"

    def _request(self, run: RunState) -> SubmitRequest:
        task = self.world.get(run.task_id)
        return SubmitRequest(
            client_job_id=run.client_job_id,
            run_id=run.run_id,
            task_id=run.task_id,
            task_kind=task.kind if task is not None else "",
            day=run.day,
            attempt=run.attempt,
            trigger=run.trigger,
            tz=run.tz,
        )

    # ─── scheduled dispatch ─────────────────────────────────────────────────

    def dispatch_due(self) -> DispatchReport:
        """Fire scheduled runs of due tasks, at most ``per_tick``; never raises a refusal.

        A task is due once its scheduled time has come, within the catch-up
        window, and nothing has taken that schedule yet. The daily cap is
        checked before every fire. The loop stops at ``task_running``,
        ``dispatch_slots_busy``, ``cap_reached`` or a drain; other submit errors
        go on to the next task.
        """
        report = DispatchReport()
        self._require_executor()
        self.refresh()
        runtime = self._runs_runtime()
        settings = runtime.settings
        ctx = self._context()
        draft = Draft(self.world)
        report.reason = rules.dispatch_blocked(draft, ctx, settings)
        if report.reason is not None:
            return report
        for task_id in rules.due_tasks(draft, ctx, settings):
            if len(report.fired) >= settings.per_tick:
                break
            if not runtime.slots.try_acquire("background", settings.per_tick):
                report.reason = "dispatch_slots_busy"
                break
            try:
                try:
                    run = self._mint(task_id, "scheduled", slot_free=True, day=None)
                except (rules.AdmissionRefused, ConflictError) as refusal:
                    code = getattr(refusal, "code", "task_running")
                    if code in ("task_running", "dispatch_slots_busy", "cap_reached", "cap_off"):
                        report.reason = code
                        break
                    continue
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
        return report

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
        self.refresh()
        runtime = self._runs_runtime()
        settings = runtime.settings
        live = list(self.ledger.live)
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
        return report

    def _reconcile_one(self, run_id: str) -> None:
        runtime = self._runs_runtime()
        settings = runtime.settings
        run = self.run(run_id)
        if run.status == "dispatching":
            step = self._decide(
                rules.reconcile_dispatching,
                run_id,
                settings,
                submit_in_flight=run_id in runtime.submit_live,
            )
            if step == "redrive" and runtime.executor is not None:
                self._adopt_or_submit(run_id)
            return
        step = self._decide(rules.reconcile_running, run_id, settings)
        executor = runtime.executor
        if executor is None or run.job_id is None:
            return
        job_id = run.job_id
        if step == "cancel":
            observation = _cancel(executor, job_id)
            self._decide(rules.record_cancel, run_id, observation)
        elif step == "snapshot":
            snapshot = _quietly(lambda: executor.snapshot(job_id))
            self._decide(rules.record_snapshot, run_id, snapshot, settings)


def _quietly(read: Callable[[], JobSnapshot | None]) -> JobSnapshot | None:
    """An executor read whose errors count as "none"."""
    try:
        return read()
    except Exception:
        return None


def _cancel(executor: Executor, job_id: str) -> rules.CancelObservation:
    try:
        result = executor.cancel(job_id)
    except AnswerCommittingError:
        # Its answer is being committed: complete it with what it has, then done.
        snapshot = _quietly(lambda: executor.snapshot(job_id))
        text = (snapshot.response or snapshot.partial_text or "") if snapshot is not None else ""
        try:
            completed = executor.complete(job_id, text)
        except Exception:
            return rules.CancelObservation("error")
        return rules.CancelObservation("committed", completed)
    except JobNotFoundError:
        return rules.CancelObservation("not_found")
    except Exception:
        return rules.CancelObservation("error")
    return rules.CancelObservation("applied" if result.applied else "not_applied", result.job)


def _message(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _outcome(before: RunState, after: RunState) -> str:
    if after.events == before.events:
        return "unchanged"
    if after.status == "dispatching":
        return f"dispatching:{after.last_submit_error}"
    if after.error is not None and (after.status == "failed" or after.error.code != after.status):
        return f"{after.status}:{after.error.code}"
    return after.status
