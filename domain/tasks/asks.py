"""Asks: a task asks a question of people and waits for the first answer (rules 30-32).

A phase asks (:func:`ask`, ``inv.ask(topic, request=..., phase=NEXT, timeout_s=None,
assignees=None)``): a message wait of rule 21's kind (the invocation ends, the task is
``waiting`` with ``message_topic`` and, given a timeout, ``until``) that also records what
is asked and of whom (:class:`AskOpened`, the task's :class:`~.state.AskState` on that
topic). The ask is open from that append on: an answer may come while the asking
phase's code still runs, and the task is ready as soon as that phase ends.

An answer (:func:`answer`, :class:`AskAnswered`, an act with who and why) is refused,
appending nothing, when no such ask is open (rule 30), when its actor is not among the
ask's assignees (rule 31), or when the ask was answered already (rule 32: the first
answer wins; the refusal names who answered and when). An open ask ends its task's wait
(``messages.message_wait_over`` reads it: no message on the topic ends it). An abort
mark closes a task's open ask (:func:`close_asks`, rule 22's precedence: ``AskClosed``,
cause ``abort``); a reservation past the deadline closes it (:func:`close_timed_out_ask`,
cause ``timeout``), and the resumed phase's ``inv.answer(topic)`` is ``None``.

Every ask, answer and close is an event of the task's own stream, folded by the one
``evolve``; the inbox's index of open asks is :mod:`.ask_inbox`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ..errors import InvalidArgument, RuleViolation
from ..frozen import frozen
from ..world import Draft
from .context import Context
from .describe import format_at
from .events import TaskEvent, register_event
from .evolve import InvalidTransition, evolves, step
from .guards import invocation_decision, not_closing
from .messages import resume_phase, wait_deadline, waiting_for_message
from .state import AskState, TaskState
from .validation import act_fields, json_value, phase_name, require_task, shown

CloseCause = Literal["timeout", "abort"]
MAX_ASSIGNEES = 100
"""The most names an ask's assignees may list (a group is a name of its own)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AskOpened(TaskEvent):
    """The task asks ``request`` on ``ask_topic`` of ``assignees`` (none: of anyone) and
    waits for the answer, to resume at the checkpoint ``phase`` (and ``attempt``);
    ``until``: the deadline (scheduler clock, ms) after which it resumes without one."""

    command: ClassVar[str] = "ask"
    ask_topic: str
    request: Any = None
    assignees: tuple[str, ...] = ()
    phase: str
    attempt: int | None = None
    until: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AskAnswered(TaskEvent):
    """``actor`` answered the task's open ask on ``ask_topic`` with ``value``, because
    ``why``: the first answer, the one the task reads."""

    command: ClassVar[str] = "answer"
    ask_topic: str
    value: Any
    actor: str | None = None
    why: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AskClosed(TaskEvent):
    """The task's open ask on ``ask_topic`` closed without an answer: its deadline
    passed (``cause`` ``timeout``, rule 21) or an abort mark came (``abort``, rule 22)."""

    command: ClassVar[str] = "close_ask"
    ask_topic: str
    cause: CloseCause


for _cls in (AskOpened, AskAnswered, AskClosed):
    register_event(_cls)


# ─── the folds ─────────────────────────────────────────────────────────────


def ask_on(task: TaskState, topic: str) -> AskState | None:
    """The task's latest ask on ``topic``, or ``None``."""
    for asked in task.asks:
        if asked.topic == topic:
            return asked
    return None


def open_ask(task: TaskState) -> AskState | None:
    """The task's open ask (a task waits for one at a time), or ``None``."""
    for asked in task.asks:
        if asked.status == "open":
            return asked
    return None


def _with(task: TaskState, asked: AskState) -> tuple[AskState, ...]:
    """The task's asks with ``asked`` as the one on its topic, last."""
    return (*(a for a in task.asks if a.topic != asked.topic), asked)


def _open_on(state: TaskState, event: AskAnswered | AskClosed) -> AskState:
    asked = ask_on(state, event.ask_topic)
    if asked is None or asked.status != "open":
        raise InvalidTransition(
            f"task {state.id}: {type(event).__name__} on {event.ask_topic!r} with no open ask"
        )
    return asked


@evolves(AskOpened)
def _opened(state: TaskState, event: AskOpened) -> TaskState:
    asked = AskState(event.ask_topic, frozen(event.request), event.assignees, event.at, event.until)
    return waiting_for_message(state, event, event.ask_topic, asks=_with(state, asked))


@evolves(AskAnswered)
def _answered(state: TaskState, event: AskAnswered) -> TaskState:
    asked = _open_on(state, event)
    answered = AskState(
        asked.topic,
        asked.request,
        asked.assignees,
        asked.asked_at,
        asked.deadline,
        "answered",
        asked.waiting,
        frozen(event.value),
        event.actor,
        event.why,
        event.at,
    )
    return step(state, event, asks=_with(state, answered))


@evolves(AskClosed)
def _closed(state: TaskState, event: AskClosed) -> TaskState:
    asked = _open_on(state, event)
    closed = AskState(
        asked.topic,
        asked.request,
        asked.assignees,
        asked.asked_at,
        asked.deadline,
        event.cause,
        asked.waiting,
        closed_at=event.at,
    )
    return step(state, event, asks=_with(state, closed))


# ─── the rules ─────────────────────────────────────────────────────────────


def ask(
    draft: Draft,
    ctx: Context,
    task_id: str,
    topic: str,
    request: Any = None,
    phase: str | None = None,
    timeout_s: float | None = None,
    assignees: Any = None,
    attempt: int | None = None,
) -> TaskState:
    """The running task asks ``request`` on ``topic`` of ``assignees`` (``None``: anyone)
    and waits for the first answer, resuming at the checkpoint ``phase`` (default: its
    current one) once answered, or after ``timeout_s`` seconds without an answer."""
    task = invocation_decision(draft, ctx, task_id)
    topic = phase_name(topic, "topic", task_id)
    # 21. An abort handler cannot wait for an answer, as it cannot wait for a message:
    #     it must reach an outcome.
    if task.mode == "abort":
        raise RuleViolation(21, "an abort handler cannot ask and wait", task_id=task_id)
    request = json_value(request, f"the ask on {topic!r}", task_id)
    who = _assignees(assignees, task_id)
    until = wait_deadline(ctx, timeout_s, task_id)
    resume = resume_phase(task, phase, attempt)
    return draft.emit(
        AskOpened(
            task_id=task_id,
            at=ctx.now,
            ask_topic=topic,
            request=request,
            assignees=who,
            phase=resume,
            attempt=attempt,
            until=until,
        )
    )


def _assignees(assignees: Any, task_id: str) -> tuple[str, ...]:
    """Who may answer: a list of names (each once, in order); ``None`` or an empty list
    for anyone."""
    if assignees is None:
        return ()
    if isinstance(assignees, str) or not isinstance(assignees, list | tuple | set | frozenset):
        raise InvalidArgument(
            f"assignees must be a list of names or None, not {shown(assignees)}", task_id=task_id
        )
    if len(assignees) > MAX_ASSIGNEES:
        raise InvalidArgument(
            f"an ask names at most {MAX_ASSIGNEES} assignees, not {len(assignees)}",
            task_id=task_id,
        )
    names = [phase_name(name, "an assignee", task_id) for name in assignees]
    return tuple(dict.fromkeys(sorted(names) if isinstance(assignees, set | frozenset) else names))


def answer(
    draft: Draft,
    ctx: Context,
    task_id: str,
    topic: str,
    value: Any,
    *,
    actor: str | None = None,
    why: str | None = None,
) -> TaskState:
    """``actor`` answers the task's open ask on ``topic`` with ``value`` because ``why``."""
    not_closing(ctx, task_id)
    task = require_task(draft, task_id)
    phase_name(topic, "topic", task_id)
    if value is None:
        raise InvalidArgument(
            "an answer cannot be null: a phase reads None as no answer (a timeout)",
            task_id=task_id,
        )
    value = json_value(value, f"the answer on {topic!r}", task_id)
    act = act_fields(actor, why, task_id)
    asked = ask_on(task, topic)
    # 32. The first answer wins: a second is refused, naming who answered and when.
    if asked is not None and asked.status == "answered":
        by = asked.actor if asked.actor is not None else "an actor not named"
        when = format_at(asked.closed_at) if asked.closed_at is not None else "?"
        raise RuleViolation(
            32,
            f"the ask on {topic!r} was answered already, by {by} at {when}; the first "
            "answer wins, so nothing was recorded",
            task_id=task_id,
        )
    # 30. An answer goes to an open ask: none on the topic, one closed (an abort mark,
    #     its deadline), or past its deadline (closed at the task's next reservation).
    if asked is None or asked.status != "open":
        raise RuleViolation(30, _not_open(task, topic, asked), task_id=task_id)
    if asked.deadline is not None and ctx.now >= asked.deadline:
        raise RuleViolation(
            30,
            f"the ask on {topic!r} timed out at {format_at(asked.deadline)}; the task "
            "resumes without an answer, so nothing was recorded",
            task_id=task_id,
        )
    # 31. Only an assignee answers an ask with assignees (one without: anyone).
    if asked.assignees and actor not in asked.assignees:
        who = "an actor not named" if actor is None else repr(actor)
        raise RuleViolation(
            31,
            f"only its assignees ({', '.join(asked.assignees)}) answer the ask on "
            f"{topic!r}, not {who}, so nothing was recorded",
            task_id=task_id,
        )
    return draft.emit(AskAnswered(task_id=task_id, at=ctx.now, ask_topic=topic, value=value, **act))


def _not_open(task: TaskState, topic: str, asked: AskState | None) -> str:
    if asked is None:
        return f"the task has no ask on {topic!r} to answer, so nothing was recorded"
    closed = "" if asked.closed_at is None else f" at {format_at(asked.closed_at)}"
    why = "by its deadline" if asked.status == "timeout" else "by an abort mark"
    return f"the ask on {topic!r} was closed {why}{closed}, so nothing was recorded"


def close_asks(draft: Draft, ctx: Context, task_id: str) -> None:
    """Close the task's open ask after its abort mark: the mark beats an answer, as it
    beats a message (rule 22). Called where a mark is emitted."""
    task = draft.get(task_id)
    asked = open_ask(task) if task is not None else None
    if asked is not None:
        draft.emit(
            AskClosed(task_id=task_id, at=ctx.now, rule=22, ask_topic=asked.topic, cause="abort")
        )


def close_timed_out_ask(draft: Draft, ctx: Context, task: TaskState) -> None:
    """Close the task's open ask whose deadline passed, as its reservation resumes it
    without an answer (rule 21's deadline)."""
    asked = open_ask(task)
    if asked is not None and asked.deadline is not None and ctx.now >= asked.deadline:
        draft.emit(
            AskClosed(task_id=task.id, at=ctx.now, rule=21, ask_topic=asked.topic, cause="timeout")
        )


__all__ = [
    "AskAnswered",
    "AskClosed",
    "AskOpened",
    "answer",
    "ask",
    "ask_on",
    "close_asks",
    "close_timed_out_ask",
    "open_ask",
]
