"""Property tests: random command sequences never break the lifecycle's invariants."""

from __future__ import annotations

import tempfile
from pathlib import Path

from conftest import finishing
from hypothesis import given
from hypothesis import strategies as st

from tasktrail.domain import (
    ManualClock,
    Refused,
    Registry,
    Scheduler,
    TaskDefinition,
    World,
)
from tasktrail.domain.tasks.events import TaskEnded
from tasktrail.replay.harness import crash

SLOTS = 5  # commands name tasks by slot, so sequences stay short and meaningful

command = st.one_of(
    st.tuples(st.just("submit"), st.integers(-1, SLOTS - 1)),
    st.tuples(st.just("reserve"), st.integers(0, SLOTS - 1)),
    st.tuples(st.just("checkpoint"), st.integers(0, SLOTS - 1), st.sampled_from(["a", "b"])),
    st.tuples(st.just("memo"), st.integers(0, SLOTS - 1), st.integers()),
    st.tuples(
        st.just("wait"),
        st.integers(0, SLOTS - 1),
        st.lists(st.integers(0, SLOTS - 1), min_size=1, max_size=3),
        st.sampled_from(["all", "failFast"]),
    ),
    st.tuples(st.just("sleep"), st.integers(0, SLOTS - 1), st.integers(-5, 50)),
    st.tuples(
        st.just("finish"),
        st.integers(0, SLOTS - 1),
        st.sampled_from(["completed", "failed", "aborted"]),
    ),
    st.tuples(st.just("abort"), st.integers(0, SLOTS - 1)),
    st.tuples(st.just("retry"), st.integers(0, SLOTS - 1)),
    st.tuples(st.just("advance"), st.integers(0, 40)),
    st.tuples(st.just("pass")),
    st.tuples(st.just("crash")),
    st.tuples(st.just("close")),
)


def registry() -> Registry:
    return Registry(
        [
            TaskDefinition("a", 1, {"a": lambda inv: "b", "b": finishing()}),
            TaskDefinition("b", 1, {"a": finishing("failed")}),
        ]
    )


def apply(scheduler: Scheduler, ids: list[str], clock: ManualClock, step: tuple) -> None:
    name, *args = step

    def task(slot: int) -> str:
        return ids[slot % len(ids)] if ids else "none"

    match name:
        case "submit":
            owner = task(args[0]) if args[0] >= 0 and ids else None
            ids.append(scheduler.submit("a" if len(ids) % 2 else "b", owner=owner, phase="a"))
        case "reserve":
            scheduler.reserve(task(args[0]))
        case "checkpoint":
            scheduler.checkpoint(task(args[0]), args[1])
        case "memo":
            scheduler.memo(task(args[0]), "m", args[1])
        case "wait":
            scheduler.wait(task(args[0]), [task(s) for s in args[1]], args[2])
        case "sleep":
            scheduler.sleep(task(args[0]), clock.now + args[1])
        case "finish":
            scheduler.finish(task(args[0]), args[1])
        case "abort":
            scheduler.abort(task(args[0]))
        case "retry":
            scheduler.retry(task(args[0]))
        case "advance":
            clock.advance(args[0])
        case "pass":
            scheduler.run_pass()


def check_invariants(scheduler: Scheduler) -> None:
    store = scheduler.store
    fresh = World()
    for recorded in store.read():
        fresh.apply(recorded.event)
    # What the store holds folds to exactly what the scheduler holds in memory: every
    # live task, and any ended one the same once read back (issue 14: a reopened
    # scheduler holds the live work only).
    assert scheduler.world.live == fresh.live
    assert {t: scheduler.world.tasks[t] for t in fresh.live} == {
        t: fresh.tasks[t] for t in fresh.live
    }
    assert set(scheduler.world.tasks) <= set(fresh.tasks)
    for task_id, task in fresh.tasks.items():
        assert scheduler.world.get(task_id) == task
        stream = store.stream(task_id)
        ends = [i for i, e in enumerate(stream) if isinstance(e, TaskEnded)]
        # Never an event after a terminal one.
        assert not ends or ends == [len(stream) - 1], (task_id, stream)
        # One invocation at most: running has exactly one mode; no other status has one.
        assert (task.status == "running") == (task.mode is not None)
        # The eventsourcing aggregate rebuilt from the store equals the one in memory.
        assert store.aggregate(task_id).state == task
    for task_id in scheduler._invocations:
        assert scheduler.world.tasks[task_id].status == "running"


SEED_TASKS = [("submit", -1), ("submit", -1), ("submit", 0), ("reserve", 0), ("reserve", 1)]


@given(st.lists(command, min_size=1, max_size=30))
def test_random_commands_keep_lifecycle_invariants(steps: list[tuple]) -> None:
    steps = SEED_TASKS + steps
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trail.db"
        clock = ManualClock(0)
        scheduler = Scheduler.open(path, clock=clock, registry=registry(), restart_limit=2)
        ids: list[str] = []
        try:
            for step in steps:
                if step[0] in ("crash", "close"):
                    if step[0] == "close":
                        scheduler.close()
                    else:
                        crash(scheduler)
                    scheduler = Scheduler.open(
                        path, clock=clock, registry=registry(), restart_limit=2
                    )
                    check_invariants(scheduler)
                    continue
                before = scheduler.store.head()
                try:
                    apply(scheduler, ids, clock, step)
                except Refused:
                    # A refused command appends nothing.
                    assert scheduler.store.head() == before
                check_invariants(scheduler)
        finally:
            crash(scheduler)
