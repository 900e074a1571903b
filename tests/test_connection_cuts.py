"""A PostgreSQL worker whose every server connection is cut keeps its tasks (issue 40,
item 3): a network blip, a server restart or an idle-session timeout ends its sessions
(here ``pg_terminate_backend``), and with them the liveness lock the server held for
it. It reconnects and takes the lock again; a peer started meanwhile does not take its
tasks, no phase runs in two processes at once, and no restart is counted. Killed
(SIGKILL) afterwards, its tasks are still back with the peer within 2 s.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import _admin_dsn
from helpers.server_connections import cut_connections
from helpers.worker_processes import STARTUP_S, exit_after_signals, of, processes, submit, wait_for

from tasktrail.domain import LeaseLost, ManualClock, Registry, Scheduler
from tasktrail.domain.store.advisory import AdvisoryLiveness
from tasktrail.domain.tasks.events import TaskEnded, TaskRecovered, TaskReserved
from tasktrail.replay import verify

pytestmark = pytest.mark.postgres

TASKS = 12
WATCH_S = 2.0
"""How long the started peer is watched leaving the cut worker's tasks alone: its open
looked at the locks (twice, if it saw one free), and it looks twice a second after."""


def overlaps(runs: list[tuple[float, float, str]]) -> list[tuple[str, str]]:
    """Pairs of phase runs of one task in two processes at overlapping times."""
    return [
        (a[2], b[2])
        for i, a in enumerate(runs)
        for b in runs[i + 1 :]
        if a[2] != b[2] and a[0] < b[1] and b[0] < a[1]
    ]


def test_a_worker_whose_connections_are_cut_keeps_its_tasks_then_a_kill_frees_them(
    postgres_url: str, tmp_path: Path
) -> None:
    with processes(postgres_url, tmp_path) as started:
        cut = started.worker("cut", phase_s=30)
        task_ids = submit(postgres_url, "sync", TASKS)
        wait_for(lambda: len(started.starts("cut")) == TASKS, STARTUP_S, cut)

        assert cut_connections(_admin_dsn(), cut.process.pid) >= 2  # its pool and its lock
        peer = started.worker("peer", phase_s=0.05)
        wait_for(lambda: "its liveness lock was lost" in cut.output(), 5, cut)
        wait_for(lambda: "liveness lock held again" in cut.output(), 5, cut)
        watched_until = time.monotonic() + WATCH_S
        while time.monotonic() < watched_until:
            assert not of(TaskRecovered, postgres_url), cut.output()
            time.sleep(0.1)
        assert not started.starts("peer"), started.starts("peer")

        cut.process.kill()  # mid-phase, all twelve
        killed_at = time.time() * 1000
        cut.process.wait()
        wait_for(lambda: len(of(TaskEnded, postgres_url)) == TASKS, 30, peer)
        exit_after_signals(peer, [0.0], limit_s=12)

    recovered = {event.task_id: event for event in of(TaskRecovered, postgres_url)}
    assert sorted(recovered) == sorted(task_ids)
    took = max(event.at - killed_at for event in recovered.values())
    print(f"recovered {TASKS} tasks of the killed worker {took:.0f} ms after the kill")
    assert took <= 2_000, f"recovered {took:.0f} ms after the kill"
    assert {(e.worker, e.restarts) for e in recovered.values()} == {("cut", 1)}

    runs: dict[str, list[tuple[float, float, str]]] = {t: [] for t in task_ids}
    for name, end_at in (("cut", killed_at), ("peer", None)):
        ends = {(e[1], e[2]): float(e[4]) for e in started.ends(name)}
        for _, task, phase, _, at in started.starts(name):
            runs[task].append((float(at), ends.get((task, phase), end_at or 0.0), name))
    assert not {t: overlaps(r) for t, r in runs.items() if overlaps(r)}
    reserved = Counter(event.worker for event in of(TaskReserved, postgres_url))
    assert reserved == {"cut": TASKS, "peer": TASKS}
    assert verify(postgres_url).ok


def test_a_worker_that_cannot_take_its_lock_again_is_fenced_then_recovers_its_tasks(
    postgres_url: str, clock: ManualClock, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut, and the server refusing it a new connection: it takes no new work at once,
    and once peers may call it gone its decisions are refused (LeaseLost), nothing
    appended. Holding its lock again, it recovers its running task as a restart would."""
    s = Scheduler.open(postgres_url, clock=clock, registry=registry, worker="w")
    running, waiting = s.submit("job"), s.submit("job")
    s.reserve(running)
    liveness = s._liveness
    assert isinstance(liveness, AdvisoryLiveness)
    refused = {"on": True}
    real = AdvisoryLiveness._connect

    def connect(self: AdvisoryLiveness) -> Any:
        if refused["on"]:
            raise OSError("FATAL: sorry, too many clients already")
        return real(self)

    monkeypatch.setattr(AdvisoryLiveness, "_connect", connect)
    with psycopg.connect(_admin_dsn(), autocommit=True) as admin:
        pid = liveness._connection.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    wait_for(lambda: liveness.lost_for() is not None, 5)
    assert s.runnable() == []  # the pending task waits: a peer would take it at once
    wait_for(lambda: s._fenced(), 5)
    head = s.store.head()
    with pytest.raises(LeaseLost, match="liveness lock"):
        s.checkpoint(running, "end")
    assert s.store.head() == head

    refused["on"] = False
    wait_for(lambda: liveness.lost_for() is None, 5)
    report = s.recover_gone()
    assert report.recovered == [running] and report.lost == {running: "w"}
    assert (s.task(running).status, s.task(running).restarts) == ("pending", 1)
    assert set(s.runnable()) == {running, waiting}
    s.close()
