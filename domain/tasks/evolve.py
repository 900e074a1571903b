"""``evolve``: the one fold of events into task state.

The aggregate, the projections and the replay tool all apply this same
function, so "replay equals live" holds by construction. It never reads the
clock, the environment or storage, and never raises on a valid log; an event
that cannot follow the state it is applied to raises :class:`InvalidTransition`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ..frozen import EMPTY, FrozenDict, frozen
from .copies import copier, maker
from .events import (
    OUTCOME_STATUSES,
    AbortMarked,
    CheckpointCommitted,
    MemoRecorded,
    OutcomeHeld,
    RestartsCleared,
    SleepStarted,
    TaskEnded,
    TaskEvent,
    TaskMigrated,
    TaskRecovered,
    TaskReserved,
    TaskStopped,
    TaskSubmitted,
    WaitStarted,
)
from .state import AskState, Checkpoint, Outcome, TaskState


class InvalidTransition(ValueError):
    """An event cannot follow the state it was applied to: the log is not one
    tasktrail would write (an event after a terminal one, say)."""


T = TypeVar("T")


_replace = copier(TaskState)


step: Callable[..., TaskState] = copier(TaskState, stamped=True)
"""``step(state, event, **changes)``: the state after ``event``, ``changes`` stamped with
the event's time and count (one copy: :func:`evolve` copies a stamped state no further;
a fold that leaves ``running`` sets ``worker=None`` itself, for the same reason)."""
_new_task = maker(TaskState)
# The copies of the commonest events: each sets exactly these fields (no field is asked
# whether it changed, as ``step``'s are).
_to_running = copier(
    TaskState,
    stamped=True,
    changing=("status", "mode", "worker", "on", "policy", "until", "started_version"),
)
_to_decided = copier(
    TaskState,
    stamped=True,
    changing=(
        "status", "mode", "worker", "checkpoint", "on", "policy", "until", "outcome",
        "memos", "restarts",
    ),
)  # fmt: skip
_to_checkpoint = copier(TaskState, stamped=True, changing=("checkpoint", "restarts"))
_new_checkpoint = maker(Checkpoint)


Evolver = Callable[[TaskState, Any], TaskState]
_EVOLVERS: dict[type[TaskEvent], Evolver] = {}
F = TypeVar("F", bound=Evolver)


def evolves(*event_types: type[TaskEvent]) -> Callable[[F], F]:
    """Register the function that applies events of these types to a live task."""

    def register(fn: F) -> F:
        for event_type in event_types:
            _EVOLVERS[event_type] = fn
        return fn

    return register


StreamEvolver = Callable[[Any, Any], Any]
_STREAM_EVOLVERS: dict[type[TaskEvent], StreamEvolver] = {}
S = TypeVar("S", bound=StreamEvolver)


def evolves_stream(*event_types: type[TaskEvent]) -> Callable[[S], S]:
    """Register the fold of events that live outside their task's stream
    (``task_stream = False``): ``fn(state_or_None, event) -> state``."""

    def register(fn: S) -> S:
        for event_type in event_types:
            if event_type.task_stream:
                raise TypeError(f"{event_type.__name__} belongs to its task's stream")
            _STREAM_EVOLVERS[event_type] = fn
        return fn

    return register


def evolve_stream(state: Any, event: TaskEvent) -> Any:
    """The state of a non-task stream after ``event`` (``state`` is ``None`` at first)."""
    handler = _STREAM_EVOLVERS.get(type(event))
    if handler is None:
        raise InvalidTransition(f"no evolve for {type(event).__name__}")
    return handler(state, event)


def evolve(state: TaskState | None, event: TaskEvent) -> TaskState:
    """The task's state after ``event``; ``state`` is ``None`` before its first event."""
    if state is None:
        if type(event) is not TaskSubmitted:
            raise InvalidTransition(
                f"task {event.task_id}: {type(event).__name__} before the task was submitted"
            )
        return _submitted(event)
    if type(event) is TaskSubmitted:
        raise InvalidTransition(f"task {event.task_id}: submitted twice")
    if state.status == "terminal":
        # Rule 4: terminal is absorbing.
        raise InvalidTransition(
            f"task {state.id}: {type(event).__name__} after the terminal outcome"
        )
    handler = _EVOLVERS.get(type(event))
    if handler is None:
        raise InvalidTransition(f"task {state.id}: no evolve for {type(event).__name__}")
    next_state = handler(state, event)
    if next_state.worker is not None and next_state.status != "running":
        next_state = _replace(next_state, worker=None)  # a worker holds running tasks only
    if next_state.events == state.events + 1:
        return next_state  # stamped already (by step)
    return _replace(next_state, updated_at=event.at, events=state.events + 1)


# A big log holds a state per task: values many states share are kept once. They, and
# every container a state holds, are read-only (..frozen): a caller that changed one in
# place would change every task sharing it, and a state no event made.
_NO_MEMOS: FrozenDict[str, Any] = EMPTY
_NO_ROLES: FrozenDict[str, Any] = EMPTY
_PLAIN_OUTCOMES = {status: Outcome(status) for status in OUTCOME_STATUSES}


def _submitted(event: TaskSubmitted) -> TaskState:
    memos = _NO_MEMOS
    if event.memos is not None:  # a submitter's input, a fork's copy
        if not isinstance(event.memos, dict) or not all(isinstance(k, str) for k in event.memos):
            raise InvalidTransition(f"task {event.task_id}: memos must be a JSON object")
        memos = FrozenDict({name: frozen(value) for name, value in event.memos.items()})
    return _new_task(
        id=event.task_id,
        kind=sys.intern(event.kind),
        version=event.version,
        status="pending",
        checkpoint=_new_checkpoint(sys.intern(event.phase), event.attempt),
        memos=memos,
        roles=_NO_ROLES,
        owner_id=event.owner_id,
        conversation_id=event.conversation_id,
        project_ids=event.project_ids,
        trace=FrozenDict(event.trace) if event.trace is not None else None,
        abandon_on_restart=event.abandon_on_restart,
        priority=event.priority,
        submitted_at=event.at,
        updated_at=event.at,
        events=1,
    )


def _require(state: TaskState, event: TaskEvent, *statuses: str) -> None:
    if state.status not in statuses:
        raise InvalidTransition(f"task {state.id}: {type(event).__name__} while {state.status}")


@evolves(TaskReserved)
def _reserved(state: TaskState, event: TaskReserved) -> TaskState:
    _require(state, event, "pending", "waiting", "sleeping", "running")
    started = state.started_version if state.started_version is not None else state.events + 1
    if state.message_topic is not None:  # a message wait is over (tasks/messages.py)
        state = _replace(state, message_topic=None)
        if state.asks:  # and so is the wait for an ask's answer (tasks/asks.py)
            state = _replace(state, asks=tuple(_resumed(ask) for ask in state.asks))
    return _to_running(
        state,
        event,
        status="running",
        mode=event.mode,
        worker=event.worker,
        on=(),
        policy=None,
        until=None,
        started_version=started,
    )


def _resumed(ask: AskState) -> AskState:
    return ask if not ask.waiting else dataclasses.replace(ask, waiting=False)


@evolves(TaskMigrated)
def _migrated(state: TaskState, event: TaskMigrated) -> TaskState:
    return step(state, event, version=event.to_version, checkpoint=_new_checkpoint(event.phase))


@evolves(CheckpointCommitted)
def _checkpoint(state: TaskState, event: CheckpointCommitted) -> TaskState:
    _require(state, event, "running")
    checkpoint = _new_checkpoint(event.phase, event.attempt)
    # Rule 11: a different state is progress; the same checkpoint again is not.
    restarts = state.restarts if checkpoint == state.checkpoint else 0
    return _to_checkpoint(state, event, checkpoint=checkpoint, restarts=restarts)


@evolves(MemoRecorded)
def _memo(state: TaskState, event: MemoRecorded) -> TaskState:
    _require(state, event, "running")
    # The value read-only too: a phase that changed what it read would change the state.
    return step(state, event, memos=FrozenDict({**state.memos, event.name: frozen(event.value)}))


@evolves(WaitStarted)
def _wait(state: TaskState, event: WaitStarted) -> TaskState:
    _require(state, event, "running")
    return step(
        state,
        event,
        status="waiting",
        mode=None,
        worker=None,
        checkpoint=_new_checkpoint(event.phase, event.attempt),
        on=event.on,
        policy=event.policy,
        restarts=0,
    )


@evolves(SleepStarted)
def _sleep(state: TaskState, event: SleepStarted) -> TaskState:
    _require(state, event, "running")
    return step(
        state,
        event,
        status="sleeping",
        mode=None,
        worker=None,
        checkpoint=_new_checkpoint(event.phase, event.attempt),
        until=event.until,
        restarts=0,
    )


def _outcome(event: OutcomeHeld | TaskEnded) -> Outcome:
    if (
        event.message is None
        and event.detail is None
        and event.reason is None
        and event.result is None
    ):
        plain = _PLAIN_OUTCOMES.get(event.status)
        if plain is not None:
            return plain
    return Outcome(
        event.status, event.message, frozen(event.detail), event.reason, frozen(event.result)
    )


@evolves(OutcomeHeld)
def _held(state: TaskState, event: OutcomeHeld) -> TaskState:
    if state.message_topic is not None:
        state = _replace(state, message_topic=None)
    # Rule 14: memos disappear once an outcome is decided.
    return _to_decided(
        state,
        event,
        status="completing",
        mode=None,
        worker=None,
        checkpoint=None,
        on=(),
        policy=None,
        until=None,
        outcome=_outcome(event),
        memos=_NO_MEMOS,
        restarts=0,
    )


@evolves(TaskEnded)
def _ended(state: TaskState, event: TaskEnded) -> TaskState:
    if state.message_topic is not None:  # ended while waiting for a message (rule 13)
        state = _replace(state, message_topic=None)
    return _to_decided(
        state,
        event,
        status="terminal",
        mode=None,
        worker=None,
        checkpoint=None,
        on=(),
        policy=None,
        until=None,
        outcome=_outcome(event),
        memos=_NO_MEMOS,
        restarts=0,
    )


@evolves(AbortMarked)
def _abort_marked(state: TaskState, event: AbortMarked) -> TaskState:
    # Rule 12: a mark resets restarts, which from now on count abort cut-offs.
    return step(state, event, abort_requested=True, abort_reason=event.reason, restarts=0)


@evolves(TaskRecovered)
def _recovered(state: TaskState, event: TaskRecovered) -> TaskState:
    _require(state, event, "running")
    return step(state, event, status="pending", mode=None, worker=None, restarts=event.restarts)


@evolves(TaskStopped)
def _stopped(state: TaskState, event: TaskStopped) -> TaskState:
    _require(state, event, "running")
    return step(state, event, status="pending", mode=None, worker=None)


@evolves(RestartsCleared)
def _restarts_cleared(state: TaskState, event: RestartsCleared) -> TaskState:
    return step(state, event, restarts=0)
