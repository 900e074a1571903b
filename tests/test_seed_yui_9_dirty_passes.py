"""yui, ninth round (seed 000: yui 0.6.4 -> 0.6.6, ``FileTaskController``; seed 001 for
the Leader's role key): which tasks and roles a dirty pass takes, and what marks a task
dirty, with a Worker (``#requestPass``, ``partitionDirtyScope``). Each test names the
seed behaviour it pins and fails when it breaks; docs/seed-fidelity.md, "Round nine
(yui)", says what changed."""

from __future__ import annotations

import threading
import time

from helpers.probes import Answers, busy_leader, of_type
from helpers.seed_yui_9 import AGGREGATION, Failing

from tasktrail.domain import ManualClock, Scheduler, Worker
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import PassStarted
from tasktrail.domain.turns.state import LEADER

WAIT = 10  # seconds a test waits for the worker's thread (never reached when green)


# ─── which tasks and roles a dirty pass takes ───────────────────────────────────────


def test_yui_leaders_role_key_selects_its_due_wakeup(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleNextLeaderWakeDeadline`` signals ``role:<task>/leader`` when a
    wakeup's deadline comes: a dirty pass of that key alone dispatches the due wakeup
    and delivers the Leader Turn it starts, and leaves the task's other roles alone."""
    scheduler.submit("job", id="t1")
    scheduler.start_turn("t1", "worker")
    scheduler.request_wakeup("t1", "mail")
    clock.advance(AGGREGATION)
    runtime = Answers("delivered")
    report = scheduler.controller_pass([role_key("t1", LEADER)], runtime=runtime)
    assert report.tasks == ["t1"] and report.wakeups == {"t1": "dispatched"}
    assert runtime.tried == [("leader.1", 0)]
    worker = scheduler.active_turn("t1", "worker")
    assert worker is not None and worker.delivery_outcome is None


def test_yui_role_key_pass_works_only_the_roles_it_names(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``partitionDirtyScope`` / ``selectedRuntimeLifecycleTargets``: role keys give
    a task's pass only those roles; a task key all of them."""
    scheduler.submit("job", id="t1")
    for role in ("a", "b", "c"):
        scheduler.start_turn("t1", role)
    runtime = Answers("delivered")
    scheduler.controller_pass([role_key("t1", "a"), role_key("t1", "c")], runtime=runtime)
    assert sorted(turn for turn, _ in runtime.tried) == ["a.1", "c.1"]
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert sorted(turn for turn, _ in runtime.tried) == ["a.1", "b.1", "c.1"]


def test_yui_task_key_asked_among_role_keys_is_the_retry_identity(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``partitionDirtyScope``: a task key replaces that task's role keys asked
    before it and swallows those after, so the per-task pass that fails is retried with
    the task key alone (``#scheduleTaskPassRetry``'s identity)."""
    scheduler.submit("job", id="t1")
    scheduler.start_turn("t1", "a")
    keys = [role_key("t1", "a"), task_key("t1"), role_key("t1", "b")]
    report = scheduler.controller_pass(keys, runtime=Failing("t1"))
    assert report.outcomes == {"t1": "failed"}
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and retry.keys == (task_key("t1"),)


# ─── what marks a task dirty, with a Worker ─────────────────────────────────────────


def test_yui_worker_runs_the_dirty_pass_a_host_asked_for_at_its_next_tick(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``#requestPass`` pumps a pass as soon as keys are marked dirty (coalesced):
    a Worker runs the dirty pass a host requested at its next tick, with those keys,
    though no Turn work was due, and says so in its next deadline."""
    scheduler.submit("crew", id="t1", phase="lead")  # no phases here to run
    scheduler.submit("crew", id="t2", phase="lead")
    for task_id in ("t1", "t2"):
        busy_leader(scheduler, task_id)
    runtime = Answers("delivered")
    worker = Worker(scheduler, runtime=runtime)
    worker.tick()
    due = scheduler.next_turn_deadline()
    assert due is not None and due > clock.now  # nothing due: no pass
    assert of_type(scheduler, PassStarted) == []
    scheduler.request_pass([task_key("t2")])
    scheduler.request_pass([role_key("t2", LEADER), task_key("t1")])
    assert worker.next_deadline() == clock.now
    assert worker.tick().passed == 2
    (started,) = of_type(scheduler, PassStarted)
    assert (started.scope, started.keys, started.task_ids) == (
        "dirty",
        (task_key("t2"), role_key("t2", LEADER), task_key("t1")),
        ("t2", "t1"),
    )
    assert not scheduler.pass_queue
    next_due = worker.next_deadline()
    assert next_due is not None and next_due > clock.now


def test_yui_idle_worker_wakes_when_a_pass_is_requested(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``#requestPass`` runs the pass it was asked for without waiting for a timer:
    an idle Worker (its next deadline far off) stops waiting once a host requests a
    pass, and its next tick runs it."""
    scheduler.submit("crew", id="t1", phase="lead")
    busy_leader(scheduler, "t1")
    worker = Worker(scheduler, runtime=Answers("delivered"), poll_ms=5)
    running = threading.Thread(target=worker.run)
    running.start()
    try:
        while worker.ticks < 1 and running.is_alive():
            time.sleep(0.005)
        scheduler.request_pass([task_key("t1")])
        given_up = time.monotonic() + WAIT
        while worker.ticks < 2 and running.is_alive() and time.monotonic() < given_up:
            time.sleep(0.005)
        assert worker.ticks >= 2, "the idle worker went on waiting after a pass was requested"
    finally:
        worker.stop()
        running.join(WAIT)
    (started,) = of_type(scheduler, PassStarted)
    assert started.keys == (task_key("t1"),)


def test_yui_worker_leaves_a_pass_requested_during_another_pump_to_that_pump(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """passes.one_pump: a pass requested while another pump runs (a host's own pump
    thread) is that pump's to run once its pass is done; the Worker's pump returns at
    once meanwhile. A Worker that took the queued request for work due now would tick
    without pause (its idle wait returning at once) for as long as that pass lasts."""
    scheduler.submit("crew", id="t1", phase="lead")
    busy_leader(scheduler, "t1")
    worker = Worker(scheduler, runtime=Answers("delivered"), poll_ms=5)
    worker.tick()
    queue = scheduler.pass_queue
    assert queue.start_pumping()  # a host's pump is running a pass
    scheduler.request_pass([task_key("t1")])
    assert worker.tick().passed == 0 and queue  # its pump left the request to that one
    due = worker.next_deadline()
    assert due is not None and due > clock.now  # nothing for this Worker to do now
    assert queue.stop_pumping()  # that pump ended without running it (it was closing)
    assert worker.next_deadline() == clock.now  # now the Worker's to run
    assert worker.tick().passed == 1 and not queue
