"""Deep owner trees (issue 14): cascades and recovery visit each task of a tree once,
and a submit's read guards do not grow with its depth.

The work is counted, not timed: every ``Draft.get`` a decision makes is one task read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.tasks import decide
from tasktrail.domain.tasks.events import AbortMarked, TaskRecovered, TaskReserved
from tasktrail.domain.world import Draft, World

DEPTH = 2_000
NOW = 1_000_000.0


def chain(depth: int) -> World:
    """A world holding one owner chain ``t0 <- t1 <- ... <- t{depth-1}``."""
    world = World()
    ctx = decide.Context(now=NOW)
    for n in range(depth):
        draft = Draft(world)
        decide.submit(
            draft,
            ctx,
            task_id=f"t{n}",
            kind="k",
            version=1,
            phase="p",
            owner_id=f"t{n - 1}" if n else None,
        )
        for event, state in zip(draft.events, draft.states, strict=True):
            world.apply(event, state)
    return world


def commit(draft: Draft) -> None:
    for event, state in zip(draft.events, draft.states, strict=True):
        draft.world.apply(event, state)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many tasks decisions read (``Draft.get`` calls) since the fixture began."""
    counted = [0]
    original = Draft.get

    def get(self: Draft, task_id: str) -> Any:
        counted[0] += 1
        return original(self, task_id)

    monkeypatch.setattr(Draft, "get", get)
    yield counted


def test_a_submits_guards_do_not_grow_with_its_depth() -> None:
    world = chain(DEPTH)
    draft = Draft(world)
    decide.submit(
        draft,
        decide.Context(now=NOW),
        task_id="leaf",
        kind="k",
        version=1,
        phase="p",
        owner_id=f"t{DEPTH - 1}",
    )
    assert set(draft.guards()) == {f"t{DEPTH - 1}"}


def test_a_submit_under_a_far_cancelling_owner_is_marked_and_guards_only_its_owner() -> None:
    # Another writer's mark on the root that missed the chain below (it had not
    # seen it yet): the new task is still marked, by the root, and the submit guards
    # its direct owner only.
    world = chain(DEPTH)
    world.apply(AbortMarked(task_id="t0", at=NOW))
    draft = Draft(world)
    state = decide.submit(
        draft,
        decide.Context(now=NOW),
        task_id="leaf",
        kind="k",
        version=1,
        phase="p",
        owner_id=f"t{DEPTH - 1}",
    )
    assert state.abort_requested
    marks = [e for e in draft.events if isinstance(e, AbortMarked)]
    assert [m.by for m in marks] == ["t0"]
    assert set(draft.guards()) == {f"t{DEPTH - 1}"}


def test_an_abort_cascade_reads_each_task_of_a_chain_a_bounded_number_of_times(
    reads: list[int],
) -> None:
    world = chain(DEPTH)
    reads[0] = 0
    draft = Draft(world)
    assert decide.abort(draft, decide.Context(now=NOW), "t0")
    assert len(draft.events) == DEPTH
    assert reads[0] <= 6 * DEPTH


def test_recovery_after_an_abort_reads_each_task_a_bounded_number_of_times(
    reads: list[int],
) -> None:
    world = chain(DEPTH)
    ctx = decide.Context(now=NOW, worker="w")
    draft = Draft(world)
    decide.abort(draft, ctx, "t0")
    commit(draft)
    # A crash left the deepest task running (in abort mode: nothing it owns is live).
    world.apply(TaskReserved(task_id=f"t{DEPTH - 1}", at=NOW, mode="abort", worker="w"))
    reads[0] = 0
    draft = Draft(world)
    decide.recover(draft, ctx)
    assert [type(e) for e in draft.events] == [TaskRecovered]
    # Quadratic recovery read about DEPTH**2 / 2 (2 million) tasks here.
    assert reads[0] <= 12 * DEPTH


def test_reopening_a_store_with_an_aborted_deep_chain_recovers_in_linear_reads(
    tmp_path: Any, reads: list[int]
) -> None:
    depth = 500
    clock = ManualClock(NOW)
    s = Scheduler.open(str(tmp_path / "s.db"), clock=clock)
    owner = None
    with s.batch():
        for n in range(depth):
            owner = s.submit("k", id=f"t{n}", phase="p", owner=owner)
    s.abort("t0")
    assert all(s.task(f"t{n}").abort_requested for n in range(depth))
    reads[0] = 0
    again = Scheduler.open(str(tmp_path / "s.db"), clock=clock)
    assert again.world.live == s.world.live
    assert reads[0] <= 12 * depth
    again.close()
