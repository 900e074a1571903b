"""Forking a task: a new task that starts where another stood (SPEC section 9, "Acts").

A fork is a task of the source's kind, definition version and owner, ``pending`` at
the source's checkpoint (phase and attempt) with its memos, as the source stood after
a position of the log (what a bad deploy did after it is left behind). It is recorded
as the fork's own ``TaskSubmitted`` (kind, version, owner, checkpoint, memos, and who
forked it and why) followed, in the same decision, by :class:`TaskForked`: the source
and the position. So every reader that knows how a task begins reads a fork as it
reads any task, and the lineage is one event of the fork's own stream (``history``,
``explain``, the audit trail, the report), not two more fields of every submission.

Only the one task is forked: the tasks the source owns are not copied (a fork owns
nothing at first; its phases submit what they need), nor its abort mark, restarts,
roles or runs. A source with no checkpoint as of the position (it holds or reached an
outcome, rule 14 dropped its memos) cannot be forked: fork it as of an earlier
position. Reading the source as of a position is the application's
(:mod:`..commands.forking`); the decision here is given that state.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Refused
from ..frozen import thawed
from ..world import Draft
from .context import Context
from .events import TaskEvent, register_event
from .evolve import InvalidTransition, evolves, step
from .starting import submit
from .state import TaskState

FORKABLE = ("pending", "running", "waiting", "sleeping")
"""The statuses of a task that has a checkpoint to start a fork from."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskForked(TaskEvent):
    """The task just submitted is a fork of ``source_id``: its submission's checkpoint
    and memos are the source's as it stood after the log position ``source_position``.
    Recorded right after the fork's ``TaskSubmitted``, in the same decision."""

    source_id: str
    source_position: int


register_event(TaskForked)


@evolves(TaskForked)
def _forked(state: TaskState, event: TaskForked) -> TaskState:
    """Lineage only: the state is the submission's (one event more)."""
    if state.status != "pending" or state.events != 1:
        raise InvalidTransition(f"task {state.id}: TaskForked is not its second event")
    return step(state, event)


def fork(
    draft: Draft,
    ctx: Context,
    *,
    task_id: str,
    source: TaskState,
    position: int,
    trace: dict[str, str] | None = None,
    actor: str | None = None,
    why: str | None = None,
) -> TaskState:
    """Create ``task_id``, a fork of ``source`` as it stood after ``position`` (its
    state as of there, read by the caller), by ``actor``, because ``why``. Refused,
    appending nothing, when the source had no checkpoint there, and by every check
    of :func:`~.starting.submit` (an id taken; an owner that ended, rule 4, or holds
    its outcome, rule 5). Work forked below a cancelling owner is marked (rule 6)."""
    checkpoint = source.checkpoint
    if source.status not in FORKABLE or checkpoint is None:
        raise Refused(
            f"cannot be forked as of position {position}: it was {source.status} there, "
            "with no checkpoint to start from (fork it as of an earlier position)",
            task_id=source.id,
        )
    origin = TaskForked(task_id=task_id, at=ctx.now, source_id=source.id, source_position=position)
    return submit(
        draft,
        ctx,
        task_id=task_id,
        kind=source.kind,
        version=source.version,
        phase=checkpoint.phase,
        owner_id=source.owner_id,
        conversation_id=source.conversation_id,
        project_ids=source.project_ids,
        trace=trace,
        abandon_on_restart=source.abandon_on_restart,
        attempt=checkpoint.attempt,
        memos=thawed(dict(source.memos)) if source.memos else None,
        actor=actor,
        why=why,
        origin=origin,
    )
