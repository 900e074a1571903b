"""A property test with concurrent invocations (issue 27): tasks whose phases are sync
or async, that checkpoint, wait on children they submit, sleep, raise or finish, run
by a Worker with several invocations in flight (and a second worker on the same store
now and then). Whatever the interleaving: replay(log) == the scheduler's own state ==
the projections, and every task ends as a small model of its plan says."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import postgres_schema
from helpers.checks import folded_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain import Registry, Scheduler, TaskDefinition, Worker
from tasktrail.projections import Projector
from tasktrail.replay import replay

STEPS = ("next", "spawn", "sleep", "raise", "completed", "failed")
"""What a phase does: checkpoint the next step; submit a child and wait on it; sleep a
moment of the scheduler clock; raise; finish with an outcome."""


def plan_registry(plans: dict[str, tuple[tuple[str, bool], ...]]) -> Registry:
    """One task kind whose phase ``s<i>`` does step ``i`` of the task's plan (``plans``
    by task id, filled once the task is submitted)."""

    def phase_at(index: int) -> Any:
        def decide(inv: Any, step: str) -> None:
            after = f"s{index + 1}"
            if step == "next":
                inv.checkpoint(after)
            elif step == "spawn":
                child = inv.submit("child")
                inv.wait([child], "all", then=after)
            elif step == "sleep":
                inv.sleep(inv.now() + 1, then=after)
            elif step == "raise":
                raise RuntimeError(f"step {index} raised")
            else:
                inv.finish(step)

        def sync_phase(inv: Any) -> None:
            step, _ = plans[inv.task_id][index]
            time.sleep(0.001)
            decide(inv, step)

        async def async_phase(inv: Any) -> None:
            step, _ = plans[inv.task_id][index]
            await asyncio.sleep(0.001)
            decide(inv, step)

        def phase(inv: Any) -> Any:
            _, is_async = plans[inv.task_id][index]
            return async_phase(inv) if is_async else sync_phase(inv)

        return phase

    phases = {"start": lambda inv: "s0"} | {f"s{i}": phase_at(i) for i in range(4)}
    child = TaskDefinition("child", 1, {"go": lambda inv: inv.finish("completed")})
    return Registry([TaskDefinition("planned", 1, phases), child])


def expected(plan: tuple[tuple[str, bool], ...]) -> tuple[str, str]:
    """(status, outcome) the plan ends a task with."""
    for step, _ in plan:
        if step == "raise":
            return "terminal", "faulted"
        if step in ("completed", "failed"):
            return "terminal", step
    raise AssertionError("a plan ends in an outcome")


step = st.tuples(st.sampled_from(STEPS[:4]), st.booleans())
ending = st.tuples(st.sampled_from(("completed", "failed", "raise")), st.booleans())
plans_strategy = st.lists(
    st.tuples(st.lists(step, max_size=3), ending).map(lambda p: (*p[0], p[1])),
    min_size=1,
    max_size=8,
)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@settings(max_examples=8, deadline=None)
@given(plans=plans_strategy, concurrency=st.integers(1, 6), two_workers=st.booleans())
def test_concurrent_invocations_fold_the_same_everywhere(
    kind: str, plans: list[tuple[tuple[str, bool], ...]], concurrency: int, two_workers: bool
) -> None:
    table = {str(k): tuple(plan) for k, plan in enumerate(plans)}
    by_task: dict[str, tuple[tuple[str, bool], ...]] = {}
    registry = plan_registry(by_task)
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        path = (
            str(Path(folder) / "trail.db")
            if kind == "sqlite"
            else stack.enter_context(postgres_schema())
        )
        first = Scheduler.open(path, registry=registry, worker="first")
        second = Scheduler.open(path, registry=registry, worker="second") if two_workers else None
        tasks = {}
        for key in table:
            task_id = first.submit("planned")
            by_task[task_id] = table[key]
            tasks[task_id] = key
        workers = [Worker(first, concurrency=concurrency)]
        if second is not None:
            workers.append(Worker(second, concurrency=concurrency))
        deadline = time.monotonic() + 60
        while not all(first.task(t).status == "terminal" for t in tasks):
            assert time.monotonic() < deadline, "tasks did not end"
            for worker in workers:
                worker.tick()
            time.sleep(0.002)  # a sleep of 1 ms of the system clock falls due
        state = replay(first.store)
        live = {t: s for t, s in first.world.tasks.items()}
        assert {t: state.tasks[t] for t in live} == live
        with Projector(first.store, Path(folder) / "views.db") as projector:
            projector.catch_up()
            for name, rows in state.tables.items():
                keys = state.keys[name]
                stored = {
                    (tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]): r
                    for r in folded_rows(projector, name)
                }
                assert stored == rows, name
        for task_id, key in tasks.items():
            task = state.tasks[task_id]
            outcome = task.outcome.status if task.outcome is not None else None
            assert (task.status, outcome) == expected(table[key]), (table[key], task)
            assert task.restarts == 0
        for worker in workers:
            worker.scheduler.close()
