"""What a running invocation decides: ``checkpoint``, ``memo``, ``wait`` and ``sleep``.

The ``decide`` functions of SPEC.md section 1 for the decisions a phase takes
while its task runs, each behind the guards of rules 2, 1 and 3: commit the
phase to resume at, remember a value (rule 14), wait on other tasks (rule 7),
sleep until a time (rule 8); when a wait is over, and the wait-for graph, are
:mod:`.waits`. Each emits its event into the :class:`~..world.Draft`, or raises
:class:`~..errors.RuleViolation` naming the rule, which appends nothing.

Each rule is applied in exactly one place, with its number in a comment above
the branch that applies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InvalidArgument, RuleViolation
from ..world import Draft
from .context import Context
from .events import CheckpointCommitted, MemoRecorded, Policy, SleepStarted, WaitStarted
from .fields import finite_number
from .guards import invocation_decision
from .state import TaskState
from .validation import json_value, phase_name, require_task, time_ms
from .waits import wait_cycle


def checkpoint(
    draft: Draft, ctx: Context, task_id: str, phase: str, attempt: int | None = None
) -> TaskState:
    """The running task commits where it resumes: progress unless it is the same checkpoint."""
    invocation_decision(draft, ctx, task_id)
    phase_name(phase, "phase", task_id)
    _attempt(attempt, task_id)
    return draft.emit(
        CheckpointCommitted(task_id=task_id, at=ctx.now, phase=phase, attempt=attempt)
    )


def _attempt(attempt: object, task_id: str) -> None:
    """A checkpoint's attempt is ``None`` or an int >= 0."""
    if attempt is not None and (
        isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0
    ):
        raise InvalidArgument(f"attempt must be an int >= 0, not {attempt!r}", task_id=task_id)


def memo(draft: Draft, ctx: Context, task_id: str, name: str, value: Any) -> TaskState:
    """The running task remembers ``value`` under ``name`` until its outcome (rule 14)."""
    invocation_decision(draft, ctx, task_id)
    phase_name(name, "memo name", task_id)
    value = json_value(value, f"memo {name!r}", task_id)
    return draft.emit(MemoRecorded(task_id=task_id, at=ctx.now, name=name, value=value))


def wait(
    draft: Draft,
    ctx: Context,
    task_id: str,
    on: Sequence[str],
    policy: Policy = "all",
    phase: str | None = None,
    attempt: int | None = None,
) -> TaskState:
    """The running task waits on other tasks, to resume at the checkpoint ``phase``
    (default: its current one) and ``attempt``: the state it commits carries a whole
    checkpoint, as pi-durable's does."""
    task = invocation_decision(draft, ctx, task_id)
    if isinstance(on, str):
        raise InvalidArgument("on must be a list of task ids, not a string", task_id=task_id)
    try:
        awaited = tuple(dict.fromkeys(on))
    except TypeError:  # not iterable, or holding something that cannot be a task id
        raise InvalidArgument(
            f"on must be a list of task ids, not {on!r}", task_id=task_id
        ) from None
    if policy not in ("all", "failFast"):
        raise InvalidArgument(
            f"policy must be 'all' or 'failFast', not {policy!r}", task_id=task_id
        )
    # 7. A wait names existing tasks...
    if not awaited:
        raise RuleViolation(7, "a wait must name at least one task", task_id=task_id)
    for awaited_id in awaited:
        if not isinstance(awaited_id, str) or draft.get(awaited_id) is None:
            raise RuleViolation(7, f"cannot wait on {awaited_id!r}: no such task", task_id=task_id)
    # 7. ... failFast names only tasks the waiter owns ...
    if policy == "failFast":
        foreign = [a for a in awaited if require_task(draft, a).owner_id != task_id]
        if foreign:
            raise RuleViolation(
                7,
                f"failFast may wait only on tasks it owns; not on {', '.join(foreign)}",
                task_id=task_id,
            )
    # 7. ... and a wait that would close a cycle in the wait-for graph is refused.
    cycle = wait_cycle(draft, task_id, awaited)
    if cycle:
        raise RuleViolation(
            7, f"waiting would close a cycle: {' -> '.join(cycle)}", task_id=task_id
        )
    resume = phase if phase is not None else (task.checkpoint.phase if task.checkpoint else None)
    resume = phase_name(resume, "phase", task_id)
    _attempt(attempt, task_id)
    return draft.emit(
        WaitStarted(
            task_id=task_id, at=ctx.now, on=awaited, policy=policy, phase=resume, attempt=attempt
        )
    )


def sleep(
    draft: Draft,
    ctx: Context,
    task_id: str,
    until: float,
    phase: str | None = None,
    attempt: int | None = None,
) -> TaskState:
    """The running task sleeps until the clock reaches ``until``, to resume at the
    checkpoint ``phase`` (default: its current one) and ``attempt`` (a retry's backoff
    names the attempt it resumes with)."""
    task = invocation_decision(draft, ctx, task_id)
    # 8. An abort invocation cannot sleep, whatever its until (pi-durable asks this
    # first); and a sleep needs a finite until >= 0.
    if task.mode == "abort":
        raise RuleViolation(8, "an abort handler cannot sleep", task_id=task_id)
    if (usable := finite_number(until)) is None or usable < 0:
        raise RuleViolation(
            8, f"until must be a finite time >= 0 in ms, not {until!r}", task_id=task_id
        )
    time_ms(until, "until", task_id)  # a finite time past year 9999 is a bad argument
    resume = phase if phase is not None else (task.checkpoint.phase if task.checkpoint else None)
    resume = phase_name(resume, "phase", task_id)
    _attempt(attempt, task_id)
    return draft.emit(
        SleepStarted(task_id=task_id, at=ctx.now, until=until, phase=resume, attempt=attempt)
    )
