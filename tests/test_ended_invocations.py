"""An invocation that its own decision ended runs no further phase, though its task runs
again by the time its phase returns (issue 40, item 3's fleet test).

A phase that sleeps its task (or waits) ends its invocation at that decision; its
function may still take a moment to return (a thread descheduled on a busy machine).
Meanwhile the sleep falls due and another worker reserves the task and runs its next
phase. The ended invocation, seeing the task running, used to run that phase too:
one phase of one task on two workers at once (the failure of
``test_three_workers_one_killed_every_task_ends_once`` under load, 8 ms apart).
"""

from __future__ import annotations

from typing import Any

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.app.phases import PassReport


def test_an_invocation_its_sleep_ended_leaves_the_next_phase_to_the_worker_that_took_it(
    store_url: str, clock: ManualClock
) -> None:
    ran: list[tuple[str, str]] = []
    peer: list[Scheduler] = []
    taken: list[Any] = []

    def work(inv: Any) -> None:
        inv.sleep(inv.now() + 1, then="wake")
        # Before this phase returns, the sleep is due and another worker takes the task.
        clock.advance(1)
        peer[0].refresh()
        taken.append(peer[0].start_invocation(inv.task_id, PassReport()))
        inv.scheduler.refresh()  # as another thread of this worker folds it meanwhile

    def wake(inv: Any) -> None:
        ran.append((inv.worker, "wake"))
        inv.finish("completed")

    registry = Registry([TaskDefinition("nap", 1, {"work": work, "wake": wake})])
    first = Scheduler.open(store_url, clock=clock, registry=registry, worker="first")
    peer.append(Scheduler.open(store_url, clock=clock, registry=registry, worker="peer"))
    task = first.submit("nap")
    first.run_pass()
    assert ran == []  # the ended invocation ran no phase of the peer's reservation
    assert first.task(task).worker == "peer"
    peer[0].run_invocation(task, taken[0], PassReport())
    assert ran == [("peer", "wake")]
    assert peer[0].task(task).status == "terminal"
    first.close()
    peer[0].close()
