"""Per-tick work follows the live work, not the history (issue 14): the indexes a tick
reads hold only live or due work and agree with every task's state, and a tick reads
as many tasks on a store with a long history as on one with a short one.

The work is counted (tasks taken from the world), not timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import examples
from helpers.checks import index_problems
from helpers.report_stores import demo_store
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings
from tasktrail.domain.tasks.live_index import LIVE_ORDER, live_in_order
from tasktrail.domain.world import World
from tasktrail.replay import replay

NOW = 1_000_000_000.0


def test_the_demos_indexes_agree_with_its_tasks(tmp_path: Path) -> None:
    path = demo_store(tmp_path)
    assert index_problems(replay(str(path)).world) == []
    with Scheduler.open(str(path), clock=ManualClock(NOW)) as s:
        assert index_problems(s.world) == []


def store_with_history(path: Path, ended: int) -> Scheduler:
    """``ended`` tasks that ran and ended (a tenth of them once scheduled), then five
    live ones, two of them scheduled later."""
    clock = ManualClock(NOW)
    s = Scheduler.open(str(path), clock=clock)
    with s.batch():
        for n in range(ended):
            s.submit("k", id=f"old-{n}", phase="p")
            if n % 10 == 0:
                s.schedule_run(f"old-{n}", NOW - 1000)
            s.abort(f"old-{n}")
    s.run_pass()  # no definition: each marked task ends orphaned
    for n in range(5):
        s.submit("k", id=f"live-{n}", phase="p")
    s.schedule_run("live-0", NOW + 10**9)
    s.schedule_run("live-1", NOW + 10**9)
    s.configure_runs(executor=InMemoryExecutor(), settings=RunSettings(tz="UTC"))
    assert len(s.world.live) == 5
    assert index_problems(s.world) == []
    return s


class CountedTasks(dict[str, Any]):
    """A world's tasks, counting every task handed out (by key or by iteration)."""

    handed = 0

    def __getitem__(self, key: str) -> Any:
        CountedTasks.handed += 1
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        CountedTasks.handed += 1
        return super().get(key, default)

    def __iter__(self) -> Iterator[str]:
        for key in super().__iter__():
            CountedTasks.handed += 1
            yield key

    def values(self) -> Any:
        return [self[key] for key in self]

    def items(self) -> Any:
        return [(key, self[key]) for key in self]


def tick_reads(s: Scheduler) -> dict[str, int]:
    """How many tasks each tick call took from the world."""
    s.world.tasks = CountedTasks(s.world.tasks)
    calls = {
        "run_pass": s.run_pass,
        "dispatch_due": s.dispatch_due,
        "controller_pass": lambda: s.controller_pass("full"),
        "reconcile": s.reconcile,
        "wake": s.wake,
        "next_turn_deadline": s.next_turn_deadline,
    }
    out = {}
    for name, call in calls.items():
        CountedTasks.handed = 0
        call()
        out[name] = CountedTasks.handed
    return out


def test_a_tick_reads_as_many_tasks_after_a_long_history_as_after_a_short_one(
    tmp_path: Path,
) -> None:
    short = store_with_history(tmp_path / "short.db", 20)
    long = store_with_history(tmp_path / "long.db", 400)
    assert tick_reads(short) == tick_reads(long)
    assert max(tick_reads(long).values()) <= 10 * len(long.world.live)
    short.close()
    long.close()


@settings(max_examples=examples(100, 1000))
@given(
    st.lists(st.text("abcdef", min_size=1, max_size=4), unique=True, max_size=30),
    st.data(),
)
def test_live_in_order_is_submission_order_then_id_whichever_way_it_sorts(
    ids: list[str], data: st.DataObject
) -> None:
    """``live_in_order`` sorts by (number, id) whether every live task is numbered
    (its quick sort) or not (a task with no number sorts first, by id)."""
    world = World()
    world.live = set(ids)
    numbers = data.draw(st.permutations(range(1, len(ids) + 1)))
    numbered = data.draw(st.lists(st.sampled_from(ids), unique=True)) if ids else []
    if data.draw(st.booleans()):
        numbered = ids  # the usual case: every live task numbered
    order = {task_id: numbers[n] for n, task_id in enumerate(ids) if task_id in numbered}
    world.indexes[LIVE_ORDER] = dict(data.draw(st.permutations(list(order.items()))))
    expected = sorted(ids, key=lambda task_id: (order.get(task_id, 0), task_id))
    assert live_in_order(world) == expected
