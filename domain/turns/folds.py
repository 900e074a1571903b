"""How section 2's events fold into state, never reading the clock: Turn events into
the task's roles (``@evolves``, on the task's own stream); the wakeup, cleanup (in
:mod:`.cleanup_fold`), pass and task-pass streams into their own states
(``@evolves_stream``); and the world index that passes and projections read (pending
wakeups, task-pass retries, open cleanups).
Importing this module registers all of them.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ..frozen import FrozenDict
from ..tasks.copies import copier, maker
from ..tasks.events import TaskEvent
from ..tasks.evolve import InvalidTransition, evolves, evolves_stream
from ..tasks.state import TaskState
from ..world import World, register_indexer, register_retirer
from .cleanup_fold import fold_cleanup as fold_cleanup  # registers the cleanup stream's fold
from .events import (
    CleanupEvent,
    TurnCompleted,
    TurnCompletionRefused,
    TurnCompletionReported,
    TurnDelivered,
    TurnDeliveryFailed,
    TurnDeliveryHeld,
    TurnDeliveryRetryScheduled,
    TurnEvent,
    TurnExited,
    TurnExitObserved,
    TurnFailed,
    TurnObservationDropped,
    TurnProgressed,
    TurnSettingsChanged,
    TurnStallDiagnosed,
    TurnStalled,
    TurnStallObserved,
    TurnStarted,
    WakeupAggregated,
    WakeupDispatched,
    WakeupDropped,
    WakeupEvent,
    WakeupFoundBusy,
    WakeupRequested,
)
from .pass_events import (
    PassFinished,
    PassStarted,
    PassTaskBlocked,
    PassTaskDeferred,
    PassTaskFailed,
    TaskPassEvent,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
    TaskPassRetryScheduled,
)
from .settings import TurnSettings
from .state import (
    CleanupState,
    PassState,
    RoleState,
    TaskPassRetry,
    TurnState,
    TurnStatus,
    WakeupState,
)

# ─── folds: Turns on the task's stream ──────────────────────────────────────

# New states as their classes make them, and copies (as dataclasses.replace), without
# a frozen __init__'s cost: a fold makes one per event.
_copy_role, _copy_turn, _copy_wakeup = copier(RoleState), copier(TurnState), copier(WakeupState)
_copy_pass = copier(PassState)
_with_roles = copier(TaskState, stamped=True, changing=("roles",))
_new_role, _new_turn, _new_wakeup = maker(RoleState), maker(TurnState), maker(WakeupState)
_new_pass, _new_retry = maker(PassState), maker(TaskPassRetry)


def _role(state: TaskState, event: TurnEvent) -> RoleState:
    return state.roles.get(event.role) or _new_role(event.role)


def _with_role(state: TaskState, role: RoleState, event: TurnEvent) -> TaskState:
    # Read-only (..frozen), as every container a state holds; stamped: one copy.
    return _with_roles(state, event, roles=FrozenDict({**state.roles, role.name: role}))


def _active(state: TaskState, event: TurnEvent) -> tuple[RoleState, TurnState]:
    role = state.roles.get(event.role)
    if role is None or role.active is None or role.active.turn_id != event.turn_id:
        raise InvalidTransition(
            f"task {state.id}: {type(event).__name__} for Turn {event.turn_id} of role "
            f"{event.role!r}, which is not its active Turn"
        )
    return role, role.active


def _update(state: TaskState, event: TurnEvent, **changes: Any) -> TaskState:
    role, turn = _active(state, event)
    return _with_role(state, _copy_role(role, active=_copy_turn(turn, **changes)), event)


def _end(state: TaskState, event: TurnEvent, status: TurnStatus, reason: str | None) -> TaskState:
    role, turn = _active(state, event)
    ended = _copy_turn(
        turn,
        status=status,
        ended_at=event.at,
        end_reason=reason,
        retry_at=None,
        completion_due_at=None,
    )
    return _with_role(state, _copy_role(role, active=None, last=ended), event)


@evolves(TurnStarted)
def _started(state: TaskState, event: TurnStarted) -> TaskState:
    role = _role(state, event)
    if role.active is not None:
        raise InvalidTransition(
            f"task {state.id}: Turn {event.turn_id} started while {role.active.turn_id} of "
            f"role {event.role!r} is active"
        )
    turn = _new_turn(
        turn_id=event.turn_id,
        role=event.role,
        status="started",
        started_at=event.at,
        progress_at=event.at,
        cause=event.cause,
        reasons=event.reasons,
    )
    return _with_role(state, _copy_role(role, turns=role.turns + 1, active=turn), event)


@evolves(TurnDelivered)
def _delivered(state: TaskState, event: TurnDelivered) -> TaskState:
    return _update(
        state,
        event,
        status="delivered",
        delivery_outcome=event.outcome,
        retry_at=None,
        delivery_held=False,
        progress_at=event.at,
    )


@evolves(TurnDeliveryRetryScheduled)
def _retry_scheduled(state: TaskState, event: TurnDeliveryRetryScheduled) -> TaskState:
    return _update(
        state,
        event,
        delivery_outcome=event.outcome,
        delivery_attempts=event.attempt + 1,
        retry_at=event.retry_at,
        delivery_held=False,
    )


@evolves(TurnDeliveryHeld)
def _delivery_held(state: TaskState, event: TurnDeliveryHeld) -> TaskState:
    return _update(
        state,
        event,
        delivery_outcome=event.outcome,
        retry_at=None,
        delivery_held=True,
        held_by_pass=event.pass_id,
    )


@evolves(TurnDeliveryFailed)
def _delivery_failed(state: TaskState, event: TurnDeliveryFailed) -> TaskState:
    return _update(
        state,
        event,
        delivery_outcome=event.outcome,
        delivery_attempts=event.attempts,
        retry_at=None,
    )


@evolves(TurnProgressed)
def _progressed(state: TaskState, event: TurnProgressed) -> TaskState:
    _, turn = _active(state, event)
    # Progress never moves backwards; it also answers an earlier stall observation.
    return _update(
        state, event, progress_at=max(turn.progress_at, event.at), stall_observed_at=None
    )


@evolves(TurnCompletionReported)
def _completion_reported(state: TaskState, event: TurnCompletionReported) -> TaskState:
    return _update(state, event, completion_due_at=event.due_at)


@evolves(TurnCompleted)
def _completed(state: TaskState, event: TurnCompleted) -> TaskState:
    return _end(state, event, "completed", event.cause)


@evolves(TurnCompletionRefused)
def _completion_refused(state: TaskState, event: TurnCompletionRefused) -> TaskState:
    return state  # recorded for the audit; never applied


@evolves(TurnFailed)
def _failed(state: TaskState, event: TurnFailed) -> TaskState:
    return _end(state, event, "failed", event.reason)


@evolves(TurnExitObserved)
def _exit_observed(state: TaskState, event: TurnExitObserved) -> TaskState:
    return _update(state, event, exit_observed_at=event.at)


@evolves(TurnStallObserved)
def _stall_observed(state: TaskState, event: TurnStallObserved) -> TaskState:
    return _update(state, event, stall_observed_at=event.at)


@evolves(TurnStallDiagnosed)
def _stall_diagnosed(state: TaskState, event: TurnStallDiagnosed) -> TaskState:
    return _update(state, event, stall_diagnosed_at=event.at)


@evolves(TurnExited)
def _exited(state: TaskState, event: TurnExited) -> TaskState:
    return _end(state, event, "exited", event.cause)


@evolves(TurnStalled)
def _stalled(state: TaskState, event: TurnStalled) -> TaskState:
    return _end(state, event, "stalled", event.cause)


@evolves(TurnObservationDropped)
def _observation_dropped(state: TaskState, event: TurnObservationDropped) -> TaskState:
    return state  # the Turn it named had already ended (or was never active)


# ─── folds: the wakeup stream (the cleanup stream's: .cleanup_fold) ─────────


@evolves_stream(WakeupRequested, WakeupAggregated, WakeupFoundBusy, WakeupDispatched, WakeupDropped)
def _wakeup(state: WakeupState | None, event: Any) -> WakeupState | None:
    if isinstance(event, WakeupRequested):
        if state is not None:
            raise InvalidTransition(f"task {event.task_id}: a second pending wakeup requested")
        return _new_wakeup(event.task_id, (event.reason,), 1, event.at, event.at)
    if isinstance(event, WakeupAggregated):
        if state is None:
            raise InvalidTransition(f"task {event.task_id}: wakeup aggregated with none pending")
        reasons = state.reasons if event.reason in state.reasons else (*state.reasons, event.reason)
        return _copy_wakeup(
            state,
            reasons=reasons,
            request_count=state.request_count + 1,
            last_requested_at=event.at,
        )
    if isinstance(event, WakeupFoundBusy):
        if state is None:
            raise InvalidTransition(f"task {event.task_id}: wakeup found busy with none pending")
        return _copy_wakeup(
            state,
            busy_turn_id=event.turn_id,
            busy_attempts=event.attempt + 1,
            resignal_at=event.resignal_at,
        )
    if isinstance(event, WakeupDispatched) and state is None:
        raise InvalidTransition(f"task {event.task_id}: wakeup dispatched with none pending")
    return None  # dispatched or dropped: nothing pending any more


# ─── folds: pass and task-pass streams ──────────────────────────────────────


@evolves_stream(PassStarted, PassTaskBlocked, PassTaskDeferred, PassTaskFailed, PassFinished)
def _pass(state: PassState | None, event: Any) -> PassState:
    if isinstance(event, PassStarted):
        if state is not None:
            raise InvalidTransition(f"pass {event.pass_id} started twice")
        return _new_pass(
            event.pass_id,
            event.scope,
            event.keys,
            event.task_ids,
            event.concurrency,
            event.at,
            event.retried,
        )
    if state is None or state.finished_at is not None:
        raise InvalidTransition(f"pass {event.pass_id}: {type(event).__name__} outside the pass")
    if isinstance(event, PassTaskBlocked):
        return _copy_pass(state, blocked=FrozenDict({**state.blocked, event.task_id: event.error}))
    if isinstance(event, PassTaskDeferred):
        deferred = FrozenDict({**state.deferred, event.task_id: event.project_ids})
        return _copy_pass(state, deferred=deferred)
    if isinstance(event, PassTaskFailed):
        return _copy_pass(state, failed=FrozenDict({**state.failed, event.task_id: event.error}))
    return _copy_pass(state, done=event.done, finished_at=event.at)


@evolves_stream(TaskPassRetryScheduled, TaskPassRetryAbandoned, TaskPassRetryCleared)
def _task_pass_retry(state: TaskPassRetry | None, event: Any) -> TaskPassRetry | None:
    if isinstance(event, TaskPassRetryScheduled):
        return _new_retry(event.task_id, event.keys, event.attempt, event.retry_at)
    return None


@evolves_stream(TurnSettingsChanged)
def _turn_settings(state: TurnSettings | None, event: TurnSettingsChanged) -> TurnSettings:
    try:
        return TurnSettings(**{f.name: getattr(event, f.name) for f in fields(TurnSettings)})
    except ValueError as error:  # InvalidArgument: not settings tasktrail would record
        raise InvalidTransition(f"TurnSettingsChanged: {error}") from None


# ─── the world index ────────────────────────────────────────────────────────


def _index(world: World, event: TaskEvent, previous: Any, state: Any) -> None:
    """Keep ``world.indexes``: ``pending_wakeups``, ``task_pass_retries`` and
    ``open_cleanups`` (task id -> open roles), for passes and projections."""
    if isinstance(event, WakeupEvent):
        wakeups: dict[str, Any] = world.indexes.setdefault("pending_wakeups", {})
        if state is None:
            wakeups.pop(event.task_id, None)
        else:
            wakeups[event.task_id] = state
    elif isinstance(event, TaskPassEvent):
        retries: dict[str, TaskPassRetry] = world.indexes.setdefault("task_pass_retries", {})
        if state is None:
            retries.pop(event.task_id, None)
        else:
            retries[event.task_id] = state
    elif event.stream_id().startswith("cleanup:"):
        cleanups: dict[str, list[str]] = world.indexes.setdefault("open_cleanups", {})
        open_roles = state.open_roles()
        if open_roles:
            cleanups[event.task_id] = open_roles
        else:
            cleanups.pop(event.task_id, None)


register_indexer(_index, task_streams=False, reacts_to=(WakeupEvent, TaskPassEvent, CleanupEvent))


def pending_wakeups(world: World) -> dict[str, Any]:
    """Every pending Leader wakeup, by task id (:class:`~.turns.WakeupState` values)."""
    return dict(world.indexes.get("pending_wakeups", {}))


def task_pass_retries(world: World) -> dict[str, TaskPassRetry]:
    """Every armed task-pass retry, by task id."""
    return dict(world.indexes.get("task_pass_retries", {}))


def _retired(world: World, stream_id: str, state: Any) -> bool | None:
    """A pass is finished with once it finished; a task's wakeup and retry streams once
    the task ended, its cleanup stream once no cleanup is open as well."""
    if isinstance(state, PassState):
        return state.finished_at is not None
    if isinstance(state, CleanupState):
        return state.task_id not in world.live and not state.open_roles()
    if isinstance(state, WakeupState | TaskPassRetry):
        return state.task_id not in world.live
    return None


register_retirer(_retired)
