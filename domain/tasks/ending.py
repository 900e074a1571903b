"""How a task ends: its outcome, held while owned work is live, and cancellation.

The ``decide`` functions of SPEC.md section 1 that end a task: :func:`finish`
(the running task decides its outcome), :func:`fault` (the scheduler ends it
``faulted``) and :func:`abort` (a request abort mark). :func:`end` holds an
outcome while the task owns live tasks (rule 5) and ends it otherwise,
releasing a holder whose last owned task ended; :func:`cascade` gives the live
descendants of a cancelling owner an abort mark, and
:func:`cancelling_ancestor` finds such an owner (rule 6).

Each rule is applied in exactly one place, with its number in a comment above
the branch that applies it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import InvalidArgument
from ..world import Draft
from .asks import close_asks
from .context import Context
from .definitions import Registry, definition_fit
from .events import AbortMarked, OutcomeHeld, OutcomeStatus, TaskEnded
from .guards import invocation_decision, not_closing
from .live_index import any_cancelling
from .state import Outcome, TaskState
from .validation import act_fields, json_value, require_task

FINISH_STATUSES: tuple[OutcomeStatus, ...] = ("completed", "failed", "aborted", "faulted")


def cancelling_ancestor(draft: Draft, task_id: str) -> TaskState | None:
    """The nearest live owner above ``task_id`` with cancellation intent (rule 6)."""
    # No live task cancelling, in the world or this decision: no chain to walk up.
    if not any_cancelling(draft.world) and not any(
        state.cancelling() for state in draft.changed.values()
    ):
        return None
    for ancestor in draft.ancestors(task_id):
        if ancestor.cancelling():
            return ancestor
    return None


def owns_live_task(draft: Draft, owner_id: str) -> bool:
    """Whether ``owner_id`` owns a live task, read under one guard: on the first live
    one, the rest peeked (guarding a tree, any live worker's move on one of its tasks
    would refuse the decision: docs/fleet.md). Rule 5 needs no more: a decision that
    saw owned work live is recorded only while that task has not moved, so it is still
    live, and the last owned task to end reads none live (an ended task never changes)
    and releases its holder."""
    live = draft.peek_live_children(owner_id)
    if live:
        draft.get(live[0].id)
    return bool(live)


def cascade(draft: Draft, ctx: Context, owner_id: str, visited: set[str] | None = None) -> None:
    """Give the live descendants of a cancelling owner an abort mark, parents first.

    ``visited``: tasks whose live subtrees earlier cascades of the same decision
    covered, shared so that cascades from every cancelling task of a tree walk each
    subtree once, not once per ancestor. A visited task is still marked here when it
    is not: an earlier cascade may have started at it (cancelling by a restart mark or
    a held failure, which is no request mark) and marked only what is below it.

    The tree is peeked: a task it marks is read under a guard as it is written, and
    one it passes over is marked already or ended, which never changes back.
    """
    if visited is not None:
        visited.add(owner_id)
    stack = [child.id for child in reversed(draft.peek_live_children(owner_id))]
    while stack:
        child_id = stack.pop()
        current = draft.peek(child_id)
        if current is None:
            continue
        # 6. A live owner with an abort mark, or holding an outcome other than
        #    completed, gives every live descendant an abort mark.
        if current.live and not current.request_marked:
            draft.emit(AbortMarked(task_id=child_id, at=ctx.now, rule=6, by=owner_id))
            close_asks(draft, ctx, child_id)  # 22. the mark beats an answer (.asks)
        if visited is not None:
            if child_id in visited:
                continue  # its subtree was walked already
            visited.add(child_id)
        stack.extend(child.id for child in reversed(draft.peek_live_children(child_id)))


def end(draft: Draft, ctx: Context, task: TaskState, outcome: Outcome, rule: int | None) -> None:
    """Decide ``task``'s outcome: hold it while owned work is live, else end it."""
    fields: dict[str, Any] = {
        "status": outcome.status,
        "message": outcome.message,
        "detail": outcome.detail,
        "reason": outcome.reason,
        "result": outcome.result,
    }
    # 5. Finishing with live owned tasks holds the outcome (completing).
    if owns_live_task(draft, task.id):
        draft.emit(
            OutcomeHeld(task_id=task.id, at=ctx.now, rule=5 if rule is None else rule, **fields)
        )
        if outcome.status != "completed":
            cascade(draft, ctx, task.id)
        return
    draft.emit(TaskEnded(task_id=task.id, at=ctx.now, rule=rule, **fields))
    release_owner(draft, ctx, task.owner_id)


def release_owner(draft: Draft, ctx: Context, owner_id: str | None) -> None:
    """End each holder upwards whose last owned task has ended."""
    # 5. The last owned task ending turns the holder terminal (and so on upwards).
    while owner_id is not None:
        owner = draft.get(owner_id)
        if owner is None or owner.status != "completing" or owns_live_task(draft, owner_id):
            return
        assert owner.outcome is not None
        draft.emit(
            TaskEnded(
                task_id=owner_id,
                at=ctx.now,
                rule=5,
                status=owner.outcome.status,
                message=owner.outcome.message,
                detail=owner.outcome.detail,
                reason=owner.outcome.reason,
                result=owner.outcome.result,
            )
        )
        owner_id = owner.owner_id


def finish(
    draft: Draft,
    ctx: Context,
    task_id: str,
    status: OutcomeStatus,
    *,
    message: str | None = None,
    detail: Any = None,
    reason: str | None = None,
    result: Any = None,
) -> TaskState:
    """The running task decides its outcome; held while it owns live tasks (rule 5).
    ``result``: JSON the task answers (:func:`.validation.json_value`'s limit)."""
    task = invocation_decision(draft, ctx, task_id)
    if status not in FINISH_STATUSES:
        raise InvalidArgument(
            f"status must be one of {', '.join(FINISH_STATUSES)}, not {status!r}", task_id=task_id
        )
    detail = json_value(detail, "error detail", task_id)
    if message is not None and not isinstance(message, str):
        raise InvalidArgument(f"error message must be a string, not {message!r}", task_id=task_id)
    json_value(message, "error message", task_id)
    if reason is not None and not isinstance(reason, str):
        raise InvalidArgument(f"reason must be a string, not {reason!r}", task_id=task_id)
    result = json_value(result, "result", task_id)
    end(draft, ctx, task, Outcome(status, message, detail, reason, result), rule=None)
    state = draft.get(task_id)
    assert state is not None
    return state


def fault(draft: Draft, ctx: Context, task_id: str, message: str, reason: str) -> TaskState:
    """The scheduler ends a running task ``faulted`` (a phase threw, a handler gave no outcome).

    Behind the guards of an invocation's decision (rules 2, 1 and 3): a run invocation
    whose task was abort-marked before its phase failed has ended, so the failure is
    no fault and the abort handler runs next (pi-durable decides the mark first).
    """
    task = invocation_decision(draft, ctx, task_id)
    end(draft, ctx, task, Outcome("faulted", message, None, reason), rule=None)
    state = draft.get(task_id)
    assert state is not None
    return state


def abort(
    draft: Draft,
    ctx: Context,
    task_id: str,
    *,
    registry: Registry | None = None,
    failed_migrations: Iterable[str] = (),
    actor: str | None = None,
    why: str | None = None,
) -> bool:
    """Put a request abort mark on the task (by ``actor``, because ``why``) and cascade
    it. Returns whether anything changed.

    Given the ``registry``, a task no definition can take that owns nothing live
    and runs no invocation ends ``orphaned`` at once (pi-durable's ``abort``
    settles it instead of leaving it to a pass).
    """
    not_closing(ctx, task_id)
    task = require_task(draft, task_id)
    act = act_fields(actor, why, task_id)
    # 4. An abort mark on a terminal task is a no-op.
    if task.status == "terminal":
        return False
    # 12. A request mark replaces a restart mark; a second request changes nothing.
    changed = False
    if not task.request_marked:
        draft.emit(AbortMarked(task_id=task_id, at=ctx.now, **act))
        close_asks(draft, ctx, task_id)  # 22. the mark beats an answer (.asks)
        changed = True
    before = len(draft.events)
    cascade(draft, ctx, task_id)
    marked = draft.get(task_id)
    assert marked is not None
    if (
        registry is not None
        and marked.status in ("pending", "waiting", "sleeping")
        and not draft.peek_live_children(task_id)  # none live: ended, never live again
    ):
        fit = definition_fit(marked, registry.get(marked.kind), failed_migrations)
        # 13. An abort-marked task that no definition can take ends orphaned once
        #     nothing it owns is live: here at once, by the request itself.
        if fit not in ("same", "migrate"):
            end(draft, ctx, marked, Outcome("orphaned", None, None, fit), rule=13)
    return changed or len(draft.events) > before
