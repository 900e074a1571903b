"""The workload every benchmark shares: a mix of every stream kind a scheduler writes.

One **cycle** is a small slice of a real service's life, 28 commands and about 36
events: a ``tree`` task that owns two ``job`` tasks and waits on them (``all``), each
job reserved, checkpointed and finished, the tree resumed and finished; a ``crew``
task asleep while a worker takes a Turn (started, delivered by a controller pass,
completed), whose wakeup request a later pass dispatches as a Leader Turn, completed
too; a manual run of the crew handed to an executor and reconciled once the job is
done; the crew aborted and ended, and a last controller pass. Task events, Turns,
wakeups, runs and pass records all go through the log, as they do in service.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.runs.executor import JobSnapshot, SubmitRequest
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings
from tasktrail.domain.turns.runtime import Runtime

START_MS = 1_767_603_600_000
COMMANDS_PER_CYCLE = 28
EVENTS_PER_CYCLE = 36
"""What one :func:`cycle` appends (the sizes of a run are given in events)."""
_FAR = 10**10  # the crew sleeps past every cycle: its Turns are what moves it


def registry() -> Registry:
    """``job`` (two phases), ``tree`` (plans, then joins its jobs), ``crew`` (a host of
    agents); commands drive them by hand."""
    return Registry(
        [
            TaskDefinition("job", 1, {"fetch": lambda t: "write", "write": lambda t: None}),
            TaskDefinition("tree", 1, {"plan": lambda t: None, "join": lambda t: None}),
            TaskDefinition("crew", 1, {"lead": lambda t: None, "wrap": lambda t: None}),
        ]
    )


class _Agents(Runtime):
    """An agent runtime that delivers every Turn at once."""

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        return "delivered"

    def cleanup(self, task_id: str, role: str) -> bool:
        return True


class _DoneAtOnce(InMemoryExecutor):
    """An executor whose jobs are done as soon as they are submitted."""

    def submit(self, request: SubmitRequest) -> JobSnapshot:
        snapshot = super().submit(request)
        self.finish(snapshot.job_id, "completed")
        return snapshot


AGENTS = _Agents()


def open_scheduler(path: Path | str, durability: str = "full") -> tuple[Scheduler, ManualClock]:
    """A scheduler on ``path`` with a manual clock, runs handed to an executor in memory."""
    clock = ManualClock(START_MS)
    scheduler = Scheduler.open(
        str(path),
        clock=clock,
        registry=registry(),
        durability=durability,  # type: ignore[arg-type]
    )
    scheduler.configure_runs(executor=_DoneAtOnce(), settings=RunSettings(tz="UTC"))
    return scheduler, clock


def steps(scheduler: Scheduler, clock: ManualClock, n: int) -> Iterator[None]:
    """One cycle (see the module), yielding after each command (each its own transaction
    outside a batch; a controller pass may commit more than one)."""
    s = scheduler
    tree = s.submit("tree", id=f"tree-{n:09d}")
    yield
    s.reserve(tree)
    yield
    jobs = []
    for k in range(2):
        jobs.append(s.submit("job", owner=tree, id=f"job-{n:09d}-{k}"))
        yield
    s.wait(tree, jobs, "all", phase="join")
    yield
    for job in jobs:
        s.reserve(job)
        yield
        s.checkpoint(job, "write")
        yield
        s.finish(job, "completed")
        yield
    s.reserve(tree)
    yield
    s.finish(tree, "completed")
    yield
    crew = s.submit("crew", id=f"crew-{n:09d}")
    yield
    s.reserve(crew)
    yield
    s.sleep(crew, clock.now + _FAR, phase="wrap")
    yield
    turn = s.start_turn(crew, "worker", reasons=["draft"])
    yield
    s.controller_pass(runtime=AGENTS)  # delivers the worker's Turn
    yield
    s.complete_turn(crew, "worker", turn, summary="drafted")
    yield
    s.request_wakeup(crew, "worker done")
    yield
    clock.advance(s.turn_settings.aggregation_window_ms)
    s.controller_pass(runtime=AGENTS)  # dispatches the wakeup as a Leader Turn
    yield
    leader = s.active_turn(crew, "leader")
    assert leader is not None
    s.complete_turn(crew, "leader", leader.turn_id)
    yield
    s.mint_run(crew)
    yield
    s.reconcile()  # the job is done: the run ends
    yield
    s.abort(crew)
    yield
    s.reserve(crew)  # the abort mark: it runs its abort path
    yield
    if s.task(crew).status == "running":
        s.finish(crew, "aborted")
        yield
    s.controller_pass(runtime=AGENTS)
    yield
    clock.advance(1)


def cycle(scheduler: Scheduler, clock: ManualClock, n: int) -> None:
    """One cycle (see the module) of commands."""
    for _ in steps(scheduler, clock, n):
        pass


def cycles_for(events: int) -> int:
    """How many cycles write about ``events`` events."""
    return max(1, events // EVENTS_PER_CYCLE)


def batch_of(scheduler: Scheduler) -> Any:
    """``scheduler.batch()``, or no batching where the scheduler has none."""
    batch = getattr(scheduler, "batch", None)
    return batch() if batch is not None else nullcontext()


def build_store(path: Path | str, cycles: int, *, per_batch: int = 100) -> int:
    """Fill a new store with ``cycles`` cycles, in batches; returns the events written."""
    scheduler, clock = open_scheduler(path, "normal")
    try:
        done = 0
        while done < cycles:
            with batch_of(scheduler):
                for n in range(done, min(cycles, done + per_batch)):
                    cycle(scheduler, clock, n)
            done = min(cycles, done + per_batch)
        return scheduler.events_written
    finally:
        scheduler.close()


Row = tuple[str, int, str, bytes]


def stored_rows(path: Path | str, limit: int | None = None) -> list[Row]:
    """The rows of a store's event table, in log order (to write them again raw)."""
    with closing_sqlite(path) as conn:
        sql = "SELECT originator_id, originator_version, topic, state FROM stored_events "
        sql += "ORDER BY rowid" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return [tuple(row) for row in conn.execute(sql)]  # type: ignore[misc]


@contextmanager
def closing_sqlite(path: Path | str) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection, closed afterwards."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()
