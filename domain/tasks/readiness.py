"""Readiness: whether a live task can be reserved now, and if not, what it waits for.

:func:`readiness` reads the rules :func:`~.starting.reserve` applies, without
deciding anything: ``ready`` means a pass would reserve the task (or end it by
rule 12 or 13); otherwise it names what the task waits for. Rules 15 and 13
are answered from it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..world import Draft
from .context import Context
from .definitions import Registry, definition_fit, parked
from .ending import cancelling_ancestor
from .guards import held_elsewhere
from .limits import held_back, keys_of
from .messages import message_wait_over
from .state import TaskState
from .waits import wait_satisfied

Readiness = str
"""``ready``, ``running``, ``held``, ``waiting``, ``message`` (waiting for a message,
rule 21), ``sleeping``, ``owned_work``, ``cascade``, a blocked reason (rule 13), or
held back: ``limited`` (rule 33) or ``rate_limited`` (rule 34)."""


def readiness(
    draft: Draft,
    ctx: Context,
    task: TaskState,
    registry: Registry,
    failed_migrations: Iterable[str] = (),
) -> Readiness:
    """Whether a live task can be reserved now, and if not, what it waits for.

    ``ready`` means a pass would reserve it (or end it by rule 12 or 13);
    ``running`` that an invocation owns it. Rules 15 and 13 are answered from
    this.
    """
    if task.status == "completing":
        return "held"
    if task.status == "running" and not (task.mode == "run" and task.abort_requested):
        return "running"
    if held_elsewhere(task, ctx):
        return "running"  # another worker's invocation ends it at its next decision (rule 3)
    if not task.request_marked and cancelling_ancestor(draft, task.id) is not None:
        return "ready"  # its cascade mark is due (rule 6), which is work
    if task.abort_requested:
        if task.restarts >= ctx.restart_limit:
            return "ready"  # a reservation ends it faulted (rule 12), owned work or not
        if draft.live_children(task.id):
            return "owned_work"
        if not task.request_marked:
            fit = definition_fit(task, registry.get(task.kind), failed_migrations)
            if fit not in ("same", "migrate"):
                return fit
        return "ready"
    # 22. An abort mark beats a message (the branch above): only an unmarked waiter
    #     waits for one (rule 21).
    if task.message_topic is not None and not message_wait_over(task, ctx.now):
        return "message"
    if task.status == "waiting" and not wait_satisfied(draft, task):
        return "waiting"
    if task.status == "sleeping" and task.until is not None and ctx.now < task.until:
        return "sleeping"
    if parked(task, ctx.restart_limit):
        return "restart_limit"
    fit = definition_fit(task, registry.get(task.kind), failed_migrations)
    if fit not in ("same", "migrate"):
        return fit
    # 33, 34. Otherwise ready, but held back by its limit or its rate.
    held = held_back(draft, task, keys_of(task, registry), ctx.now)
    return held.reason if held is not None else "ready"
