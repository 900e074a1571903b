"""Races between a fleet's writers that the store settles: a refusal names the stream
that moved, and a mint raced by the worker running its task is decided again. Found
by docs/hosting.md's PostgreSQL fleet under load: a submitter's ``mint_run`` lost two
races in a row to the worker running the task's phases and raised, naming the run it
was minting, which no one else had touched."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from helpers.checks import race_first_append, stale

from tasktrail.domain import (
    ConflictError,
    InMemoryExecutor,
    ManualClock,
    Registry,
    RunSettings,
    Scheduler,
    open_store,
)
from tasktrail.domain.app.fleet import FleetCommands
from tasktrail.domain.runs.events import RunMinted
from tasktrail.domain.runs.identity import run_stream_id
from tasktrail.domain.tasks.events import TaskRecovered

RACES = 4
"""Races a mint survives in a row (a worker's phase: a memo, a checkpoint, a sleep)."""


def test_a_decision_refused_for_a_task_it_read_names_that_task(fleet: Any, store_url: str) -> None:
    a, b = fleet("a"), fleet("b")
    waiter, awaited = a.submit("job"), a.submit("job")
    b.refresh()
    b.reserve(waiter)
    a.refresh()
    a.reserve(awaited)  # the task b's wait reads moves on
    head = a.store.head()
    with stale(b), pytest.raises(ConflictError) as refused:
        b.wait(waiter, on=[awaited], policy="all")
    assert b.store.head() == head  # nothing of the refused wait was appended
    if "://" in store_url:  # PostgreSQL names the key that broke
        assert refused.value.task_ids == [awaited]
        assert f"appended to {awaited} first" in str(refused.value)
    else:  # SQLite does not say which: each stream the decision wrote or read
        assert refused.value.task_ids == sorted([waiter, awaited])
        assert "one of" in str(refused.value)


def test_a_mint_raced_by_the_worker_running_its_task_is_decided_again(fleet: Any) -> None:
    """On PostgreSQL no writers' turn orders a caller's mint and the worker running the
    task: between the mint's read and its append the worker may move the task (a memo, a
    checkpoint, a sleep), and the store refuses the mint. It is decided again on the
    fresh state: four races in a row (a phase's events) still mint one run. Here the
    race is made on both stores, the worker moving the task as the mint appends."""
    caller, worker = fleet("caller"), fleet("worker")
    for s in (caller, worker):
        s.configure_runs(executor=InMemoryExecutor(), settings=RunSettings(run_spacing_ms=0))
    task = caller.submit("job")
    worker.refresh()
    worker.reserve(task)
    append = caller.store.append
    raced: list[int] = []

    def raced_append(events: Any, versions: Any, **kwargs: Any) -> list[int]:
        if any(isinstance(e, RunMinted) for e in events) and len(raced) < RACES:
            raced.append(1)
            worker.memo(task, "step", len(raced))  # the worker moves the task first
        return append(events, versions, **kwargs)

    caller.store.append = raced_append  # type: ignore[method-assign]
    run_id = caller.mint_run(task)
    assert len(raced) == RACES
    minted = [r.event for r in caller.store.read() if isinstance(r.event, RunMinted)]
    assert len(minted) == 1 and minted[0].stream_id() == run_stream_id(run_id)
    assert caller.run(run_id).task_id == task


def test_a_refusal_of_many_streams_names_five_and_counts_the_rest() -> None:
    """An act that moves thousands of rows (an archive's) is refused in one line."""
    many = ConflictError([f"task-{n}" for n in range(1, 2_001)], "moved")
    assert str(many).startswith(
        "another writer appended to one of task-1, task-2, task-3, task-4, task-5 "
        "and 1995 more first; nothing was recorded (moved)."
    )
    assert len(many.task_ids) == 2_000  # every one is kept for the caller
    assert "one of" not in str(ConflictError(["task-1"]))


def test_rule_09_a_worker_that_joins_while_a_peer_opens_keeps_the_task_it_reserved(
    store_url: str, clock: ManualClock, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by tests/test_fleet_processes.py on PostgreSQL, three workers opening at
    once: an open's recovery reads the leases, then decides on the store folded again
    under its turn. A worker that wrote its lease and reserved a task in between was
    judged by leases read before it had one: its running task was recovered from under
    it, or, as it checkpointed that task meanwhile, the open failed on the conflict."""
    submitter = Scheduler.open(store_url, clock=clock, registry=registry, worker="submitter")
    task = submitter.submit("job")
    submitter.close()
    judge = FleetCommands._lost
    joined: list[Scheduler] = []

    def joining_meanwhile(self: Any, **kwargs: Any) -> Any:
        lost = judge(self, **kwargs)
        if self.worker == "peer" and not joined:  # the leases are read; nothing decided yet
            late = Scheduler.open(store_url, clock=clock, registry=registry, worker="late")
            late.reserve(task)
            joined.append(late)
        return lost

    monkeypatch.setattr(FleetCommands, "_lost", joining_meanwhile)
    with Scheduler.open(store_url, clock=clock, registry=registry, worker="peer") as peer:
        assert joined, "the late worker joined while the peer opened"
        state = peer.task(task)
        assert (state.status, state.worker, state.restarts) == ("running", "late", 0)
        assert not any(isinstance(e, TaskRecovered) for e in peer.history(task))
        assert peer.heartbeat().recovered == []  # judged now: alive, its task its own
    joined[0].close()


def _running(live: Scheduler) -> tuple[str, Callable[[], None]]:
    """A task the live worker runs, and a move it makes on it (a memo)."""
    task = live.submit("job")
    live.reserve(task)
    return task, lambda: live.memo(task, "step", 1)


def _marked_below_a_cancelling_owner(live: Scheduler) -> tuple[str, Callable[[], None]]:
    """A task below a cancelling owner, marked already; the move: the live worker takes it
    to run its abort handler."""
    owner = live.submit("job")
    child = live.submit("job", owner=owner)
    live.abort(owner)
    assert live.task(child).request_marked
    return child, lambda: live.reserve(child)


def _running_below_a_completing_owner(live: Scheduler) -> tuple[str, Callable[[], None]]:
    """A task the live worker runs whose owner finished its phases and waits for it."""
    owner = live.submit("job")
    live.reserve(owner)
    child = live.submit("job", owner=owner)
    live.finish(owner)
    assert live.task(owner).status == "completing"
    live.reserve(child)
    return child, lambda: live.memo(child, "step", 1)


@pytest.mark.parametrize(
    "live_task", [_running, _marked_below_a_cancelling_owner, _running_below_a_completing_owner]
)
def test_rule_09_recovery_is_not_refused_for_the_live_tasks_it_passes_over(
    store_url: str,
    clock: ManualClock,
    registry: Registry,
    live_task: Callable[[Scheduler], tuple[str, Callable[[], None]]],
) -> None:
    """Found with the test above: recovery scans every live task (for running tasks of
    lost workers, missing cascade marks, owners to release), and each task it read
    guarded its append, so a live worker moving any of its own tasks refused it. Under
    load every attempt was refused and the open failed. A task it passes over now
    guards nothing: here the live worker moves its task as recovery appends, and the
    first append is taken."""
    live = Scheduler.open(store_url, clock=clock, registry=registry, worker="live", lease=60_000)
    kept, move = live_task(live)
    dead = Scheduler.open(store_url, clock=clock, registry=registry, worker="dead", lease=1_000)
    lost = dead.submit("job")
    dead.reserve(lost)
    clock.advance(2_000)  # the dead worker's lease ran out; the live one's runs
    before = live.task(kept)
    store = open_store(store_url)
    tries = race_first_append(  # the live worker moves its task as recovery appends
        store, lambda events: any(isinstance(e, TaskRecovered) for e in events), move
    )
    with Scheduler.open(store, clock=clock, registry=registry, worker="peer") as peer:
        assert len(tries) == 1  # recovered at the first try
        assert (peer.task(lost).status, peer.task(lost).restarts) == ("pending", 1)
        after = peer.task(kept)
        assert after.events == before.events + 1  # its move, and nothing of the recovery
        assert (after.status, after.worker) == ("running", "live")
    live.close()
    dead.close()
