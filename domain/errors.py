"""The errors a tasktrail command raises. Every refusal appends nothing."""

from __future__ import annotations


class TasktrailError(Exception):
    """Base class of every error tasktrail raises on purpose."""


class Refused(TasktrailError):
    """A command was refused; nothing was appended.

    ``task_id`` names the task the command was about (``None`` for a
    scheduler-wide command) and ``reason`` says why in words a person reads.
    """

    def __init__(self, reason: str, *, task_id: str | None = None) -> None:
        self.task_id = task_id
        self.reason = reason
        where = f"task {task_id}: " if task_id is not None else ""
        super().__init__(f"{where}{reason}")


class RuleViolation(Refused):
    """A command broke one of the numbered precedence rules of SPEC.md.

    ``rule`` is the rule's number; the message names the rule, the task, and
    what to do next.
    """

    def __init__(self, rule: int, reason: str, *, task_id: str | None = None) -> None:
        self.rule = rule
        super().__init__(f"rule {rule}: {reason}", task_id=task_id)


class LeaseLost(RuleViolation):
    """A worker decided on a task that another worker of the fleet now holds: its
    lease expired (it paused or stalled past it) and its task was recovered and
    taken (rule 9 for a fleet, SPEC section 8); or, ``holder`` ``None``, the worker has
    been without its liveness lock long enough for the others to take its tasks.
    Nothing was recorded; the phase that decided has lost the task and should stop."""

    def __init__(self, task_id: str, worker: str, holder: str | None) -> None:
        self.worker = worker
        self.holder = holder
        why = (
            f"worker {worker} lost this task when its lease expired; worker {holder} holds it now"
            if holder is not None
            else f"worker {worker} has been without its liveness lock (its server session "
            "ended) long enough for other workers to take its tasks"
        )
        super().__init__(9, f"{why}, so nothing was recorded (stop this phase)", task_id=task_id)


class PhaseFenced(RuleViolation):
    """A phase that ran past its ``timeout_s`` decided after the scheduler had retried
    its task or ended it (rule 24): a sync phase cannot be killed, so it is fenced as a
    worker that lost its lease is. Nothing was recorded; the phase should stop."""

    def __init__(self, task_id: str, phase: str, timeout_s: float) -> None:
        self.phase = phase
        self.timeout_s = timeout_s
        super().__init__(
            24,
            f"phase {phase!r} ran past its timeout of {timeout_s:g} s and was retried or "
            "ended without it, so nothing was recorded (stop this phase)",
            task_id=task_id,
        )


class InvalidPolicy(RuleViolation, ValueError):
    """A retry policy or a timeout that cannot be kept (rule 25): refused when the
    definition is made, before any task runs under it."""

    def __init__(self, reason: str) -> None:
        super().__init__(25, reason)


class InvalidFlowPolicy(InvalidPolicy):
    """A flow-control policy that cannot be kept (rule 36): a ``Limit``, ``Rate`` or
    ``Debounce`` refused when it is made, or a key function whose answer for a
    submission's memos cannot name a key (the submission is refused, appending nothing)."""

    def __init__(self, reason: str, *, task_id: str | None = None) -> None:
        RuleViolation.__init__(self, 36, reason, task_id=task_id)


class PhaseTimeout(TasktrailError, TimeoutError):
    """What a phase that ran past its ``timeout_s`` is recorded as having raised: the
    error its retry (rule 23) or its task's end carries."""

    def __init__(self, phase: str, timeout_s: float) -> None:
        self.phase = phase
        self.timeout_s = timeout_s
        super().__init__(f"phase {phase!r} ran past its timeout of {timeout_s:g} s")


class UnknownTask(Refused, KeyError):
    """A command named a task id that no event in the store created."""

    def __init__(self, task_id: str) -> None:
        super().__init__("no such task in this store", task_id=task_id)

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return Refused.__str__(self)


class TaskIdTaken(Refused):
    """A submission (or a fork) named a task id that a task of the store already has.

    The same on every store, whether that task was there when the command decided or
    another writer's submission of the id was appended first while both decided (a
    race PostgreSQL's writers can run): nothing was appended; choose another id, or
    leave ``id`` out for a fresh one.
    """

    def __init__(self, task_id: str) -> None:
        super().__init__("a task with this id already exists", task_id=task_id)


class InvalidArgument(Refused, ValueError):
    """A command argument has the wrong type or is out of range."""


class ConflictError(TasktrailError):
    """Another writer appended to a task first (optimistic concurrency).

    Nothing of the losing command was appended. Call ``Scheduler.refresh()``
    and decide again, or use ``Scheduler.retrying()`` which does both.
    """

    def __init__(self, task_ids: list[str], detail: str = "") -> None:
        self.task_ids = task_ids
        """The streams another writer moved first: the one the store named, else each
        the refused decision wrote or read (one of them moved)."""
        tasks = ", ".join(task_ids[:5]) or "unknown tasks"
        if len(task_ids) > 5:  # an archive act's thousands of streams: a line, not a page
            tasks += f" and {len(task_ids) - 5} more"
        which = f"one of {tasks}" if len(task_ids) > 1 else tasks
        more = f" ({detail})" if detail else ""
        super().__init__(
            f"another writer appended to {which} first; nothing was recorded{more}. "
            "Refresh and decide again (Scheduler.retrying does this)."
        )


class ClockConflict(ConflictError):
    """An event this decision depended on (the previous event of a stream it writes,
    an event it read) is stamped later than the decision: its stamp missed the
    clamp to what the store holds. Nothing was recorded; the :class:`Scheduler`
    decides such a command again, stamped no earlier, on its own."""


class StoreError(TasktrailError):
    """The store could not be opened or read: a bad URL, a corrupt file, no server."""


class LogReplaced(StoreError):
    """The log a scheduler folded is gone from its store, or another took its place (a
    PostgreSQL schema dropped, and made again by a later open): the scheduler stops,
    and writes nothing of its state (no decision, no snapshot) into the store there
    now. Open the store again to work on the log it holds."""


class CorruptEvent(StoreError):
    """An event in a log could not be read; ``position`` says where."""

    def __init__(self, position: int | None, message: str) -> None:
        self.position = position
        where = f"at position {position}" if position is not None else "in the log"
        super().__init__(f"event {where}: {message}")


class UnknownEventTopic(CorruptEvent):
    """A log holds an event type this version of tasktrail does not know.

    Usually the store was written by a newer tasktrail; upgrade to read it.
    """

    def __init__(self, position: int | None, topic: str) -> None:
        self.topic = topic
        super().__init__(
            position,
            f"unknown event topic {topic!r} (written by a newer tasktrail? upgrade to read it)",
        )


class NewerEventVersion(UnknownEventTopic):
    """A log holds an event recorded under a newer ``class_version`` of its type
    than this tasktrail knows: the store was written by a newer tasktrail."""

    def __init__(self, position: int | None, topic: str, version: int, known: int) -> None:
        self.version = version
        self.known = known
        CorruptEvent.__init__(
            self,
            position,
            f"{topic} version {version} is newer than this tasktrail reads (up to version "
            f"{known}): the store was written by a newer tasktrail; upgrade to read it",
        )
        self.topic = topic
