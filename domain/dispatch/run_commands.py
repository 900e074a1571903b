"""Scheduler commands for dispatch runs and their ledger (SPEC.md section 3).

This is the application layer around the run rules of :mod:`..runs`: it takes
the process's dispatch slots, asks the pure rules what may happen, calls the
executor (the only side effects), and records each outcome as run events
through the scheduler's ``_decide``. An admission refusal raises
:class:`~..runs.admission.AdmissionRefused` and appends nothing; what a submit
came to is recorded, never raised. Handing a run to the executor (adopt-or-submit)
is in :mod:`.run_submits`, the periodic work (scheduled dispatch and reconcile) in
:mod:`.run_ticks`, both mixed in below.

Configure it with :meth:`RunCommands.configure_runs`; until then the settings
are :class:`~..runs.settings.RunSettings` defaults and there is no executor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConflictError, InvalidArgument, Refused, RuleViolation
from ..runs import reading
from ..runs.admission import AdmissionRefused, admit_run, mint
from ..runs.events import SUBMIT_ERROR_CLASSES, TRIGGERS, Trigger
from ..runs.executor import DrainError, Executor
from ..runs.gate import DispatchGate, GateCaller, GateCode, gate_refusal
from ..runs.identity import run_stream_id
from ..runs.ledger import Ledger, ledger_of
from ..runs.outcomes import SubmitFailed
from ..runs.reading import UnknownRun
from ..runs.schedule import set_schedule
from ..runs.settings import RunSettings, change_run_settings, run_settings_of
from ..runs.slots import slot_of
from ..runs.state import RunState
from ..tasks.validation import json_value
from ..world import Draft, World
from .run_runtime import RunPayload, RunRuntime
from .run_submits import RunSubmits, error_text
from .run_ticks import RunTicks

if TYPE_CHECKING:
    from ..clock import Clock
    from ..store.store import Store
    from ..tasks.context import Context
    from ..tasks.events import TaskEvent
    from ..tasks.state import TaskState

T = TypeVar("T")
MINT_ATTEMPTS = 5
"""How often a mint is decided again when another writer moved what it read or wrote
(PostgreSQL has no writers' turn: a worker running the task's phases races a caller's mint)."""


class RunCommands(RunSubmits, RunTicks):
    """Dispatch-run commands, mixed into :class:`~.scheduler.Scheduler`."""

    if TYPE_CHECKING:
        world: World
        clock: Clock
        store: Store
        _closed: bool
        _lock: Any

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _context(self) -> Context: ...
        def task(self, task_id: str) -> TaskState: ...
        def refresh(self) -> int: ...

    # ─── configuration and reading ──────────────────────────────────────────

    def _runs_runtime(self) -> RunRuntime:
        runtime = getattr(self, "_run_runtime", None)
        if runtime is None:
            runtime = RunRuntime()
            self._run_runtime = runtime
        assert isinstance(runtime, RunRuntime)
        return runtime

    def configure_runs(
        self,
        *,
        executor: Executor | None = None,
        settings: RunSettings | None = None,
        gate: DispatchGate | None = None,
        payload: RunPayload | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Set the executor runs are handed to, the ledger's settings, the host's
        dispatch gate (durable jobs on, admissions open, no maintenance drain: see
        :mod:`..runs.gate`; by default always open) and/or ``payload(task_id,
        trigger)``, which gives each run minted without one its per-run payload
        (opaque JSON: the dispatcher's session, message era and number).

        Settings decide, so they are recorded (a ``RunSettingsChanged`` event, only
        when they differ from those in force, with ``actor`` and ``reason``: who set
        them and why): a replay decides with them, and every worker of a fleet on the
        store uses them.
        """
        if settings is not None:
            if not isinstance(settings, RunSettings):
                raise TypeError(f"settings must be RunSettings, not {type(settings).__name__}")
            self._decide(change_run_settings, settings, actor=actor, why=reason)
        if executor is not None:
            self._runs_runtime().executor = executor
        if gate is not None:
            self._runs_runtime().gate = gate
        if payload is not None:
            if not callable(payload):
                raise InvalidArgument(
                    f"payload must be a function (task_id, trigger), not {payload!r}"
                )
            self._runs_runtime().payload = payload

    def _gate_lease(
        self, *, caller: GateCaller, before_drain: Callable[[], None] | None = None
    ) -> Callable[[], None]:
        """Ask the host's gate before minting (a reconcile asks about a drain only);
        returns the dispatch lease's release, or raises
        :class:`~..runs.admission.AdmissionRefused` with the gate's code (a drain's
        depends on the ``caller``: :func:`~..runs.gate.gate_refusal`).

        ``before_drain`` raises the caller's own refusals, which the dispatcher
        answers before it takes the lease: asked only when a drain refuses it (else
        the caller's decision asks them itself).
        """
        gate = self._runs_runtime().gate
        reconcile = caller == "reconcile"
        durable = True if reconcile else bool(gate.durable_jobs_enabled())
        admitting = True if reconcile else bool(gate.admissions_open())
        release: Callable[[], None] | None = None
        draining = False
        if durable and admitting:
            try:
                release = gate.acquire_dispatch_lease()
            except DrainError:
                draining = True
                if before_drain is not None:
                    before_drain()
        code = gate_refusal(durable, admitting, draining, caller=caller)
        if code is None:
            assert release is not None  # asked only when it decides nothing else
            return release
        raise AdmissionRefused(code, _DRAIN_REASON if draining else _GATE_REASONS[code])

    @property
    def run_settings(self) -> RunSettings:
        """The run ledger's settings in force: the last recorded with
        :meth:`configure_runs` (by any writer of the store), else the defaults."""
        return run_settings_of(self.world)

    @property
    def ledger(self) -> Ledger:
        """The run ledger folded from the store (runs, per-day counters, live runs): a
        copy, the caller's to change (the world keeps its own current in place, and a
        change to it would be one no event made). The runs it holds are frozen."""
        return ledger_of(self.world).copy()

    def run(self, run_id: str) -> RunState:
        """The current state of one run (its id is ``task|day|attempt``)."""
        state = self.world.streams.get(run_stream_id(run_id)) if isinstance(run_id, str) else None
        if not isinstance(state, RunState):
            self.refresh()
            state = self.world.streams.get(run_stream_id(run_id))
        if not isinstance(state, RunState):
            raise UnknownRun(run_id)
        return state

    def runs(self, task_id: str, day: str | None = None) -> list[RunState]:
        """The task's runs (on ``day``, or every day), ledger order."""
        self.task(task_id)
        return [
            run
            for run in ledger_of(self.world).runs.values()
            if run.task_id == task_id and (day is None or run.day == day)
        ]

    def live_runs(self, where: Mapping[str, Any] | None = None) -> list[RunState]:
        """The live runs (dispatching or running), ledger order; with ``where``, those
        whose payload holds each of its keys with that value (``where={"era": e}``
        lists the live reservations of a message era, as the dispatcher does)."""
        if where is not None and not isinstance(where, Mapping):
            raise InvalidArgument(f"where must be a mapping of payload keys, not {where!r}")
        self.refresh()
        return ledger_of(self.world).live_reservations(where)

    def run_history(self, run_id: str) -> list[TaskEvent]:
        """Every event of one run, oldest first, as stored."""
        self.run(run_id)
        return self.store.stream(run_stream_id(run_id))

    def today(self) -> str:
        """Today's date in the configured zone, from the scheduler clock."""
        return reading.today(self._context(), self.run_settings)

    def schedule_run(self, task_id: str, run_at: float | None) -> None:
        """Schedule the task to run at ``run_at`` (ms; ``None`` clears it).

        Setting it clears the task's marker, so a done schedule fires again at
        its new time; a running run scheduled for the old time is superseded at
        its next reconcile.
        """
        self._decide(set_schedule, task_id, run_at)

    # ─── minting ────────────────────────────────────────────────────────────

    def _require_executor(self) -> Executor:
        if getattr(self, "_closed", False):
            raise RuleViolation(2, "the scheduler is closed; open the store again")
        executor = self._runs_runtime().executor
        if executor is None:
            raise Refused("no executor to hand runs to; call configure_runs(executor=...)")
        return executor

    def mint_run(
        self,
        task_id: str,
        day: str | None = None,
        trigger: Trigger = "manual",
        *,
        payload: Any = None,
        raise_on_submit_error: bool = False,
    ) -> str:
        """Admit, mint and submit a run of the task for today; returns the run id.

        ``payload`` is the host's per-run data (opaque JSON, at most 64 KiB),
        recorded on the run and handed to the executor with every submit (without
        one, the ``payload`` function given to :meth:`configure_runs` is asked, once
        the run's admission passed: a refused run asks it nothing; what it raises is
        raised, and nothing is minted).

        Admission refusals raise :class:`~.run_rules.AdmissionRefused` (``code``
        names the rule) and append nothing; the host's gate is asked first
        (``durable_jobs_off``, ``admissions_closed``; a maintenance drain is
        ``admissions_closed`` too, as the dispatcher's ``runTaskNow`` answers it).
        ``day``, if given, must be today in the configured zone. A submit that fails
        is recorded on the run (see :meth:`run`) and not raised, reconcile redrives
        it; with ``raise_on_submit_error=True`` it is raised too, after it was
        recorded, as :class:`~..runs.outcomes.SubmitFailed` (the dispatcher's
        throw-to-caller: ``identity_conflict``, ``admissions_closed``,
        ``submit_failed``).
        """
        self._require_executor()
        if trigger not in TRIGGERS:
            raise InvalidArgument(
                f"trigger must be 'manual' or 'scheduled', not {trigger!r}", task_id=task_id
            )
        runtime = self._runs_runtime()
        kind, limit = slot_of(trigger, self.run_settings.per_tick)
        # Before minting: a refusal uses no attempt. The run's own rules and its slot
        # come before a drain (the dispatcher takes its lease last).
        release = self._gate_lease(
            caller="command", before_drain=lambda: self._admit_only(task_id, trigger)
        )
        slot_free = runtime.slots.try_acquire(kind, limit)
        try:
            run = self._mint(task_id, trigger, slot_free=slot_free, day=day, payload=payload)
            assert run is not None  # a hook's error propagates here
            outcome = self._adopt_or_submit(run.run_id)
            if raise_on_submit_error and outcome in SUBMIT_ERROR_CLASSES:
                raise SubmitFailed(run.run_id, outcome, task_id=task_id)
            return run.run_id
        finally:
            if slot_free:
                runtime.slots.release(kind)
            release()

    def _admit_only(
        self,
        task_id: str,
        trigger: Trigger,
        *,
        slot_free: bool | None = None,
        day: str | None = None,
    ) -> None:
        """The mint's checks (its slot: ``slot_free``, else whether one is free now),
        minting nothing: raises their refusal."""
        with self._lock:  # the world is read as a decision reads it
            self.refresh()
            draft = Draft(self.world)
            settings = run_settings_of(draft)
            if slot_free is None:
                slot_free = self._runs_runtime().slots.free(*slot_of(trigger, settings.per_tick))
            admit_run(
                draft,
                self._context(),
                task_id,
                trigger=trigger,
                settings=settings,
                slot_free=slot_free,
                day=day,
            )

    def _mint(
        self,
        task_id: str,
        trigger: Trigger,
        *,
        slot_free: bool,
        day: str | None,
        payload: Any = None,
        payload_errors: dict[str, str] | None = None,
    ) -> RunState | None:
        """Mint a run (the host's hook gives its payload when none is given). What the
        hook raised propagates, or, with ``payload_errors``, is noted there by task and
        nothing is minted (``None``)."""
        hook = self._runs_runtime().payload
        if payload is None and hook is not None:
            # runs.payload_when_admitted (dispatcher: mintRun asks the host for the run's
            # session and message number after runTaskNow's checks): a refused run asks
            # the host nothing.
            self._admit_only(task_id, trigger, slot_free=slot_free, day=day)
            try:
                payload = json_value(hook(task_id, trigger), "a run's payload", task_id)
            except Exception as error:
                if payload_errors is None:
                    raise
                # runs.payload_failed (dispatcher: dispatchDueTasks goes on past a row
                # whose mint threw): nothing minted, the task is due at the next tick.
                payload_errors[task_id] = error_text(error)
                return None
        for attempt in range(MINT_ATTEMPTS):
            try:
                return self._decide(
                    _minting,
                    task_id,
                    trigger=trigger,
                    slot_free=slot_free,
                    day=day,
                    payload=payload,
                )
            except ConflictError:
                # Another writer minted this attempt first, or moved the task the mint
                # read (a worker running its phase): deciding again sees it.
                if attempt == MINT_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")


_GATE_REASONS: dict[GateCode, str] = {
    "durable_jobs_off": "durable jobs are off; turn them on to run a task",
    "admissions_closed": "the executor admits no jobs now (maintenance); try again in a moment",
    "maintenance_drain_active": "a maintenance drain is active; try again once it is over",
}
_DRAIN_REASON = _GATE_REASONS["maintenance_drain_active"]
"""A drain's reason, whichever code the caller answers it with."""


def _minting(draft: Draft, ctx: Context, task_id: str, **options: Any) -> RunState:
    """:func:`~..runs.admission.mint` with the settings in force in the world it
    decides on (folded fresh: another writer may have changed them)."""
    return mint(draft, ctx, task_id, settings=run_settings_of(draft), **options)
