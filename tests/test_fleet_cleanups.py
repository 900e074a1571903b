"""Runtime cleanups in a fleet (round nine, docs/fleet.md "Runtime cleanups"): of the
workers sharing one store, at most one live one asks its runtime for a given cleanup
obligation at a time (it claims the obligation first, ``RuntimeCleanupClaimed``); the
claim of a worker whose lease expired is taken over once, and the cleanup then settles
once; a refused claim appends nothing. Each test runs on SQLite and on PostgreSQL, the
workers driven by one ManualClock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from helpers.probes import of_type

from tasktrail.domain import ManualClock, Registry, Scheduler
from tasktrail.domain.app.worker import Worker
from tasktrail.domain.turns import claims
from tasktrail.domain.turns.claims import claim_cleanup
from tasktrail.domain.turns.events import RuntimeCleanupClaimed, RuntimeCleanupSettled
from tasktrail.domain.turns.refusals import TurnRuleViolation
from tasktrail.domain.turns.runtime import Runtime

LEASE = 10_000


@pytest.fixture
def fleet(fleet: Any) -> Any:
    """The suite's ``fleet`` (conftest), each worker with a lease of :data:`LEASE`."""
    return lambda name: fleet(name, lease=LEASE)


class Cleanups(Runtime):
    """Answers every cleanup with ``answer``, after calling ``meanwhile`` (what another
    worker does while this runtime is cleaning up); notes what it was asked."""

    def __init__(self, answer: bool = True, meanwhile: Callable[[], Any] | None = None) -> None:
        self.answer = answer
        self.meanwhile = meanwhile
        self.asked: list[tuple[str, str]] = []

    def cleanup(self, task_id: str, role: str) -> bool:
        self.asked.append((task_id, role))
        if self.meanwhile is not None:
            self.meanwhile()
        return self.answer


def stopped_role(scheduler: Scheduler, task: str, role: str) -> None:
    """Run one Turn of ``role`` to its end, then stop the role (an open obligation)."""
    turn = scheduler.start_turn(task, role)
    scheduler.complete_turn(task, role, turn)
    assert scheduler.stop_roles(task, [role]) == [role]


def claimers(scheduler: Scheduler) -> list[tuple[str, str | None]]:
    return [(e.worker, e.taken_from) for e in of_type(scheduler, RuntimeCleanupClaimed)]


def test_two_workers_trying_one_cleanup_at_once_ask_one_runtime(fleet: Any) -> None:
    a, b = fleet("a"), fleet("b")
    task = a.submit("crew", id="t1", phase="lead")
    stopped_role(a, task, "worker")
    seen = b.cleanup_obligations(task)  # b knows the open obligation too
    assert seen is not None and seen.open_roles() == ["worker"]
    at_b = Cleanups()
    b_reports = []
    # While a's runtime cleans up, b's run of due cleanups comes to the same one.
    at_a = Cleanups(meanwhile=lambda: b_reports.append(b.run_cleanups(runtime=at_b)))
    report = a.run_cleanups(runtime=at_a)
    assert at_a.asked == [(task, "worker")]
    assert at_b.asked == []  # a claimed it: b's runtime is not asked
    assert report.cleanups == {task: {"worker": "settled"}} and report.errors == {}
    (held,) = b_reports
    assert held.cleanups == {task: {"worker": "held"}} and held.errors == {}
    assert claimers(a) == [("a", None)]
    assert len(of_type(a, RuntimeCleanupSettled)) == 1
    assert b.run_cleanups(runtime=at_b).cleanups == {}  # settled: nothing left for b
    assert at_b.asked == []


def test_a_pass_leaves_a_cleanup_another_worker_is_attempting_to_it(fleet: Any) -> None:
    a, b = fleet("a"), fleet("b")
    task = a.submit("crew", id="t1", phase="lead")
    stopped_role(a, task, "worker")
    b.refresh()  # a pass plans from what its scheduler folded (round eight: left so)
    at_b = Cleanups()
    passes = []
    # While a's Worker cleans up outside a pass, b runs a controller pass over the task.
    at_a = Cleanups(meanwhile=lambda: passes.append(b.controller_pass("full", runtime=at_b)))
    Worker(a, runtime=at_a).tick()
    assert at_a.asked == [(task, "worker")] and at_b.asked == []
    (passed,) = passes
    assert passed.outcomes[task] == "done" and passed.errors == {}  # not a failed cleanup
    assert len(of_type(a, RuntimeCleanupSettled)) == 1


def test_two_claims_decided_on_one_log_cannot_both_win(
    fleet: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = fleet("a"), fleet("b")
    task = a.submit("crew", id="t1", phase="lead")
    stopped_role(a, task, "worker")
    assert b.cleanup_obligations(task) is not None  # b folded the unclaimed obligation
    a.run_cleanups(runtime=Cleanups(answer=False))  # a claims it (not done yet)
    head = a.store.head()
    # b's next decision does not fold a's claim first: it decides on the log as b saw it,
    # and its claim's append meets the stream version a's claim took.
    real_refresh = b.refresh
    stale = [True]

    def refresh_once_stale() -> int:
        if stale.pop() if stale else False:
            return 0
        return real_refresh()

    monkeypatch.setattr(b, "refresh", refresh_once_stale)
    conflicts = b.conflicts
    alive = claims.LiveWorkers(b.live_workers)
    got = claims.claim(b, b.turn_settings, task, "worker", 1, alive)
    assert got == "held"  # decided again on the log as it stands: a holds it
    assert b.conflicts == conflicts + 1
    assert a.store.head() == head
    assert claimers(a) == [("a", None)]


def test_a_dead_workers_claim_is_taken_over_once_after_its_lease(
    fleet: Any, store_url: str, clock: ManualClock, registry: Registry
) -> None:
    a = Scheduler.open(store_url, clock=clock, registry=registry, worker="a", lease=LEASE)
    task = a.submit("crew", id="t1", phase="lead")
    stopped_role(a, task, "worker")
    at_a = Cleanups(answer=False)
    assert a.run_cleanups(runtime=at_a).cleanups == {task: {"worker": "open"}}
    a.store.close()  # a crash mid-cleanup: its claim stays, and its lease runs on
    b, c = fleet("b"), fleet("c")
    at_b, at_c = Cleanups(), Cleanups()
    assert b.run_cleanups(runtime=at_b).cleanups == {task: {"worker": "held"}}
    assert at_b.asked == []  # a's lease is current: nothing a live worker holds is taken
    clock.advance(LEASE + 1)
    taken = []
    # b takes the claim over; c, trying at the same time, finds b's claim and leaves it.
    at_b.meanwhile = lambda: taken.append(c.run_cleanups(runtime=at_c))
    worker_b = Worker(b, runtime=at_b)
    report = worker_b.tick()
    assert report.cleanups == {task: {"worker": "settled"}}
    assert at_b.asked == [(task, "worker")] and at_c.asked == []
    assert [r.cleanups for r in taken] == [{task: {"worker": "held"}}]
    assert claimers(b) == [("a", None), ("b", "a")]
    assert [e.role for e in of_type(b, RuntimeCleanupSettled)] == ["worker"]
    clock.advance(LEASE)
    worker_b.tick()
    assert c.run_cleanups(runtime=at_c).cleanups == {}
    assert at_b.asked == [(task, "worker")] and at_c.asked == []  # settled once


def test_a_refused_claim_appends_nothing(fleet: Any, clock: ManualClock) -> None:
    a, b = fleet("a"), fleet("b")
    task = a.submit("crew", id="t1", phase="lead")
    stopped_role(a, task, "worker")
    a.run_cleanups(runtime=Cleanups(answer=False))  # a holds the claim, not done yet
    head = a.store.head()
    with pytest.raises(TurnRuleViolation) as refused:
        b._decide(
            claim_cleanup, b.turn_settings, task, "worker", 1, held=False, alive=lambda w: True
        )
    assert refused.value.rule == "cleanup.claimed"
    assert b.store.head() == head
    at_b = Cleanups()
    worker_b = Worker(b, runtime=at_b)
    for _ in range(4):
        assert worker_b.tick().cleanups in ({}, {task: {"worker": "held"}})
        # b looks again on the backoff, not at every poll.
        due = worker_b.next_deadline()
        assert due is not None and due > clock.now
        clock.advance(500)
    assert at_b.asked == [] and b.store.head() == head


def test_a_restart_under_the_same_name_claims_again(
    fleet: Any, store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """A claim under this worker's name that this process did not make is an earlier
    process's: made again (through the stream's version), never assumed."""
    first = Scheduler.open(store_url, clock=clock, registry=registry, worker="a", lease=LEASE)
    task = first.submit("crew", id="t1", phase="lead")
    stopped_role(first, task, "worker")
    first.run_cleanups(runtime=Cleanups(answer=False))
    first.store.close()  # a crash
    again = fleet("a")
    at_again = Cleanups()
    assert again.run_cleanups(runtime=at_again).cleanups == {task: {"worker": "settled"}}
    assert claimers(again) == [("a", None), ("a", "a")]


def test_a_worker_that_started_after_the_lease_read_keeps_its_claim(
    fleet: Any, store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """The lease table a round of cleanups read before a worker started says nothing of
    that worker: its claim is not taken for a dead one's (both runtimes would be asked)."""
    z = Scheduler.open(store_url, clock=clock, registry=registry, worker="z", lease=LEASE)
    first = z.submit("crew", id="t1", phase="lead")
    second = z.submit("crew", id="t2", phase="lead")
    stopped_role(z, first, "worker")
    z.run_cleanups(runtime=Cleanups(answer=False))  # z claims t1's, then crashes
    z.store.close()
    clock.advance(LEASE + 1)
    a = fleet("a")
    stopped_role(a, second, "worker")
    at_b = Cleanups(answer=False)
    joined = []

    def b_joins_and_claims() -> None:
        # While a's runtime cleans up t1 (taken over from z, so a read the lease table),
        # worker b starts and claims t2's cleanup (its runtime at work on it).
        if not joined:
            b = fleet("b")
            joined.append(b.run_cleanups(runtime=at_b))

    at_a = Cleanups(meanwhile=b_joins_and_claims)
    report = a.run_cleanups(runtime=at_a)
    assert [r.cleanups for r in joined] == [{first: {"worker": "held"}, second: {"worker": "open"}}]
    assert at_b.asked == [(second, "worker")]
    assert report.cleanups == {first: {"worker": "settled"}, second: {"worker": "held"}}
    assert at_a.asked == [(first, "worker")]  # b's is b's: a's runtime is not asked
    assert claimers(a) == [("z", None), ("a", "z"), ("b", None)]


def test_a_pass_forgets_the_claims_and_attempts_of_obligations_settled_elsewhere(
    fleet: Any,
) -> None:
    """A host that runs passes itself (no Worker's rounds of cleanups) keeps no memory
    per obligation another writer settled: it would grow with every task it ever
    cleaned up."""
    a, b = fleet("a"), fleet("b")
    for task in ("t1", "t2"):
        a.submit("crew", id=task, phase="lead")
        stopped_role(a, task, "worker")
    a.controller_pass("full", runtime=Cleanups(answer=False))  # a claims both, not done
    attempts = a.cleanup_attempts
    assert attempts.holds("t1", "worker", 1) and attempts.due_at("t1", "worker", 1)
    b.settle_cleanup("t1", "worker")  # the host's own record, on another worker
    a.controller_pass("full", runtime=Cleanups(answer=False))
    assert not attempts.holds("t1", "worker", 1)
    assert attempts.due_at("t1", "worker", 1) is None
    assert attempts.holds("t2", "worker", 1)  # still open: still a's


def test_a_gone_processs_claim_is_taken_over_at_once(
    fleet: Any, store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Issue 27: a claim's holder whose process is gone (its liveness lock free) is not
    alive, though its lease still runs: its cleanup is taken over at once, once."""
    from test_liveness import die

    a = Scheduler.open(store_url, clock=clock, registry=registry, worker="a", lease=LEASE)
    task = a.submit("crew", id="t1", phase="lead")
    stopped_role(a, task, "worker")
    assert a.run_cleanups(runtime=Cleanups(answer=False)).cleanups == {task: {"worker": "open"}}
    b = fleet("b")
    at_b = Cleanups()
    assert b.run_cleanups(runtime=at_b).cleanups == {task: {"worker": "held"}}  # a lives
    die(a)  # its process is gone; its lease runs on
    clock.advance(2_500)  # past the cleanup's retry backoff (2 s at most), within the lease
    assert b.run_cleanups(runtime=at_b).cleanups == {task: {"worker": "settled"}}
    assert at_b.asked == [(task, "worker")]
    assert claimers(b) == [("a", None), ("b", "a")]
