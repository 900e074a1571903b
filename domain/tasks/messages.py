"""Messages into a task's mailbox, and waits for them (rules 20, 21 and 22).

A host (or another task's phase) sends a task a message on a topic with a JSON value
(:func:`send`, rule 20: only to a task whose outcome is not decided). A phase waits for
one (:func:`wait_message`): the task ``waiting`` with a ``message_topic`` and, given a
timeout, a deadline in ``until``; it may be reserved again once a message on the topic
is unread or the deadline passed (rule 21, :func:`message_wait_over`, read by
``reserve`` and ``readiness``). The invocation then reads the oldest unread message
first (``Invocation.message``), and what it read is marked read by a
:class:`MessagesRead` appended with its next decision, in the same append
(:func:`reading`): a crash before that decision leaves the message unread, read again
by the invocation after recovery. An abort mark beats a message (rule 22, applied where
``reserve`` and ``readiness`` look at the abort mark before any wait).

The mailbox is the task's own stream: every message is an event of the task, folded
by the one ``evolve``, so replay, projections and the live scheduler agree on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import InvalidArgument, RuleViolation
from ..frozen import frozen
from ..world import Draft
from .context import Context
from .events import TaskEvent, register_event
from .evolve import InvalidTransition, evolves, step
from .fields import finite_number
from .guards import invocation_decision, not_closing
from .state import Checkpoint, Message, TaskState
from .validation import act_fields, json_value, phase_name, require_task, time_ms


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageSent(TaskEvent):
    """A message on the topic ``message_topic`` with ``value`` went into the task's
    mailbox as its ``seq``-th message, sent by ``actor`` because ``why``. (``topic`` is
    every event's stored name, so the field is ``message_topic``.)"""

    command: ClassVar[str] = "send"
    seq: int
    message_topic: str
    value: Any
    actor: str | None = None
    why: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageWaitStarted(TaskEvent):
    """The task waits for a message on ``message_topic``, to resume at the checkpoint
    ``phase`` (and ``attempt``); ``until``: the deadline (scheduler clock, ms) after
    which it resumes without one, ``None`` for none."""

    command: ClassVar[str] = "wait_message"
    message_topic: str
    phase: str
    attempt: int | None = None
    until: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class MessagesRead(TaskEvent):
    """The invocation running the task read these messages (by ``seq``): recorded just
    before its next decision's events, in the same append (rule 21)."""

    command: ClassVar[str] = "read"
    seqs: tuple[int, ...]


for _cls in (MessageSent, MessageWaitStarted, MessagesRead):
    register_event(_cls)


# ─── the folds ─────────────────────────────────────────────────────────────


@evolves(MessageSent)
def _sent(state: TaskState, event: MessageSent) -> TaskState:
    if state.status == "completing":  # terminal is refused by evolve itself (rule 4)
        raise InvalidTransition(f"task {state.id}: MessageSent while completing")
    if event.seq != state.messages_sent + 1:
        raise InvalidTransition(
            f"task {state.id}: message {event.seq} after {state.messages_sent} messages"
        )
    message = Message(event.seq, event.message_topic, frozen(event.value), event.at)
    return step(state, event, mailbox=(*state.mailbox, message), messages_sent=event.seq)


@evolves(MessageWaitStarted)
def _wait_started(state: TaskState, event: MessageWaitStarted) -> TaskState:
    return waiting_for_message(state, event, event.message_topic)


def waiting_for_message(state: TaskState, event: Any, topic: str, **more: Any) -> TaskState:
    """The fold of a wait for a message on ``topic`` (rule 21): a message wait's, and an
    ask's (``more``: what the ask adds). ``event`` has the resumed ``phase``,
    ``attempt`` and ``until``."""
    if state.status != "running":
        raise InvalidTransition(f"task {state.id}: {type(event).__name__} while {state.status}")
    return step(
        state,
        event,
        status="waiting",
        mode=None,
        worker=None,
        checkpoint=Checkpoint(event.phase, event.attempt),
        on=(),
        policy=None,
        until=event.until,
        message_topic=topic,
        restarts=0,
        **more,
    )


@evolves(MessagesRead)
def _read(state: TaskState, event: MessagesRead) -> TaskState:
    if state.status != "running":
        raise InvalidTransition(f"task {state.id}: MessagesRead while {state.status}")
    read = set(event.seqs)
    return step(state, event, mailbox=tuple(m for m in state.mailbox if m.seq not in read))


# ─── the rules ─────────────────────────────────────────────────────────────


def send(
    draft: Draft,
    ctx: Context,
    task_id: str,
    topic: str,
    value: Any,
    *,
    actor: str | None = None,
    why: str | None = None,
) -> int:
    """Put a message on ``topic`` with ``value`` into the task's mailbox; returns its
    number in the mailbox (1 for the first message the task was ever sent)."""
    not_closing(ctx, task_id)
    task = require_task(draft, task_id)
    phase_name(topic, "topic", task_id)
    if value is None:
        raise InvalidArgument(
            "a message's value cannot be null: a phase reads None as no message",
            task_id=task_id,
        )
    value = json_value(value, f"message on {topic!r}", task_id)
    act = act_fields(actor, why, task_id)
    # 20. A message goes to a task whose outcome is not decided: a holding or ended
    #     task runs no phase that could read it.
    if task.status in ("completing", "terminal"):
        held = "holds" if task.status == "completing" else "ended with"
        outcome = task.outcome.status if task.outcome is not None else task.status
        raise RuleViolation(
            20,
            f"the task {held} its outcome ({outcome}); no phase will read a message on "
            f"{topic!r}, so nothing was sent",
            task_id=task_id,
        )
    seq = task.messages_sent + 1
    draft.emit(
        MessageSent(task_id=task_id, at=ctx.now, seq=seq, message_topic=topic, value=value, **act)
    )
    return seq


def wait_message(
    draft: Draft,
    ctx: Context,
    task_id: str,
    topic: str,
    phase: str | None = None,
    timeout_s: float | None = None,
    attempt: int | None = None,
) -> TaskState:
    """The running task waits for a message on ``topic``, to resume at the checkpoint
    ``phase`` (default: its current one) once one is unread, or after ``timeout_s``
    seconds without one (``None``: no timeout)."""
    task = invocation_decision(draft, ctx, task_id)
    topic = phase_name(topic, "topic", task_id)
    # 21. An abort handler cannot wait for a message (as it cannot sleep, rule 8): it
    #     must reach an outcome, and a message could hold it forever.
    if task.mode == "abort":
        raise RuleViolation(21, "an abort handler cannot wait for a message", task_id=task_id)
    until = wait_deadline(ctx, timeout_s, task_id)
    resume = resume_phase(task, phase, attempt)
    return draft.emit(
        MessageWaitStarted(
            task_id=task_id,
            at=ctx.now,
            message_topic=topic,
            phase=resume,
            attempt=attempt,
            until=until,
        )
    )


def wait_deadline(ctx: Context, timeout_s: float | None, task_id: str) -> float | None:
    """The deadline (scheduler clock, ms) of a wait for a message (or an answer) that
    gives up after ``timeout_s`` seconds; ``None`` for no timeout."""
    if timeout_s is None:
        return None
    seconds = finite_number(timeout_s)
    # 21. A timeout is a finite number of seconds >= 0.
    if seconds is None or seconds < 0:
        raise RuleViolation(
            21,
            f"timeout_s must be a finite number of seconds >= 0, not {timeout_s!r}",
            task_id=task_id,
        )
    return time_ms(ctx.now + seconds * 1000.0, "the message wait's deadline", task_id)


def resume_phase(task: TaskState, phase: str | None, attempt: int | None) -> str:
    """The checkpoint a wait resumes at: ``phase``, else the task's current one; the
    ``attempt`` checked (``None`` or an int >= 0)."""
    resume = phase if phase is not None else (task.checkpoint.phase if task.checkpoint else None)
    resume = phase_name(resume, "phase", task.id)
    if attempt is not None and (
        isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0
    ):
        raise InvalidArgument(f"attempt must be an int >= 0, not {attempt!r}", task_id=task.id)
    return resume


def message_wait_over(task: TaskState, now: float) -> bool:
    """Rule 21: whether a task waiting for a message may be reserved again: a message on
    its topic is unread, or its deadline passed. ``True`` for a task that waits for no
    message."""
    topic = task.message_topic
    if topic is None:
        return True
    if task.until is not None and now >= task.until:
        return True
    for ask in task.asks:  # an ask's wait ends with its answer, not a message (.asks)
        if ask.waiting and ask.topic == topic:
            return ask.status != "open"
    return any(m.topic == topic for m in task.mailbox)


def reading(seqs: Sequence[int], decision: Callable[..., Any]) -> Callable[..., Any]:
    """``decision`` with the messages ``seqs`` marked read first, in the same decision:
    what an invocation read is read once its next decision is recorded (rule 21)."""

    def decide(draft: Draft, ctx: Context, task_id: str, /, *args: Any, **kwargs: Any) -> Any:
        task = invocation_decision(draft, ctx, task_id)  # refused: nothing is marked
        unread = {m.seq for m in task.mailbox}
        read = tuple(seq for seq in seqs if seq in unread)
        if read:
            draft.emit(MessagesRead(task_id=task_id, at=ctx.now, seqs=read))
        return decision(draft, ctx, task_id, *args, **kwargs)

    return decide


def next_unread(task: TaskState, topic: str, taken: Sequence[int]) -> Message | None:
    """The oldest unread message on ``topic`` not among ``taken`` (those an invocation
    read already and has not marked yet), or ``None``."""
    if not isinstance(topic, str):
        raise InvalidArgument(f"a topic is a string, not {topic!r}", task_id=task.id)
    for message in task.mailbox:
        if message.topic == topic and message.seq not in taken:
            return message
    return None


__all__ = [
    "MessageSent",
    "MessageWaitStarted",
    "MessagesRead",
    "message_wait_over",
    "next_unread",
    "reading",
    "resume_phase",
    "send",
    "wait_deadline",
    "wait_message",
]
