"""Rule 33 across a fleet: four ``tasktrail worker`` processes on one store (SQLite and
PostgreSQL) never run more than a limit's ``max_running`` tasks of one key at once,
as the log says at every position (folded event by event, not sampled)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers.flow_workload import MAX_RUNNING
from helpers.flow_workload import registry as flow_registry
from helpers.worker_processes import STARTUP_S, Child, Processes, wait_for

from tasktrail.domain import Scheduler, World, open_store
from tasktrail.domain.tasks.events import TaskEnded, TaskSubmitted
from tasktrail.domain.tasks.flow_events import LimitSlotTaken

TENANTS, PER_TENANT, WORKERS = 4, 12, 4


class FlowProcesses(Processes):
    """:class:`Processes` whose workers run ``flow_workload:registry``."""

    def worker(
        self, name: str, *, phase_s: float, options: tuple[str, ...] = (), gated: bool = False
    ) -> Child:
        command = [sys.executable, "-m", "tasktrail.replay.cli", "worker"]
        command += ["flow_workload:registry", "--store", self.location, "--worker", name]
        command += ["--poll", "50", "--concurrency", "8", *options]
        child = self._start(command, name, phase_s, gated)
        wait_for(lambda: f"worker {name} started" in child.output(), STARTUP_S, child)
        return child


@contextmanager
def flow_processes(location: str, folder: Path) -> Iterator[FlowProcesses]:
    """:func:`~helpers.worker_processes.processes`, running ``flow_workload``."""
    started = FlowProcesses(location, folder)
    try:
        yield started
    except BaseException:
        for child in started.children:  # shown with the failure (captured stdout)
            print(f"--- {child.stderr.name} (exit {child.process.poll()}):\n{child.output()}")
        raise
    finally:
        started.kill_all()


def most_running_by_tenant(location: str) -> tuple[dict[str, int], int]:
    """Fold the store's log one event at a time and, after each, count the tasks that run
    a phase (``running`` in ``run`` mode) by their ``tenant`` memo (read from each task's
    submission, never from the flow keys under test): the most each tenant ever had, and
    how many positions were looked at."""
    world = World()
    tenant_of: dict[str, str] = {}
    running: dict[str, str] = {}
    most: dict[str, int] = {}
    now: dict[str, int] = {}
    positions = 0
    with open_store(location, read_only=True) as store:
        for recorded in store.read():
            event = recorded.event
            world.apply_stored(recorded.position, event, recorded.originator_version)
            positions += 1
            if isinstance(event, TaskSubmitted) and event.memos:
                tenant_of[event.task_id] = event.memos["tenant"]
            if not type(event).task_stream or event.task_id not in tenant_of:
                continue
            task = world.tasks[event.task_id]
            tenant = tenant_of[event.task_id]
            runs = task.status == "running" and task.mode == "run"
            if runs and event.task_id not in running:
                running[event.task_id] = tenant
                now[tenant] = now.get(tenant, 0) + 1
                most[tenant] = max(most.get(tenant, 0), now[tenant])
            elif not runs and event.task_id in running:
                del running[event.task_id]
                now[tenant] -= 1
    return most, positions


def _ended(location: str) -> int:
    with open_store(location, read_only=True) as store:
        return sum(isinstance(r.event, TaskEnded) for r in store.read())


def test_rule_33_four_worker_processes_never_run_more_than_the_limit_of_a_key(
    store_url: str, tmp_path: Path
) -> None:
    with flow_processes(store_url, tmp_path) as fleet:
        for name in ("a", "b", "c", "d")[:WORKERS]:
            fleet.worker(name, phase_s=0.03)
        submitter = Scheduler.open(store_url, registry=flow_registry, worker="submitter")
        try:
            with submitter.batch():  # all at once: the workers race for every slot
                for n in range(TENANTS * PER_TENANT):
                    submitter.submit("tenant_job", memos={"tenant": f"t{n % TENANTS}"})
        finally:
            submitter.close()
        wait_for(lambda: _ended(store_url) == TENANTS * PER_TENANT, 120.0)
        fleet.kill_all()
    most, positions = most_running_by_tenant(store_url)
    assert positions > TENANTS * PER_TENANT * 3
    assert set(most) == {f"t{k}" for k in range(TENANTS)}
    assert max(most.values()) <= MAX_RUNNING, most  # at every position of the log
    assert max(most.values()) == MAX_RUNNING, most  # and the limit was reached: it held
    with open_store(store_url, read_only=True) as store:
        slots = [r.event for r in store.read() if isinstance(r.event, LimitSlotTaken)]
    assert len(slots) == TENANTS * PER_TENANT  # a slot taken by each reservation
    assert max(slot.running for slot in slots) <= MAX_RUNNING
    workers = {e.worker for e in _reservations(store_url)}
    assert len(workers) > 1, workers  # the fleet shared the work


def _reservations(location: str) -> list[object]:
    from tasktrail.domain.tasks.events import TaskReserved

    with open_store(location, read_only=True) as store:
        return [r.event for r in store.read() if isinstance(r.event, TaskReserved)]


@pytest.fixture(autouse=True)
def _no_env_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TASKTRAIL_WORKER", raising=False)
