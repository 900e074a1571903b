"""pi-durable's behaviour, sixth round (seed 004, `TaskScheduler`): the ownership tree and
the cancellation cascade, parking and `retry`, memos, and what counts as progress, at the
edges the earlier rounds left unpinned. Each test names the behaviour and the seed's code
it comes from; docs/seed-fidelity.md ("Round six") says what was found."""

from __future__ import annotations

from typing import Any

from conftest import crash, reopen

from tasktrail.domain import ManualClock, Registry, RuleViolation, Scheduler
from tasktrail.domain.tasks.events import AbortMarked


def marks(scheduler: Scheduler, task_id: str) -> list[AbortMarked]:
    return [e for e in scheduler.history(task_id) if isinstance(e, AbortMarked)]


# ─── rule 6 + rule 12: a cascade mark starts the count over ─────────────────────────
# pi-durable (`withAbortMark`): every mark drops the record's `restarts` ("The restart
# count starts over: it now counts cut-offs of the abort handler"), and `#parked` is
# `!record.abortRequested && restarts >= limit`: a parked descendant that its owner's
# cancellation reaches is no longer parked; its abort handler runs.


def test_pi_durable_cascade_mark_unparks_a_parked_descendant_into_its_abort_handler(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    owner = s.submit("job")
    child = s.submit("leaf", owner=owner)
    assert s.reserve(child) == "run"
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    assert s.blocked_reason(child) == "restart_limit"
    s.abort(owner)
    marked = s.task(child)
    assert marked.abort_requested and marked.restarts == 0
    assert s.blocked_reason(child) is None
    assert s.reserve(child) == "abort"
    s.finish(child, "aborted")
    assert s.reserve(owner) == "abort"
    s.close()


# ─── rule 6 + rule 12: the cascade derived at open marks no marked task again ───────
# pi-durable (`open`: "Derive abort marks a crash left unapplied below cancelled owners";
# `#abandoned`: "Marked, or already marked or gone: done with them"): recovery gives a
# mark only where one is missing. Marking again would start a descendant's cut-off
# count over at every open, and its abort handler would be cut off forever instead of
# ending `faulted` at the limit (rule 12).


def test_pi_durable_recovery_cascade_keeps_a_descendants_abort_cut_off_count(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=2)
    owner = s.submit("job")
    child = s.submit("leaf", owner=owner)
    s.abort(owner)
    for cut_off in (1, 2):
        assert s.reserve(child) == "abort"
        crash(s)
        s = reopen(sqlite_url, clock, registry, limit=2)
        assert s.task(child).restarts == cut_off
    assert len(marks(s, child)) == 1
    assert s.reserve(child) is None
    ended = s.task(child)
    assert ended.outcome is not None
    assert (ended.outcome.status, ended.outcome.reason) == ("faulted", "restart_limit")
    s.close()


# ─── rule 9: retry() of an abort-marked task does nothing ───────────────────────────
# pi-durable (`retry`): "Does nothing for a task that is not parked", and `#parked`
# excludes an abort-marked task: its count is the abort handler's cut-offs (rule 12),
# which retry() must not clear.


def test_pi_durable_retry_leaves_an_abort_handlers_cut_off_count(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    task = s.submit("job")
    s.abort(task)
    assert s.reserve(task) == "abort"
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    assert s.task(task).restarts == 1
    head = s.store.head()
    assert s.retry(task) is False
    assert s.store.head() == head and s.task(task).restarts == 1
    assert s.reserve(task) is None  # the cut-off abort handler ends faulted
    assert s.task(task).outcome.reason == "restart_limit"  # type: ignore[union-attr]
    s.close()


# ─── rule 11: an abort handler's own progress starts its cut-off count over ─────────
# pi-durable (`#commitState`, used by every invocation's `commit`): "A state the task
# committed that differs from its current one is progress: its restart count starts
# over"; nothing there looks at the invocation's mode. An abort handler cut off once
# that commits a new checkpoint has progressed, and its count is 0 again.


def test_pi_durable_abort_handlers_new_checkpoint_is_progress(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = s.submit("job")
    s.abort(task)
    assert s.reserve(task) == "abort"
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=3)
    assert s.reserve(task) == "abort"
    assert s.task(task).restarts == 1
    s.checkpoint(task, "start")  # the same checkpoint again: not progress
    assert s.task(task).restarts == 1
    s.checkpoint(task, "cleanup")
    assert s.task(task).restarts == 0
    s.close()


# ─── rule 11 + rule 14: a held outcome drops the count and the memos ────────────────
# pi-durable (`#commitState`: `withState(progressed(current), {status: "completing"})`;
# `withState`: "memos and the restart count disappear once an outcome is decided"):
# a task that finishes while it owns live work holds its outcome with neither.


def test_pi_durable_held_outcome_drops_the_restart_count_and_memos(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=3)
    owner = s.submit("job")
    s.reserve(owner)
    s.memo(owner, "k", 1)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=3)
    s.reserve(owner)
    s.submit("leaf", owner=owner)
    assert s.task(owner).restarts == 1
    s.finish(owner, "completed")
    held = s.task(owner)
    assert held.status == "completing"
    assert (held.restarts, held.memos) == (0, {})
    s.close()


# ─── rule 14: memos outlive an abort mark; the abort handler reads them ─────────────
# pi-durable (`withAbortMark` drops only `abortReason` and `restarts`; `withState` drops
# memos only for an outcome): the abort handler sees what the run phases remembered,
# and they disappear once it decides the outcome.


def test_pi_durable_abort_handler_reads_the_memos_the_run_phases_left(
    sqlite_url: str, clock: ManualClock
) -> None:
    seen: list[Any] = []

    def work(inv: Any) -> None:
        inv.memo("spent", 3)
        inv.scheduler.abort(inv.task_id)  # an operator's abort arrives mid-phase
        inv.checkpoint("never")

    def on_abort(inv: Any) -> None:
        seen.append(inv.memo("spent"))
        inv.finish("aborted")

    from tasktrail.domain import TaskDefinition

    registry = Registry([TaskDefinition("job", 1, {"work": work}, abort=on_abort)])
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = s.submit("job")
    s.run_until_idle()
    assert seen == [3]
    ended = s.task(task)
    assert ended.outcome is not None and ended.outcome.status == "aborted"
    assert ended.memos == {}
    s.close()


# ─── rule 6: an owner's cancellation reaches work below a held `completed` ──────────
# pi-durable ("gives every live descendant an abort mark"; a holder is live,
# `LIVE_STATUSES` includes `completing`): aborting the root marks the holder in the
# middle and the work below it; the holder keeps the outcome it decided.


def test_pi_durable_cascade_passes_through_a_holder_and_keeps_its_outcome(
    scheduler: Scheduler,
) -> None:
    s = scheduler
    root = s.submit("job")
    assert s.reserve(root) == "run"
    middle = s.submit("job", owner=root)
    assert s.reserve(middle) == "run"
    leaf = s.submit("leaf", owner=middle)
    s.finish(middle, "completed")
    assert s.task(middle).status == "completing"
    s.abort(root)
    assert s.task(middle).abort_requested and s.task(leaf).abort_requested
    assert [m.by for m in marks(s, leaf)] == [root]
    try:
        s.reserve(middle)
    except RuleViolation as refused:
        assert refused.rule == 5  # a holder is never reserved, marked or not
    assert s.reserve(leaf) == "abort"
    s.finish(leaf, "aborted")
    ended = s.task(middle)
    assert ended.status == "terminal" and ended.outcome.status == "completed"  # type: ignore[union-attr]


# ─── rule 13: an abort of a task no definition can take settles it at once ──────────
# pi-durable (`abort`): "Commit the abort mark, or settle a task that no registered
# definition can take as `orphaned` when nothing it owns is live". The request itself
# ends such a task; no pass is needed. One that owns live work keeps its mark and ends
# orphaned once that work is gone (rule 13, at a reservation).


def test_pi_durable_abort_of_a_task_no_definition_takes_settles_it_orphaned(
    sqlite_url: str, clock: ManualClock
) -> None:
    from conftest import finishing

    from tasktrail.domain import TaskDefinition

    registry = Registry([TaskDefinition("job", 1, {"start": finishing()})])
    s = reopen(sqlite_url, clock, registry, limit=3)
    lone = s.submit("ghost", phase="start")
    old = s.submit("job", version=2, phase="start")  # newer than the definition
    owner = s.submit("ghost", phase="start")
    child = s.submit("job", owner=owner)
    assert s.abort(lone) is True
    ended = s.task(lone)
    assert ended.status == "terminal" and ended.outcome is not None
    assert (ended.outcome.status, ended.outcome.reason) == ("orphaned", "missing_definition")
    assert [type(e).__name__ for e in s.history(lone)][-2:] == ["AbortMarked", "TaskEnded"]
    s.abort(old)
    assert s.task(old).outcome.reason == "version_too_old"  # type: ignore[union-attr]
    s.abort(owner)
    assert s.task(owner).status == "pending" and s.task(child).abort_requested
    s.run_until_idle()
    assert s.task(owner).outcome.status == "orphaned"  # type: ignore[union-attr]
    s.close()


# ─── rule 6: a fault the scheduler holds cascades like any other outcome ────────────
# pi-durable (`#step` terminates a throwing phase `faulted` through `#commitState`,
# which holds it while owned work is live; "A live owner's durable cancellation intent:
# its abort mark, or a held outcome other than `completed`"): the work a phase started
# before it threw is marked and aborts, then the holder ends `faulted`.


def test_pi_durable_held_fault_cascades_to_the_work_the_phase_started(
    sqlite_url: str, clock: ManualClock
) -> None:
    from conftest import finishing

    from tasktrail.domain import TaskDefinition

    started: list[str] = []

    def work(inv: Any) -> None:
        started.append(inv.submit("leaf"))
        raise RuntimeError("boom")

    registry = Registry(
        [
            TaskDefinition("job", 1, {"work": work}),
            TaskDefinition("leaf", 1, {"go": finishing()}),
        ]
    )
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = s.submit("job")
    s.run_pass()
    (child,) = started
    assert s.task(task).status == "completing"
    assert [m.by for m in marks(s, child)] == [task]
    s.run_until_idle()
    assert s.task(child).outcome.status == "aborted"  # type: ignore[union-attr]
    assert s.task(task).outcome.status == "faulted"  # type: ignore[union-attr]
    s.close()


# ─── rule 12: a restart mark never replaces a request mark ──────────────────────────
# pi-durable (`withAbortMark`: a request "replaces `restart`", not the other way;
# `#abandoned`: "Marked, or already marked or gone: done with them"): a task submitted
# with `abandon_on_restart` that a cascade (or a request) marked keeps that mark, and
# its reason, at every later open.


def test_pi_durable_open_keeps_a_request_or_cascade_mark_on_an_abandoned_task(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=3)
    owner = s.submit("job")
    child = s.submit("leaf", owner=owner, abandon_on_restart=True)
    lone = s.submit("job", abandon_on_restart=True)
    s.abort(owner)
    s.abort(lone)
    s.close()
    s = reopen(sqlite_url, clock, registry, limit=3)
    for task_id in (child, lone):
        task = s.task(task_id)
        assert task.abort_requested and task.abort_reason is None
        assert len(marks(s, task_id)) == 1
    s.close()
