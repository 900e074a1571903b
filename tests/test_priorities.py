"""Priorities (rule 19): ``submit(..., priority=N)``, an int from -1000 to 1000 (default
0). A worker whose slots are scarce starts higher priorities first, then in submission
order; ``tasktrail tasks`` shows a priority other than 0; a bad one is refused."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from conftest import event_count
from helpers.cli import run

from tasktrail.domain import ManualClock, Registry, RuleViolation, Scheduler, TaskDefinition
from tasktrail.domain.app.phases import _rank
from tasktrail.domain.app.worker import Worker


def test_a_full_worker_takes_higher_priorities_first_then_submission_order(
    store_url: str, clock: ManualClock
) -> None:
    ran: list[str] = []

    def go(inv: Any) -> None:
        ran.append(inv.task_id)
        inv.finish("completed")

    s = Scheduler.open(
        store_url, clock=clock, registry=Registry([TaskDefinition("job", 1, {"go": go})])
    )
    try:
        # Low priorities first, then higher ones: one slot, so the order is the worker's.
        for task_id, priority in [
            ("low-1", 0),
            ("low-2", 0),
            ("below", -3),
            ("high-1", 5),
            ("mid", 1),
            ("high-2", 5),
            ("low-3", 0),
        ]:
            s.submit("job", id=task_id, priority=priority)
        Worker(s, concurrency=1).tick()
        assert ran == ["high-1", "high-2", "mid", "low-1", "low-2", "low-3", "below"]
    finally:
        s.close()


def test_priorities_hold_after_a_reopen_from_a_snapshot(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    s.submit("leaf", id="plain")
    s.submit("leaf", id="urgent", priority=1000)
    s.close()
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    try:
        assert s.snapshot_problems == [] and s.snapshot_at > 0
        assert s.task("urgent").priority == 1000 and s.task("plain").priority == 0
        assert s.runnable() == ["urgent", "plain"]
    finally:
        s.close()


@pytest.mark.parametrize("bad", [1001, -1001, 2**63, 1.5, "3", True, None])
def test_a_bad_priority_is_refused_by_rule_19(
    store_url: str, clock: ManualClock, registry: Registry, bad: object
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    try:
        head = event_count(store_url)
        with pytest.raises(RuleViolation) as refused:
            s.submit("job", phase="start", priority=bad)  # type: ignore[arg-type]
        assert refused.value.rule == 19
        assert "priority must be an int from -1000 to 1000" in str(refused.value)
        assert event_count(store_url) == head
    finally:
        s.close()


def test_tasks_shows_a_priority_and_submit_takes_one(
    sqlite_url: str, clock: ManualClock, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    Scheduler.open(sqlite_url, clock=clock, registry=registry).close()
    urgent = run(["submit", sqlite_url, "job", "--phase", "start", "--priority", "7"], capsys)
    plain = run(["submit", sqlite_url, "job", "--phase", "start"], capsys)
    assert urgent.code == plain.code == 0
    urgent_id, plain_id = urgent.out.split()[-1], plain.out.split()[-1]
    listed = run(["tasks", sqlite_url], capsys).out.splitlines()
    assert listed[1].split() == [urgent_id, "job", "pending", "start", "priority", "7"]
    assert listed[2].split() == [plain_id, "job", "pending", "start"]
    rows = [
        orjson.loads(line) for line in run(["tasks", sqlite_url, "--json"], capsys).out.splitlines()
    ]
    assert [row.get("priority") for row in rows] == [7, None]
    refused = run(["submit", sqlite_url, "job", "--phase", "start", "--priority", "5000"], capsys)
    assert refused.code != 0 and "rule 19" in refused.err


def test_workers_of_a_fleet_each_take_higher_priorities_first(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """With peers, a worker orders each priority its own way (rendezvous hashing, so
    that peers rarely race for one task), never across priorities."""
    fleet = [
        Scheduler.open(store_url, clock=clock, registry=registry, worker=w) for w in ("wa", "wb")
    ]
    try:
        for n in range(6):
            fleet[0].submit("leaf", id=f"normal-{n}")
        fleet[0].submit("leaf", id="low", priority=-1)
        fleet[0].submit("leaf", id="high", priority=2)
        for s in (*fleet, fleet[0]):
            s.heartbeat()  # each sees the other's lease
        orders = []
        for s in fleet:
            assert s.peers
            order = s.runnable()
            assert order[0] == "high" and order[-1] == "low"
            assert sorted(order[1:-1]) == [f"normal-{n}" for n in range(6)]
            assert order[1:-1] == sorted(order[1:-1], key=lambda t: _rank(s.worker, t))
            assert s.runnable(3) == order[:3]  # a worker with few free slots: the head
            orders.append(order)
        assert orders[0] != orders[1]  # each worker's own order within a priority
    finally:
        for s in fleet:
            s.store.close()  # not close(): each would stop what the other holds
