"""Three ``tasktrail worker`` processes on one store, one killed mid-run (issue 13).

The workload (tests/helpers/fleet_workload.py) is trees of tasks with both wait
policies and sleeps. Every task must end; the killed worker's running tasks are
recovered by the others within its lease plus one heartbeat; no phase of any task
runs in two workers at overlapping times; ``verify`` passes; SIGTERM closes a
worker (rule 10) with exit 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from helpers.fleet_workload import registry

from tasktrail.domain import Scheduler, open_store
from tasktrail.domain.tasks.events import TaskEnded, TaskRecovered
from tasktrail.replay import verify

HELPERS = Path(__file__).parent / "helpers"
ROOTS = 90  # x 6 tasks a tree = 540 tasks
LEASE_MS = 1_500
SLACK_MS = 1_500  # a tick in progress and process scheduling on a loaded 2-core machine


def start_worker(location: str, name: str, phase_log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")]),
        "TASKTRAIL_PHASE_LOG": str(phase_log),
    }
    command = [sys.executable, "-m", "tasktrail.replay.cli", "worker", "fleet_workload:registry"]
    command += ["--store", location, "--worker", name, "--lease", str(LEASE_MS)]
    command += ["--poll", "50", "--quiet"]
    return subprocess.Popen(command, env=env, stderr=subprocess.PIPE)


def ended_tasks(location: str) -> tuple[int, int]:
    """(tasks submitted, tasks ended) as the store holds them now."""
    submitted = ended = 0
    with open_store(location) as store:
        for recorded in store.read():
            name = type(recorded.event).__name__
            submitted += name == "TaskSubmitted"
            ended += isinstance(recorded.event, TaskEnded)
    return submitted, ended


def phase_intervals(
    phase_log: Path, killed: str, killed_at: float
) -> dict[tuple[str, str], list[tuple[float, float, str]]]:
    """Each phase of each task: its runs as (start, end, worker); a start the kill cut
    off ends at the kill.

    By phase, not by task: a phase logs its end after the decision that hands the task
    on (a sleep, a wait), so a thread descheduled in between shows the task's next
    phase on another worker starting before that end, though it ran after the decision.
    A phase run twice (a task recovered from a live worker, or an invocation going on
    after its task was taken) is the same phase on two workers."""
    by_task: dict[tuple[str, str], list[tuple[float, float, str]]] = defaultdict(list)
    for log in phase_log.glob("*.log"):
        open_starts: dict[tuple[str, str], float] = {}
        for line in log.read_text().splitlines():
            kind, task_id, phase, worker, at = line.split()
            if kind == "start":
                open_starts[(task_id, phase)] = float(at)
            else:
                start = open_starts.pop((task_id, phase))
                by_task[(task_id, phase)].append((start, float(at), worker))
        for (task_id, phase), start in open_starts.items():
            assert log.stem == killed, f"{log.stem} left {task_id} unfinished without a kill"
            by_task[(task_id, phase)].append((start, killed_at, log.stem))
    return by_task


@pytest.mark.parametrize(
    "store_kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_three_workers_one_killed_every_task_ends_once(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    location = (
        str(tmp_path / "fleet.db")
        if store_kind == "sqlite"
        else str(request.getfixturevalue("postgres_url"))
    )
    submitter = Scheduler.open(location, registry=registry, worker="submitter")
    with submitter.batch():
        for _ in range(ROOTS):
            submitter.submit("root")
    submitter.close()
    phase_log = tmp_path / "phases"
    phase_log.mkdir()
    workers = {name: start_worker(location, name, phase_log) for name in ("w0", "w1", "w2")}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # kill w1 well into the work, mid-phase
            log = phase_log / "w1.log"
            lines = log.read_text().splitlines() if log.exists() else []
            if len(lines) >= 50 and lines[-1].startswith("start"):
                break
            time.sleep(0.002)
        workers["w1"].send_signal(signal.SIGKILL)
        killed_at = time.time() * 1000
        workers["w1"].wait(10)

        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            submitted, ended = ended_tasks(location)
            if ended == submitted:
                break
            time.sleep(0.5)
        assert ended == submitted, f"{ended} of {submitted} tasks ended"
        # A phase the kill cut off after it submitted children runs again on another
        # worker and submits its own: their first children still run, owned and ended.
        assert submitted >= ROOTS * 6, submitted

        for name in ("w0", "w2"):
            workers[name].send_signal(signal.SIGTERM)
        for name in ("w0", "w2"):
            started = time.monotonic()
            assert workers[name].wait(10) == 0, workers[name].stderr.read().decode()[-2000:]
            assert time.monotonic() - started < 5
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    # The killed worker's running tasks were recovered by the others, in time.
    recovered = []
    with open_store(location) as store:
        for recorded in store.read():
            if isinstance(recorded.event, TaskRecovered):
                assert recorded.event.worker == "w1", recorded.event
                recovered.append(recorded.event.at - killed_at)
    assert recovered, "the kill cut off no running task: nothing to recover"
    assert max(recovered) <= LEASE_MS + LEASE_MS / 3 + SLACK_MS, recovered

    # No phase of any task ran in two workers at overlapping times.
    for task_phase, runs in phase_intervals(phase_log, "w1", killed_at).items():
        for start_a, end_a, worker_a in runs:
            for start_b, end_b, worker_b in runs:
                if worker_a != worker_b:
                    assert end_a <= start_b or end_b <= start_a, (task_phase, sorted(runs))

    assert verify(location).ok
