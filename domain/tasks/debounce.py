"""Rule 35: submits of one kind with one debounce key, each within ``wait_s`` of the
last, collapse into one task, ready ``wait_s`` after the last of them with its memos.

The first submit of a window creates the task as any submission does, and sleeps it
until ``now + wait_s`` (:class:`~.flow_events.SubmitDebounced`); the key's own stream,
``debounce:[kind, key]``, names it (:class:`~.flow_events.DebounceOpened`). A later
submit with the key, while that task has never run, has no abort mark and still sleeps
(the clock is before its ``until``), collapses into it: a
:class:`~.flow_events.SubmitCollapsed` on the task moves ``until`` on and gives it this
submit's memos (and keys), and the submit returns its id. Once the task became ready
(its ``until`` passed, or it was reserved), the next submit opens a new window, a new
task. Across a fleet: a collapse is guarded by the key stream's version and appended to
the task's stream, and a new window appends to the key stream, so of two writers that
decided from the same log one is let in and the other, refused whole, decides again
on the log that holds the first (it collapses into the window the first opened, or
opens the next one if the first's collapse came after the window closed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidFlowPolicy
from ..world import Draft
from .context import Context
from .fields import MAX_STREAM_BYTES, text_problem
from .flow import DEBOUNCE_PREFIX, Debounce, flow_stream_id
from .flow_events import DebounceOpened, SubmitCollapsed, SubmitDebounced
from .guards import not_closing
from .limits import keys_event
from .starting import checked_memos, submit
from .state import DebounceWindow, Flow, TaskState
from .validation import act_fields, phase_name, time_ms


def collapsible(task: TaskState, now: float) -> bool:
    """Whether a submit at ``now`` collapses into ``task``, its key's latest window: it
    never ran, carries no abort mark and sleeps until after ``now``."""
    return (
        task.status == "sleeping"
        and task.started_version is None
        and not task.abort_requested
        and task.until is not None
        and now < task.until
    )


def submit_debounced(
    draft: Draft,
    ctx: Context,
    *,
    debounce: Debounce,
    task_id: str,
    kind: str,
    memos: Mapping[str, Any] | None = None,
    flow: Flow | None = None,
    actor: str | None = None,
    why: str | None = None,
    **submission: Any,
) -> str:
    """A submission under ``debounce`` (rule 35): collapsed into the key's open window,
    or a new task ``task_id`` (``submission``: :func:`~.starting.submit`'s other
    arguments) that opens the next one. Returns the id of the task it is."""
    not_closing(ctx, task_id)
    if not isinstance(debounce, Debounce):
        raise InvalidFlowPolicy(f"debounce must be a Debounce, not {debounce!r:.80}")
    phase_name(kind, "kind", task_id)
    stream_id = flow_stream_id(DEBOUNCE_PREFIX, kind, debounce.key)
    problem = text_problem("stream id", stream_id, MAX_STREAM_BYTES)
    if problem is not None:
        raise InvalidFlowPolicy(f"the debounce key of {kind}: {problem}", task_id=task_id)
    until = time_ms(ctx.now + debounce.wait_s * 1000.0, "the debounce window's end", task_id)
    window = draft.get_stream(stream_id)
    if isinstance(window, DebounceWindow):
        task = draft.get(window.task_id)
        if task is not None and collapsible(task, ctx.now):
            # 35. Within the window: the same task, ready wait_s after this submit, with
            #     its memos. Guarded by the key's stream: a window another writer opened
            #     meanwhile refuses this append.
            draft.guard_stream(stream_id)
            act = act_fields(actor, why, task.id)
            given = checked_memos(memos, task.id)
            draft.emit(
                SubmitCollapsed(
                    task_id=task.id, at=ctx.now, key=debounce.key, until=until, memos=given, **act
                )
            )
            if flow is not None and flow != task.flow:
                draft.emit(keys_event(task.id, ctx.now, flow))
            return task.id
    # 35. No window open: this submit opens one, a new task sleeping until its end.
    submit(draft, ctx, task_id=task_id, kind=kind, memos=memos, flow=flow, actor=actor,
           why=why, **submission)  # fmt: skip
    draft.emit(SubmitDebounced(task_id=task_id, at=ctx.now, key=debounce.key, until=until))
    draft.emit_stream(
        DebounceOpened(
            task_id=task_id, at=ctx.now, kind=kind, key=debounce.key, wait_s=debounce.wait_s
        )
    )
    return task_id
