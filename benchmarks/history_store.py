"""The history stores ``benchmarks.history`` measures: SQLite stores of a given number
of events of finished history, every stream kind in it, and exactly 100 live tasks.

History is made by **rounds**, each through the public :class:`Scheduler` API on a
manual clock, each ending every task it started:

* a ``tree``: a task that submits three owned ``leaf`` tasks and waits for ``all``;
  each leaf sleeps (a backoff), then finishes (one in seven ``failed``);
* an ``agent`` task with Turns: two workers' Turns, a delivery ``not-ready`` once
  (a delivery retry), a runtime error once (a task-pass retry, then cleared), two
  completions that ask for a Leader wakeup (the ``wakeup:`` stream), the Leader's
  Turn, and the roles' runtime cleanup once the task ends (``cleanup:``); every
  controller pass has its ``pass:`` stream, the retry its ``task-pass:`` stream;
* a ``nightly`` task with a scheduled run (``schedule:``) dispatched to an in-memory
  executor, finished there and reconciled (``run:``);
* every 20 rounds a change of the turn and the run settings (the two settings streams).

Many rounds go into one ``scheduler.batch()`` (one transaction) so a million events
build in minutes, yet every event is one the scheduler decided. Then 100 live tasks:
80 that sleep far past the end of history, and 10 parents each waiting on one more.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings
from tasktrail.domain.tasks.invocation import Invocation
from tasktrail.domain.turns.runtime import Runtime

from .workload import closing_sqlite

GENERATOR_VERSION = 1
"""Bump when the history a size builds changes: cached stores are keyed by it."""
START_MS = 1_767_603_600_000  # 2026-01-05T09:00:00Z
MINUTE, DAY = 60_000, 86_400_000
FAR = 3_650 * DAY  # the live tasks sleep ten years past the start
LIVE_SLEEPERS, LIVE_PARENTS = 80, 10  # + one child each: 100 live tasks
LIVE_EVENTS = 460
"""About what making the live tasks appends (stores come out near their size)."""
SETTINGS_EVERY = 20
WIDTH = 10
"""Trees, agent tasks and nightly tasks a round runs side by side."""


def _plan(inv: Invocation) -> None:
    leaves = [inv.submit("leaf", id=f"{inv.task_id}-leaf{n}") for n in range(3)]
    inv.wait(leaves, "all", then="done")


def _fetch(inv: Invocation) -> None:
    inv.sleep(inv.now() + 30_000, then="parse")


def _parse(inv: Invocation) -> None:
    if sum(map(ord, inv.task_id)) % 7 == 3:
        inv.finish("failed", {"message": "source returned 503", "detail": {"status": 503}})
    else:
        inv.finish("completed")


def _finish(inv: Invocation) -> None:
    inv.finish("completed")


def _lead(inv: Invocation) -> None:
    inv.sleep(inv.now() + 3 * MINUTE, then="wrap")


def _idle(inv: Invocation) -> None:
    inv.sleep(START_MS + FAR, then="wake")


def _parent(inv: Invocation) -> None:
    child = inv.submit("sleeper", id=f"{inv.task_id}-child")
    inv.wait([child], "all", then="done")


def registry() -> Registry:
    """The kinds history and the live tasks are made of (the measuring side opens
    stores with it too, so a pass could run their phases)."""
    return Registry(
        [
            TaskDefinition("tree", 1, {"plan": _plan, "done": _finish}),
            TaskDefinition("leaf", 1, {"fetch": _fetch, "parse": _parse}),
            TaskDefinition("agent", 1, {"lead": _lead, "wrap": _finish}),
            TaskDefinition("nightly", 1, {"idle": _lead, "wrap": _finish}),
            TaskDefinition("sleeper", 1, {"idle": _idle, "wake": _finish}),
            TaskDefinition("parent", 1, {"start": _parent, "done": _finish}),
        ]
    )


def _run_settings(odd: int) -> RunSettings:
    """A round's runs all fire on its dispatch and reconcile on its tick; no daily cap
    (history spans days of many rounds)."""
    return RunSettings(
        tz="UTC", per_tick=WIDTH + 2 + odd, reconcile_per_tick=WIDTH * 2, cap_per_day=10_000
    )


class _Runtime(Runtime):
    """Delivers at once, except: ``not-ready`` for the first delivery of worker-2,
    and a raise the first time each agent task is delivered to (a task-pass retry)."""

    def __init__(self) -> None:
        self.raised: set[str] = set()

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if task_id not in self.raised:
            self.raised.add(task_id)
            raise ConnectionError("runtime host went away")
        if role == "worker-2" and attempt == 0:
            return "not-ready"
        return "delivered"

    def cleanup(self, task_id: str, role: str) -> bool:
        return True


class Generator:
    """Rounds of history on one scheduler."""

    def __init__(self, scheduler: Scheduler, clock: ManualClock, width: int = WIDTH) -> None:
        self.scheduler = scheduler
        self.width = width
        self.clock = clock
        self.runtime = _Runtime()
        self.executor = InMemoryExecutor()
        scheduler.configure_runs(executor=self.executor, settings=_run_settings(0))
        self.rounds = 0

    def settings(self) -> None:
        """A change of each settings stream."""
        odd = (self.rounds // SETTINGS_EVERY) % 2
        self.scheduler.configure_turns(aggregation_window_ms=60_000 + 1_000 * odd)
        self.scheduler.configure_runs(settings=_run_settings(odd))

    def round(self) -> None:
        """One round: ``width`` trees, agent tasks with Turns and nightly tasks with a
        run, side by side (one pass serves them all, as in a busy scheduler)."""
        s, clock, runtime = self.scheduler, self.clock, self.runtime
        if self.rounds % SETTINGS_EVERY == 0:
            self.settings()
        prefix = f"h{self.rounds:06d}"
        self.rounds += 1
        agents, nightlies = [], []
        for n in range(self.width):
            s.submit("tree", id=f"{prefix}-{n}-tree")
            agents.append(s.submit("agent", id=f"{prefix}-{n}-agent"))
            nightlies.append(s.submit("nightly", id=f"{prefix}-{n}-nightly"))
        keys = [f"task:{agent}" for agent in agents]
        s.run_pass()  # trees plan, agents and nightlies sleep
        s.run_pass()  # leaves fetch: they sleep
        turns = [
            (s.start_turn(a, "worker-1", reasons=["draft"]), s.start_turn(a, "worker-2"))
            for a in agents
        ]
        s.controller_pass(keys, runtime=runtime)  # the runtime raises: task-pass retries
        clock.advance(250)
        s.controller_pass(keys, runtime=runtime)  # worker-2 not ready: delivery retries
        clock.advance(1_000)
        s.controller_pass(keys, runtime=runtime)
        for agent, (first, second) in zip(agents, turns, strict=True):
            s.complete_turn(agent, "worker-1", first, summary="drafted")
            s.request_wakeup(agent, "worker-1 finished")
            s.complete_turn(agent, "worker-2", second, summary="ok")
            s.request_wakeup(agent, "worker-2 finished")
        clock.advance(s.turn_settings.aggregation_window_ms)
        s.controller_pass(keys, runtime=runtime)  # the Leaders wake
        for agent in agents:
            leader = s.active_turn(agent, "leader")
            if leader is not None:
                s.complete_turn(agent, "leader", leader.turn_id, summary="published")
        for nightly in nightlies:
            s.schedule_run(nightly, clock.now - MINUTE)
        s.dispatch_due()
        for nightly in nightlies:
            for run in s.runs(nightly):
                if run.job_id is not None and run.status != "done":
                    self.executor.finish(run.job_id, "completed")
        clock.advance(MINUTE)
        s.reconcile()
        clock.advance(3 * MINUTE)
        s.run_pass()  # leaves parse, agents and nightlies wrap
        s.run_pass()  # the trees are done
        s.controller_pass(keys, runtime=runtime)  # the roles' runtimes are cleaned up
        clock.advance(MINUTE)

    def live(self) -> None:
        """The 100 live tasks: sleepers, and parents waiting on a sleeping child."""
        s = self.scheduler
        for n in range(LIVE_SLEEPERS):
            s.submit("sleeper", id=f"live-sleeper-{n:03d}")
        for n in range(LIVE_PARENTS):
            s.submit("parent", id=f"live-parent-{n:03d}")
        s.run_pass()
        s.run_pass()


def build(path: Path, events: int, *, rounds_per_batch: int = 4, log: Any = None) -> dict[str, Any]:
    """Build a store of about ``events`` events (history, then the live tasks) at
    ``path``; returns what was built (rounds, events, seconds)."""
    started = time.perf_counter()
    clock = ManualClock(START_MS)
    scheduler = Scheduler.open(
        str(path), clock=clock, registry=registry(), durability="normal", worker="history"
    )
    try:
        generator = Generator(scheduler, clock)
        target = events - LIVE_EVENTS
        while (written := scheduler.store.head()) < target:
            per_round = written / generator.rounds if generator.rounds else target
            left = math.ceil((target - written) / per_round) if per_round else 1
            with scheduler.batch():
                for _ in range(max(1, min(rounds_per_batch, left))):
                    generator.round()
            if log is not None:
                log(f"  {scheduler.store.head()} events, {time.perf_counter() - started:.0f} s")
        generator.live()
        head = scheduler.store.head()
        live = len(scheduler.world.live)
    finally:
        scheduler.close()
    return {
        "events": head,
        "rounds": generator.rounds,
        "live": live,
        "seconds": time.perf_counter() - started,
        "generator": GENERATOR_VERSION,
    }


def head(path: Path) -> int:
    """The last position of a store's log."""
    with closing_sqlite(path) as conn:
        return int(conn.execute("SELECT max(rowid) FROM stored_events").fetchone()[0] or 0)


def cached_store(cache: Path, events: int, log: Any = None) -> tuple[Path, dict[str, Any]]:
    """The store of ``events`` events under ``cache`` (keyed by size and generator
    version), built first if missing; returns its path and what its build took."""
    import json
    import os

    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"history-g{GENERATOR_VERSION}-{events}.db"
    info_path = path.with_suffix(".json")
    if path.exists() and info_path.exists():
        info = json.loads(info_path.read_text())
        return path, {**info, "cached": True}
    draft = path.with_name(f".{path.name}.{os.getpid()}.draft")
    for leftover in (draft, Path(f"{draft}-wal"), Path(f"{draft}-shm")):
        leftover.unlink(missing_ok=True)
    info = build(draft, events, log=log)
    with closing_sqlite(draft) as conn:  # everything in the main file, then one file moves
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    os.replace(draft, path)
    info_path.write_text(json.dumps(info) + "\n")
    return path, {**info, "cached": False}
