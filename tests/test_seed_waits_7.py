"""pi-durable's behaviour, seventh round (seed 004, `TaskScheduler`): `failFast` waits at
the edges the earlier rounds left unpinned: which ends of an owned task wake the waiter,
what the wake leaves alone, a `failFast` waiter that sees no failure, and a wake that a
reopen finds. docs/seed-fidelity.md ("Round seven (waits)") says what was found."""

from __future__ import annotations

import pytest
from helpers.probes import refused, running

from tasktrail.domain import ManualClock, Registry, Scheduler

# ─── failFast: every outcome but `completed` wakes the waiter ───────────────────
# pi-durable (`#anyFailed`: "Whether any of `ids` holds or ended with an outcome other
# than `completed`", which the reconcile pass asks for each `failFast` waiter): an owned
# task that ends failed, faulted, aborted or orphaned wakes its waiter while the other
# awaited task still runs. The wake only wakes: the other task keeps running unmarked
# (a cascade comes from a cancelling owner, rule 6, and the waiter is none).


@pytest.mark.parametrize("ending", ["failed", "faulted", "aborted", "orphaned"])
def test_pi_durable_fail_fast_wakes_at_every_outcome_but_completed(
    scheduler: Scheduler, ending: str
) -> None:
    waiter = running(scheduler)
    if ending == "orphaned":
        ends = scheduler.submit("ghost", owner=waiter, phase="go")  # no definition takes it
    elif ending == "aborted":
        ends = scheduler.submit("leaf", owner=waiter)
    else:
        ends = running(scheduler, "leaf", owner=waiter)
    other = running(scheduler, "leaf", owner=waiter)
    scheduler.wait(waiter, [ends, other], "failFast", phase="end")
    refused(scheduler, 7, scheduler.reserve, waiter)
    if ending == "orphaned":
        scheduler.abort(ends)  # an abort-marked task no definition can take (rule 13)
    elif ending == "aborted":
        scheduler.abort(ends)
        assert scheduler.reserve(ends) == "abort"
        scheduler.finish(ends, "aborted")
    else:
        scheduler.finish(ends, ending)  # type: ignore[arg-type]
    outcome = scheduler.task(ends).outcome
    assert scheduler.task(ends).status == "terminal" and outcome is not None
    assert outcome.status == ending
    assert scheduler.reserve(waiter) == "run"
    assert scheduler.task(waiter).checkpoint.phase == "end"  # type: ignore[union-attr]
    assert scheduler.task(other).status == "running"
    assert not scheduler.task(other).abort_requested


# ─── failFast without a failure waits for every awaited task ─────────────────────
# pi-durable (`wake`: a waiter without an abort mark is held back while one of the tasks
# it waits on is live, whatever its policy; `#anyFailed` finds no failure): a `failFast`
# waiter whose owned tasks all complete wakes when the last of them ends, as `all` does.


def test_pi_durable_fail_fast_without_a_failure_waits_for_every_owned_task(
    scheduler: Scheduler,
) -> None:
    waiter = running(scheduler)
    first = running(scheduler, "leaf", owner=waiter)
    second = running(scheduler, "leaf", owner=waiter)
    scheduler.wait(waiter, [first, second], "failFast")
    scheduler.finish(first, "completed")
    refused(scheduler, 7, scheduler.reserve, waiter)
    scheduler.finish(second, "completed")
    assert scheduler.reserve(waiter) == "run"


# ─── failFast across a reopen ──────────────────────────────────────────────────
# pi-durable (`open`: each loaded `failFast` waiter goes into `#failFastChecks`; `wake`:
# `active` while the reconcile pass has such checks to make): a failure that happened
# before a crash or a close wakes the waiter in the process that opens next, whose
# `wake()` is active for it though the other awaited task sleeps.


@pytest.mark.parametrize("stop", ["crash", "close"])
def test_pi_durable_a_fail_fast_wake_is_found_at_the_next_open(
    sqlite_url: str, clock: ManualClock, registry: Registry, stop: str
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    waiter = running(s)
    failing = running(s, "leaf", owner=waiter)
    sleeper = running(s, "leaf", owner=waiter)
    until = clock.now + 60_000
    s.sleep(sleeper, until=until)
    s.wait(waiter, [failing, sleeper], "failFast", phase="end")
    s.finish(failing, "failed")
    if stop == "crash":
        s.store.close()  # dropped without close()
    else:
        s.close()
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    try:
        assert s.wake() == {"active": True, "at": until}
        assert s.reserve(waiter) == "run"
        assert s.task(sleeper).status == "sleeping"
        assert not s.task(sleeper).abort_requested
    finally:
        s.close()
