"""Rules 5, 6 and 7 beside tasks other workers run: a decision guards what it rests
on, not every task it reads (docs/fleet.md, "Judged as of one read").

A read guard refuses a decision when another writer appended to a task it read. The
end of an owned task (rule 5: is its holder released?), the hold of an owner's outcome
(rule 5) and a cascade (rule 6) read a whole tree; guarding every task of it, each end
of a child was refused whenever another worker moved any live sibling. Rule 5 needs
only one live task to stay live for its decision to hold; a cascade needs guards only
on what it marks (a mark, and an end, never go back). A failFast waiter's wake (rule 7)
rests on the task that failed, whose outcome never changes: the live tasks it awaits
beside it need no guard."""

from __future__ import annotations

from typing import Any

from helpers.checks import race_first_append

from tasktrail.domain import Scheduler
from tasktrail.domain.tasks.ending import cascade, owns_live_task
from tasktrail.domain.tasks.events import TaskEnded, TaskReserved
from tasktrail.domain.world import Draft


def _tree(s: Scheduler, children: int) -> tuple[str, list[str]]:
    parent = s.submit("job")
    s.reserve(parent)
    return parent, sorted(s.submit("job", owner=parent) for _ in range(children))


def test_rule_05_an_owned_task_ends_beside_a_sibling_another_worker_moves(fleet: Any) -> None:
    a, b = fleet("a"), fleet("b")
    parent, (first, second, third) = _tree(a, 3)
    a.finish(parent)  # rule 5: its outcome is held while they are live
    assert a.task(parent).status == "completing"
    a.reserve(third)
    b.refresh()
    b.reserve(second)  # a sibling that another worker runs
    tries = race_first_append(  # b moves its task as a's end appends
        a.store,
        lambda events: any(isinstance(e, TaskEnded) and e.task_id == third for e in events),
        lambda: b.memo(second, "step", 1),
    )
    a.finish(third)
    # The end guarded the first live sibling only (``first``, pending): b's move on
    # ``second`` did not refuse it.
    assert len(tries) == 1
    assert a.task(third).status == "terminal"
    assert (a.task(first).status, a.task(second).status) == ("pending", "running")
    assert a.task(parent).status == "completing"  # held while they are live


def test_rule_05_the_decision_guards_one_live_owned_task(fleet: Any) -> None:
    a = fleet("a")
    parent, children = _tree(a, 4)
    draft = Draft(a.world)
    assert owns_live_task(draft, parent)
    assert draft.guards() == {children[0]: a.task(children[0]).events}
    a.finish(parent)
    for child in children:  # each end releases the holder only once none is live
        a.reserve(child)
        a.finish(child)
    assert a.task(parent).status == "terminal"
    assert not owns_live_task(Draft(a.world), parent)


def test_rule_06_a_cascade_guards_only_the_tasks_it_marks(fleet: Any) -> None:
    a = fleet("a")
    parent, children = _tree(a, 3)
    grandchild = a.submit("job", owner=children[1])
    a.abort(parent)  # rule 6: every live task below is marked
    assert all(a.task(t).request_marked for t in [*children, grandchild])
    late = a.submit("job", owner=children[2])  # submitted under a cancelling owner
    assert a.task(late).request_marked  # rule 6 at submit: it marks itself
    draft = Draft(a.world)
    cascade(draft, a._context(), parent)
    assert draft.events == []  # every one was marked already
    assert draft.guards() == {}  # and none of them is read under a guard


def test_rule_07_a_failfast_wake_is_taken_while_another_worker_moves_a_live_awaited_task(
    fleet: Any,
) -> None:
    a, b = fleet("a"), fleet("b")
    waiter = a.submit("job")
    running, failing = (a.submit("job", owner=waiter) for _ in range(2))
    a.reserve(waiter)
    a.wait(waiter, on=[running, failing], policy="failFast")
    a.reserve(failing)
    a.finish(failing, "failed")
    b.refresh()
    b.reserve(running)  # still live, on another worker
    tries = race_first_append(  # b moves the live awaited task as a's reservation appends
        a.store,
        lambda events: any(isinstance(e, TaskReserved) and e.task_id == waiter for e in events),
        lambda: b.memo(running, "step", 1),
    )
    a.reserve(waiter)  # woken by the failure (rule 7, failFast)
    assert len(tries) == 1
    assert (a.task(waiter).status, a.task(running).status) == ("running", "running")
