"""Rule 7's wait-for graph: when a wait is over, and what each task waits for.

:func:`wait_satisfied` says when a waiter may wake; :func:`waits_for` gives a
task's edges in the wait-for graph as it stands (what ``verify``'s rule 7
invariant reads: an actual cycle there is a deadlock); :func:`wait_cycle` finds
the path a new wait would close once the tasks on it finish and hold, which is
what the scheduler's wait decision (:mod:`.running`) refuses.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..world import Draft
from .state import TaskState


def wait_satisfied(draft: Draft, task: TaskState) -> bool:
    """Rule 7: whether a waiting task may wake: ``all`` once every awaited task has
    ended; ``failFast`` as soon as one holds or ended with an outcome other than
    ``completed``.

    Peeked, under no guard: a wake rests only on tasks that ended or hold an outcome,
    which never change back, and a wait not over refuses the decision (no append); a
    guard on a live awaited task passed over would let its worker's moves refuse it."""
    ended = 0
    for awaited_id in task.on:
        awaited = draft.peek(awaited_id)
        if awaited is None:
            continue
        if awaited.status == "terminal":
            ended += 1
        if (
            task.policy == "failFast"
            and awaited.outcome is not None
            and awaited.outcome.status != "completed"
        ):
            return True
    return ended == len(task.on)


def waits_for(draft: Draft, task: TaskState) -> list[str]:
    """The live tasks ``task`` cannot end before now: its edges in the wait-for graph.

    A waiter waits for the live tasks it names, unless an abort mark has ended its
    wait (rules 3 and 8: it runs its abort path, and every live task below it has or
    is due a cascade mark, rule 6, which ends that task's wait too). A holder
    (``completing``, rule 5) waits for its live owned tasks.
    """
    if task.status == "completing":
        return draft.live_children(task.id)
    return _awaited(draft, task)


def _awaited(draft: Draft, task: TaskState) -> list[str]:
    """The live tasks a waiter without an abort mark names."""
    # A failFast waiter a failure already woke keeps its edges: they point at tasks
    # it owns, which it holds its outcome for if it finishes while they are live.
    if task.status != "waiting" or task.abort_requested:
        return []
    out = []
    for awaited_id in task.on:
        awaited = draft.get(awaited_id)
        if awaited is not None and awaited.live:
            out.append(awaited_id)
    return out


def wait_cycle(draft: Draft, waiter_id: str, awaited: Iterable[str]) -> list[str] | None:
    """A path from an awaited task back to the waiter that could deadlock, if any.

    Besides the edges of :func:`waits_for`, every live task has an edge to each of
    its live owned tasks: whatever it does now, it may yet finish, and then holds its
    outcome for them (rule 5), and a finish cannot be refused for the cycle it
    would close, so the wait is. (This covers the waiter's own owners: each leads
    down to the waiter.) The walk follows live work from the awaited tasks only,
    each task once; a step to an owned task reads ``X (which Y owns)``.
    """
    # Each task reached: the task it was reached from, and whether that one owns it.
    came_from: dict[str, tuple[str | None, bool]] = {}
    stack: list[str] = []
    for awaited_id in awaited:
        if awaited_id not in came_from:
            came_from[awaited_id] = (None, False)
            stack.append(awaited_id)
    while stack:
        node = stack.pop()
        if node == waiter_id:
            return _path(came_from, waiter_id)
        state = draft.get(node)
        if state is None or not state.live:
            continue
        for owned in draft.live_children(node):
            if owned not in came_from:
                came_from[owned] = (node, True)
                stack.append(owned)
        for named in _awaited(draft, state):
            if named not in came_from:
                came_from[named] = (node, False)
                stack.append(named)
    return None


def _path(came_from: dict[str, tuple[str | None, bool]], waiter_id: str) -> list[str]:
    steps: list[str] = []
    node: str | None = waiter_id
    while node is not None:
        previous, owned = came_from[node]
        steps.append(f"{node} (which {previous} owns)" if owned else node)
        node = previous
    return [waiter_id, *reversed(steps)]
