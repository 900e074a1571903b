"""Rule 7's wait-for graph: when a wait is over, and what each task waits for.

:func:`wait_satisfied` says when a waiter may wake; :func:`waits_for` gives a
task's edges in the wait-for graph; :func:`wait_cycle` finds the path a new
wait would close. The scheduler's wait decision (:mod:`.running`) and
``verify``'s rule 7 invariant both read the graph from here, so they agree on
what a cycle is.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..world import Draft
from .state import TaskState


def wait_satisfied(draft: Draft, task: TaskState) -> bool:
    """Rule 7: whether a waiting task may wake: ``all`` once every awaited task has
    ended; ``failFast`` as soon as one holds or ended with an outcome other than
    ``completed``."""
    ended = 0
    for awaited_id in task.on:
        awaited = draft.get(awaited_id)
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
    """The live tasks ``task`` cannot end before: its edges in the wait-for graph.

    A waiter waits for the live tasks it names, unless an abort mark has ended its
    wait (rules 3 and 8: it runs its abort path, and every live task below it has or
    is due a cascade mark, rule 6, which ends that task's wait too). A holder
    (``completing``, rule 5) waits for its live owned tasks.
    """
    # A failFast waiter a failure already woke keeps its edges: they point at tasks
    # it owns, which it holds its outcome for if it finishes while they are live.
    if task.status == "completing":
        return draft.live_children(task.id)
    if task.status != "waiting" or task.abort_requested:
        return []
    out = []
    for awaited_id in task.on:
        awaited = draft.get(awaited_id)
        if awaited is not None and awaited.live:
            out.append(awaited_id)
    return out


def wait_cycle(draft: Draft, waiter_id: str, awaited: Iterable[str]) -> list[str] | None:
    """A path in the wait-for graph from an awaited task back to the waiter, if any.

    The waiter's own owners count as on the way back: each will hold its outcome for
    the waiter if it finishes while the waiter is live (rule 5), so a wait that leads
    to one of them closes the cycle the moment that owner finishes ``completed`` (a
    finish, unlike a wait, cannot be refused for it). It follows edges from the
    awaited tasks only (and the waiter's owner chain), never the whole world.
    """
    owners = {state.id for state in draft.ancestors(waiter_id)}
    stack: list[tuple[str, list[str]]] = [(a, [waiter_id, a]) for a in awaited]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        if node == waiter_id:
            return path
        if node in owners:
            return [*path, f"{waiter_id} (which {node} owns)"]
        if node in seen:
            continue
        seen.add(node)
        state = draft.get(node)
        if state is not None:
            stack.extend((nxt, [*path, nxt]) for nxt in waits_for(draft, state))
    return None
