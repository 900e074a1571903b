"""pi-durable's behaviour, ninth round (seed 004, `TaskScheduler`, 1.3.0 -> 1.4.0): memos
across restarts, the whole checkpoint a wait or a sleep commits (1.4.0 made sleeps
durable states), abort marks and the restart count, `retry`, and the cascade into sleeps.
Each test names the behaviour and the seed's code it comes from; docs/seed-fidelity.md
("Round nine (pi-durable)") says what was fixed and what is reported."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import crash, finishing, reopen
from helpers.probes import running
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tasktrail.domain import InvalidArgument, ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.tasks.state import Checkpoint
from tasktrail.replay import replay

# ─── rule 14: memos are kept by name until the outcome, across restarts ───────────
# pi-durable (`memoOf(record, name)`; `withState` keeps `memos` for every state but a
# decided outcome; `open` and `join` write the record back with its memos): a value
# remembered before a crash or a close is what the phase that runs again reads.


def test_pi_durable_a_memo_key_holds_its_last_value_and_leaves_the_others(
    scheduler: Scheduler,
) -> None:
    """Seed 004, the runtime's `memo`: each name keeps its own value; writing one name
    again replaces that value only, and an unset name reads as nothing."""
    task = running(scheduler)
    scheduler.memo(task, "request", {"id": "r-1"})
    scheduler.memo(task, "pages", [1, 2])
    scheduler.memo(task, "request", {"id": "r-2"})
    assert scheduler.task(task).memos == {"request": {"id": "r-2"}, "pages": [1, 2]}
    assert scheduler.memo(task, "pages") == [1, 2]
    assert scheduler.memo(task, "unset") is None


def test_pi_durable_a_memo_recorded_before_a_crash_is_what_the_rerun_phase_reads(
    sqlite_url: str, clock: ManualClock
) -> None:
    """Seed 004, `open` (a `running` record goes back `pending` as it is, its memos with
    it) and `#commitState` (the same checkpoint again, an intent before an effect, is no
    progress): the phase cut off after recording its intent finds it when it runs again."""
    seen: list[tuple[Any, int]] = []

    def call(invocation: Any) -> None:
        seen.append((invocation.memo("request"), invocation.task.restarts))
        invocation.checkpoint("call")  # the intent again: not progress
        seen.append((invocation.memo("request"), invocation.task.restarts))
        invocation.finish("completed")

    registry = Registry([TaskDefinition("job", 1, {"call": call})])
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = s.submit("job", phase="call")
    assert s.reserve(task) == "run"
    s.memo(task, "request", {"id": "r-1"})
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=3)
    assert s.task(task).memos == {"request": {"id": "r-1"}}
    s.run_until_idle()
    assert seen == [({"id": "r-1"}, 1), ({"id": "r-1"}, 1)]
    assert s.task(task).outcome.status == "completed"  # type: ignore[union-attr]
    s.close()


def test_pi_durable_a_memo_read_is_the_recorded_value_whatever_the_reader_does_with_it(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Seed 004, the runtime's `memo` read (`memoOf` of the committed record): a phase
    reads what was recorded, as the phase run after a restart does; changing the value
    it was given changes no memo, live or replayed."""
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = running(s)
    s.memo(task, "pages", {"done": [1]})
    s.memo(task, "pages")["done"].append(2)
    assert s.memo(task, "pages") == {"done": [1]}
    assert s.task(task).memos == replay(sqlite_url).tasks[task].memos == {"pages": {"done": [1]}}
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=3)
    assert s.memo(task, "pages") == {"done": [1]}
    s.close()


def test_pi_durable_memos_outlive_waits_sleeps_closes_and_recoveries(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Seed 004, `withState` (memos go only with a decided outcome), `join` (a close
    writes the stopped record back `pending` as it is) and `open`; a replay folds the
    same memos (one fold)."""
    s = reopen(sqlite_url, clock, registry, limit=5)
    task = running(s)
    s.memo(task, "kept", {"n": 1})
    s.sleep(task, until=clock.now + 10)
    clock.advance(10)
    assert s.reserve(task) == "run"
    leaf = running(s, "leaf")
    s.wait(task, on=[leaf])
    s.finish(leaf, "completed")
    assert s.reserve(task) == "run"
    s.close()
    s = reopen(sqlite_url, clock, registry, limit=5)
    assert s.reserve(task) == "run"
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=5)
    assert s.task(task).memos == {"kept": {"n": 1}} and s.task(task).restarts == 1
    assert replay(sqlite_url).tasks[task].memos == {"kept": {"n": 1}}
    s.close()


# ─── rules 8 and 11: a sleep or a wait commits a whole checkpoint ─────────────────
# pi-durable 1.4.0 (`sleepUntil(until, checkpoint)` commits `{status: "sleeping",
# checkpoint, until}`; a wait commits `{status: "waiting", checkpoint, on, policy}`):
# the checkpoint the task resumes at is the one committed, its attempt included, so a
# retry's backoff sleeps into its next attempt.


def _backoff_registry(tries: list[int | None], wait: bool) -> Registry:
    def call(invocation: Any) -> None:
        attempt = invocation.task.checkpoint.attempt
        tries.append(attempt)
        if attempt is None or attempt < 2:
            following = 1 if attempt is None else attempt + 1
            if wait:
                invocation.wait([invocation.submit("leaf")], attempt=following)
            else:
                invocation.sleep(invocation.now() + 100, attempt=following)
            return
        invocation.finish("completed")

    return Registry(
        [
            TaskDefinition("call", 1, {"call": call}),
            TaskDefinition("leaf", 1, {"go": finishing()}),
        ]
    )


@pytest.mark.parametrize("how", ["sleep", "wait"])
def test_pi_durable_a_sleep_or_wait_resumes_at_the_attempt_it_committed(
    sqlite_url: str, clock: ManualClock, how: str
) -> None:
    """Seed 004 1.4.0, `sleepUntil` and a committed `waiting` state: each carries the
    checkpoint to resume at, attempt and all; the phase run after it reads that attempt,
    and a replay folds the same checkpoint."""
    tries: list[int | None] = []
    s = Scheduler.open(sqlite_url, clock=clock, registry=_backoff_registry(tries, how == "wait"))
    task = s.submit("call", phase="call")
    for _ in range(3):
        s.run_until_idle()
        clock.advance(100)
    assert tries == [None, 1, 2]
    assert s.task(task).outcome.status == "completed"  # type: ignore[union-attr]
    started = [
        r.position
        for r in s.store.read()
        if r.event.task_id == task and type(r.event).__name__ in ("SleepStarted", "WaitStarted")
    ]
    checkpoints = [replay(sqlite_url, until=p).tasks[task].checkpoint for p in started]
    assert checkpoints == [Checkpoint("call", 1), Checkpoint("call", 2)]
    s.close()


def test_pi_durable_a_sleep_or_wait_without_an_attempt_resumes_at_its_phase_alone(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 004 1.4.0: the committed checkpoint is the one the task resumes at; one
    named without an attempt has none."""
    sleeper, waiter = running(scheduler), running(scheduler)
    scheduler.checkpoint(sleeper, "start", 2)
    scheduler.checkpoint(waiter, "start", 2)
    scheduler.sleep(sleeper, until=clock.now + 5, phase="end")
    scheduler.wait(waiter, on=[scheduler.submit("leaf")], phase="end")
    assert scheduler.task(sleeper).checkpoint == Checkpoint("end")
    assert scheduler.task(waiter).checkpoint == Checkpoint("end")


@pytest.mark.parametrize("attempt", [-1, True, 1.5, "2"])
def test_pi_durable_a_sleep_or_wait_attempt_is_a_checkpoint_attempt(
    scheduler: Scheduler, clock: ManualClock, attempt: Any
) -> None:
    """Seed 004 1.4.0: what a sleep or a wait commits is a checkpoint, so its attempt is
    one a checkpoint may carry (an int >= 0); anything else is refused, nothing recorded."""
    task = running(scheduler)
    leaf = scheduler.submit("leaf")
    before = scheduler.store.head()
    with pytest.raises(InvalidArgument, match="attempt"):
        scheduler.sleep(task, until=clock.now + 5, attempt=attempt)
    with pytest.raises(InvalidArgument, match="attempt"):
        scheduler.wait(task, on=[leaf], attempt=attempt)
    assert scheduler.store.head() == before
    assert scheduler.task(task).status == "running"


def test_pi_durable_the_checkpoint_a_sleep_committed_again_after_a_crash_is_no_progress(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Seed 004, `#commitState` (`jsonEqual(current.state, next)`): the task woken from a
    sleep runs at the sleep's checkpoint, as the store gives it back; cut off there,
    committing that same checkpoint again keeps its restart count, a new attempt starts
    it over."""
    s = reopen(store_url, clock, registry, limit=5)
    task = running(s)
    s.sleep(task, until=clock.now, phase="start", attempt=2)
    assert s.reserve(task) == "run"
    crash(s)
    s = reopen(store_url, clock, registry, limit=5)
    assert s.task(task).checkpoint == Checkpoint("start", 2) and s.task(task).restarts == 1
    assert s.reserve(task) == "run"
    s.checkpoint(task, "start", 2)
    assert s.task(task).restarts == 1
    s.checkpoint(task, "start", 3)
    assert s.task(task).restarts == 0
    s.close()


def test_pi_durable_recovery_and_close_keep_the_checkpoint_attempt(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Seed 004, `open` and `join`: the record goes back `pending` with
    `checkpoint: record.state.checkpoint`, the attempt with it."""
    s = reopen(sqlite_url, clock, registry, limit=5)
    task = running(s)
    s.checkpoint(task, "end", 4)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=5)
    assert (s.task(task).status, s.task(task).checkpoint) == ("pending", Checkpoint("end", 4))
    assert s.reserve(task) == "run"
    s.close()
    s = reopen(sqlite_url, clock, registry, limit=5)
    assert (s.task(task).status, s.task(task).checkpoint) == ("pending", Checkpoint("end", 4))
    s.close()


def test_pi_durable_the_phase_woken_from_a_sleep_has_its_attempt_on_its_span(
    scheduler: Scheduler,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Seed 004, `#phase`: a phase span carries the attempt of the checkpoint it runs;
    after a sleep that is the sleep's checkpoint."""
    scheduler.configure_telemetry(tracer_provider)
    task = running(scheduler)
    scheduler.sleep(task, until=clock.now + 5, phase="end", attempt=3)
    clock.advance(5)
    scheduler.run_until_idle()
    spans = [
        s.attributes
        for s in exporter.get_finished_spans()
        if s.attributes is not None and s.attributes.get("task.id") == task
    ]
    assert [(a["phase"], a.get("attempt")) for a in spans] == [("start", None), ("end", 3)]


# ─── rule 12: a request mark starts an abort handler's count over ─────────────────
# pi-durable (`withAbortMark` drops `restarts` for every mark it writes; without a
# reason it replaces a `restart` mark): a request on an abandoned task whose abort
# handler was cut off starts its count again.


def test_pi_durable_a_request_mark_on_an_abandoned_task_starts_its_cut_off_count_over(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Seed 004, `withAbortMark`: the request replaces the `restart` reason and drops the
    count of the abort handler's cut-offs, so the handler gets `restartLimit` tries
    again before it is faulted."""
    s = reopen(sqlite_url, clock, registry, limit=2)
    task = running(s, abandon_on_restart=True)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=2)
    assert s.reserve(task) == "abort"
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=2)
    assert (s.task(task).abort_reason, s.task(task).restarts) == ("restart", 1)
    assert s.abort(task) is True
    assert (s.task(task).abort_reason, s.task(task).restarts) == (None, 0)
    assert s.reserve(task) == "abort"
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=2)
    assert s.task(task).restarts == 1 and s.reserve(task) == "abort"
    s.close()


# ─── rule 9: `retry` makes a parked task work again ───────────────────────────────
# pi-durable (`retry` clears the count, then `resume()`; `wake()` skips a parked task):
# a parked task is no work for the host's wake until `retry`, and then the next pass
# runs it.


def test_pi_durable_retry_makes_a_parked_task_work_for_wake_again(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Seed 004, `wake()` (`#parked` tasks are skipped) and `retry` (count cleared,
    scheduling resumed): idle while parked, active after `retry`, run by the next pass."""
    s = reopen(sqlite_url, clock, registry, limit=1)
    task = running(s)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    assert s.blocked_reason(task) == "restart_limit"
    assert s.wake() == {"active": False, "at": None}
    assert s.run_pass().reserved == []
    assert s.retry(task) is True
    assert s.wake()["active"] is True and s.task(task).restarts == 0
    s.run_until_idle()
    assert s.task(task).outcome.status == "completed"  # type: ignore[union-attr]
    s.close()


# ─── rules 6 and 8: a cascade mark ends a descendant's sleep ──────────────────────
# pi-durable (`#notDue`: an abort mark ends a sleep; the cascade marks every live
# descendant, sleeping ones too): a sleeping grandchild of an aborted owner runs its
# abort handler now, not at its `until`, and is no longer a deadline for `wake()`.


def test_pi_durable_a_cascade_mark_ends_a_descendants_sleep(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 004, `#notDue` and `wake()` (an abort-marked sleeper is no deadline): the
    marked sleeper is reserved in abort mode at once."""
    owner = running(scheduler)
    child = scheduler.submit("job", owner=owner)
    scheduler.reserve(child)
    grandchild = scheduler.submit("leaf", owner=child)
    scheduler.reserve(grandchild)
    scheduler.sleep(grandchild, until=clock.now + 60_000)
    assert scheduler.wake()["at"] == clock.now + 60_000
    scheduler.abort(owner)
    assert scheduler.task(grandchild).abort_requested
    assert scheduler.wake()["at"] is None
    assert scheduler.reserve(grandchild) == "abort"
