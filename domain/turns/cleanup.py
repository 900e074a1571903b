"""Runtime-cleanup obligations: each role of a completed task owes its runtime a
cleanup (``cleanup.completed_task``), and so does an idle role of a live task that
is stopped (``cleanup.role_stopped``); they are kept on ``cleanup:<task id>`` so
that they outlive the task; an attempt settles the obligation, or is recorded as
failed and leaves it open.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal

from ..errors import InvalidArgument, RuleViolation
from ..tasks.context import Context
from ..tasks.events import TaskEnded, TaskEvent, TaskSubmitted
from ..tasks.guards import not_closing as _open
from ..tasks.state import TaskState
from ..tasks.validation import require_task as _task
from ..world import Draft, World, register_indexer
from .checks import check_role
from .events import (
    CleanupEvent,
    RuntimeCleanupFailed,
    RuntimeCleanupRequired,
    RuntimeCleanupSettled,
    cleanup_stream_id,
)
from .refusals import TurnRuleViolation
from .rules import _fold_due_completion
from .settings import TurnSettings
from .state import CleanupState, Obligation, RoleState


def completed(task: TaskState) -> bool:
    """Whether the task's decided outcome is ``completed`` (held or terminal)."""
    return task.outcome is not None and task.outcome.status == "completed"


def cleanup_state(draft: Draft | World, task_id: str) -> CleanupState | None:
    """The cleanup obligations of a task's roles, or ``None`` if none were ever required."""
    stream_id = cleanup_stream_id(task_id)
    if isinstance(draft, Draft):
        state: CleanupState | None = draft.get_stream(stream_id)
    else:
        state = draft.streams.get(stream_id)
    return state


def owes_cleanup(role: RoleState, obligation: Obligation | None) -> bool:
    """Whether a role still needs a cleanup obligation: it never had one, or its
    last one was settled before the role's latest Turn started (a new runtime)."""
    if obligation is None:
        return True
    if obligation.open or obligation.settled_at is None:
        return False
    latest = role.active or role.last
    return latest is not None and latest.started_at > obligation.settled_at


def roles_owing_cleanup(task: TaskState, state: CleanupState | None) -> list[str]:
    """The roles of ``task`` that need a cleanup obligation now (see :func:`owes_cleanup`)."""
    known = state.obligations if state is not None else {}
    return [name for name, role in task.roles.items() if owes_cleanup(role, known.get(name))]


CLEANUP_OWED = "cleanup_owed"


def index_cleanup_owed(world: World, event: TaskEvent, previous: Any, state: Any) -> None:
    """Keep ``world.indexes["cleanup_owed"]``: the terminal completed tasks whose
    roles still owe a cleanup obligation (a full controller pass gives them one), so
    that a pass finds them without visiting every ended task."""
    task_stream = type(event).task_stream
    if not task_stream and not event.stream_id().startswith("cleanup:"):
        return
    owed: set[str] = world.indexes.setdefault(CLEANUP_OWED, set())
    task_id = event.task_id
    if not task_stream and task_id not in owed:
        return
    task = state if task_stream else world.get(task_id)
    if (
        isinstance(task, TaskState)
        and task.status == "terminal"
        and completed(task)
        and roles_owing_cleanup(task, cleanup_state(world, task_id))
    ):
        owed.add(task_id)
    else:
        owed.discard(task_id)


# Only an ended task can owe, and no event follows its end but its cleanup stream's;
# a submission makes the index (as any first task event did).
register_indexer(
    index_cleanup_owed, restorable=True, reacts_to=(TaskSubmitted, TaskEnded, CleanupEvent)
)


def cleanup_owed(world: World) -> set[str]:
    """The terminal completed tasks whose roles still owe a cleanup obligation."""
    owed: set[str] = world.indexes.get(CLEANUP_OWED, set())
    return owed


def require_cleanups(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    roles: Collection[str] | None = None,
    *,
    pass_id: str | None = None,
) -> list[str]:
    """Give each role of a completed task its runtime-cleanup obligation; returns
    the roles that got one now."""
    _open(ctx, task_id)
    task = draft.get(task_id)
    if task is None or not completed(task):
        return []
    required: list[str] = []
    for name in roles_owing_cleanup(task, cleanup_state(draft, task_id)):
        role = task.roles[name]
        if roles is not None and name not in roles:
            continue
        # cleanup.completed_task: a completed task's roles owe a cleanup; a role with an
        # active Turn waits for it to end, unless the task is terminal (its Turns are frozen).
        if role.active is not None and task.status != "terminal":
            continue
        draft.emit_stream(
            RuntimeCleanupRequired(
                task_id=task_id,
                at=ctx.now,
                role=name,
                cause="cleanup.completed_task",
                pass_id=pass_id,
            )
        )
        required.append(name)
    return required


def stop_roles(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    roles: Sequence[str],
) -> list[str]:
    """Stop idle roles of a live task: each gets a runtime-cleanup obligation (a pass
    then cleans up its runtime). A role's due completion is folded first; refused,
    appending nothing, if one of them still has an active Turn. Returns the roles that
    got an obligation now (one already open is left as it is)."""
    _open(ctx, task_id)
    task = _task(draft, task_id)
    if isinstance(roles, str) or not roles:
        raise InvalidArgument(f"roles must be a non-empty list of role names, not {roles!r}")
    names = list(dict.fromkeys(check_role(role, task_id) for role in roles))
    if task.status == "terminal":
        raise RuleViolation(4, "the task is terminal; its roles cannot be stopped", task_id=task_id)
    for name in names:
        if name not in task.roles:
            raise TurnRuleViolation(
                "cleanup.no_role", f"the task has no role {name!r} to stop", task_id=task_id
            )
        # turns.completion_due: a due completion is folded first (as start_turn does), so
        # a Turn whose agent finished does not keep its role from stopping.
        _fold_due_completion(draft, ctx, task_id, name, None)
        role = _task(draft, task_id).roles[name]
        # cleanup.role_stopped (yui): a role with an active Turn is not stopped.
        if role.active is not None:
            raise TurnRuleViolation(
                "cleanup.role_active",
                f"role {name!r} has an active Turn, {role.active.turn_id}; "
                "complete, fail or observe its end first",
                task_id=task_id,
            )
    state = cleanup_state(draft, task_id)
    known = state.obligations if state is not None else {}
    stopped = []
    for name in names:
        obligation = known.get(name)
        if obligation is not None and obligation.open:
            continue
        draft.emit_stream(
            RuntimeCleanupRequired(
                task_id=task_id, at=ctx.now, role=name, cause="cleanup.role_stopped"
            )
        )
        stopped.append(name)
    return stopped


def settle_cleanup(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    *,
    error: str | None = None,
    pass_id: str | None = None,
) -> Literal["settled", "failed"]:
    """Settle a role's open cleanup obligation, or, given ``error``, record a failed
    attempt (the obligation stays open)."""
    _open(ctx, task_id)
    _task(draft, task_id)
    check_role(role, task_id)
    open_obligation(draft, task_id, role)
    if error is not None:
        draft.emit_stream(
            RuntimeCleanupFailed(
                task_id=task_id, at=ctx.now, role=role, error=str(error), pass_id=pass_id
            )
        )
        return "failed"
    draft.emit_stream(
        RuntimeCleanupSettled(task_id=task_id, at=ctx.now, role=role, pass_id=pass_id)
    )
    return "settled"


NO_OBLIGATION = "cleanup.no_obligation"
"""The rule that refuses to settle, fail or claim an obligation that is not open."""


def open_obligation(draft: Draft, task_id: str, role: str, number: int | None = None) -> Obligation:
    """The role's open runtime-cleanup obligation (obligation ``number``, if given);
    refused (``cleanup.no_obligation``) without one."""
    state = cleanup_state(draft, task_id)
    obligation = state.obligations.get(role) if state is not None else None
    if (
        obligation is None
        or not obligation.open
        or (number is not None and obligation.number != number)
    ):
        which = "" if number is None else f" {number}"
        raise TurnRuleViolation(
            NO_OBLIGATION,
            f"role {role!r} has no open runtime-cleanup obligation{which}",
            task_id=task_id,
        )
    return obligation
