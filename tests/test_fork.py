"""``Scheduler.fork``: a new task where another stood, as of a position or a time.

The fork is the source's kind, version and owner, pending at its checkpoint with its
memos as of ``at``; its lineage (source, position) is a ``TaskForked`` event that
explain, the audit read model and replay read. What cannot be forked is refused and
appends nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest
from conftest import event_count
from helpers.checks import folded_rows

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Refused,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    UnknownTask,
)
from tasktrail.domain.history.until import Until
from tasktrail.domain.tasks.describe import format_at
from tasktrail.projections import Projector, ReadModel
from tasktrail.replay import replay
from tasktrail.replay.explain import story


def _failing_run(scheduler: Scheduler) -> tuple[str, int]:
    """A task that checkpoints, remembers, then fails (a bad deploy); returns it and
    the position of its last event before the failure."""
    task = scheduler.submit("job", phase="start")
    scheduler.reserve(task)
    scheduler.checkpoint(task, "end", 2)
    scheduler.memo(task, "cursor", {"page": 7})
    before_failure = scheduler.store.head()
    scheduler.finish(task, "failed", "bad deploy")
    return task, before_failure


def test_fork_as_of_a_position_starts_at_the_checkpoint_and_memos_then(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(store_url, clock=clock, registry=registry, worker="w")
    source, before_failure = _failing_run(scheduler)
    clock.advance(1_000)
    fork = scheduler.fork(source, at=before_failure, actor="alice", reason="redo after fix")
    task = scheduler.task(fork)
    assert task.status == "pending" and task.kind == "job" and task.version == 1
    assert (task.checkpoint.phase, task.checkpoint.attempt) == ("end", 2)  # type: ignore[union-attr]
    assert scheduler.memo(fork, "cursor") == {"page": 7}
    assert scheduler.task(source).status == "terminal"  # the source is left as it was
    submitted, forked = scheduler.history(fork)
    assert (submitted.actor, submitted.why) == ("alice", "redo after fix")  # type: ignore[attr-defined]
    assert (forked.source_id, forked.source_position) == (source, before_failure)  # type: ignore[attr-defined]
    scheduler.run_until_idle()  # it runs from there: end finishes it
    assert scheduler.task(fork).outcome.status == "completed"  # type: ignore[union-attr]
    scheduler.close()
    # A replay of the log folds the same lineage and the same start.
    state = replay(store_url)
    rows = [r for r in state.audit if r["task_id"] == fork]
    assert [r["event_type"] for r in rows][:2] == ["TaskSubmitted", "TaskForked"]
    assert rows[1]["command"] == "fork" and rows[0]["actor"] == "alice"


def test_fork_as_of_now_copies_a_live_task_and_records_the_head(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    owner = scheduler.submit("job", phase="start")
    child = scheduler.submit("leaf", owner=owner, memos={"input": [1, 2]})
    head = scheduler.store.head()
    fork = scheduler.fork(child, id="child-again")
    assert fork == "child-again"
    task = scheduler.task(fork)
    assert task.owner_id == owner and task.kind == "leaf"  # owned like the source
    assert scheduler.memo(fork, "input") == [1, 2]
    assert scheduler.history(fork)[1].source_position == head  # type: ignore[attr-defined]


def test_fork_as_of_a_time_reads_the_source_then(scheduler: Scheduler, clock: ManualClock) -> None:
    task = scheduler.submit("job", phase="start")
    scheduler.reserve(task)
    scheduler.checkpoint(task, "end", 1)
    then = clock()
    clock.advance(5_000)
    scheduler.checkpoint(task, "end", 9)
    scheduler.finish(task, "failed")
    fork = scheduler.fork(task, at=format_at(then))
    assert scheduler.task(fork).checkpoint.attempt == 1  # type: ignore[union-attr]
    assert scheduler.fork(task, at=float(then)) != fork  # ms as a float: a time too


def test_a_fork_forks_the_one_task_not_what_it_owns(scheduler: Scheduler) -> None:
    owner = scheduler.submit("job", phase="start")
    scheduler.submit("leaf", owner=owner)
    fork = scheduler.fork(owner)
    assert [t.id for t in scheduler.tasks() if t.owner_id == fork] == []


@pytest.mark.parametrize(
    ("at", "error", "words"),
    [
        (None, Refused, "it was terminal there, with no checkpoint"),
        (10_000, InvalidArgument, "beyond the log's end"),
        ("9999-01-01T00:00:00Z", InvalidArgument, "after the scheduler clock's now"),
        ("soon", InvalidArgument, "neither a position"),
        (0, InvalidArgument, "not submitted yet as of position 0"),
    ],
)
def test_what_cannot_be_forked_is_refused_and_appends_nothing(
    scheduler: Scheduler, at: object, error: type[Exception], words: str
) -> None:
    task, _ = _failing_run(scheduler)
    before = event_count(scheduler.store)
    with pytest.raises(error, match=words):
        scheduler.fork(task, at=at)  # type: ignore[arg-type]
    assert event_count(scheduler.store) == before


def test_fork_refuses_an_unknown_task_a_taken_id_and_an_ended_owner(
    scheduler: Scheduler,
) -> None:
    owner = scheduler.submit("job", phase="start")
    child = scheduler.submit("leaf", owner=owner)
    head = scheduler.store.head()
    with pytest.raises(UnknownTask):
        scheduler.fork("nobody", at=1)
    with pytest.raises(UnknownTask):
        scheduler.fork("nobody")
    with pytest.raises(Refused, match="already exists"):
        scheduler.fork(child, id=owner)
    scheduler.abort(owner)
    scheduler.run_until_idle()  # the child aborts, then the owner: both terminal
    with pytest.raises(RuleViolation, match="rule 4"):
        scheduler.fork(child, at=head)  # its owner has ended: nothing owns new work
    assert scheduler.store.head() > head  # (the abort's events)


def test_fork_reads_the_source_stream_only(
    scheduler: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    others = [scheduler.submit("leaf") for _ in range(5)]
    task = scheduler.submit("job", phase="start")
    read: list[str] = []
    original = scheduler.store.stream_records

    def spy(stream_id: str) -> list:  # type: ignore[type-arg]
        read.append(stream_id)
        return original(stream_id)

    monkeypatch.setattr(scheduler.store, "stream_records", spy)
    scheduler.fork(task, at=scheduler.store.head())
    assert read == [task] and not set(others) & set(read)


def test_explain_and_the_audit_read_model_show_the_lineage(
    scheduler: Scheduler, tmp_path: Path
) -> None:
    source, before_failure = _failing_run(scheduler)
    fork = scheduler.fork(source, at=before_failure, actor="bob", reason="bad deploy 41")
    steps = story(scheduler.store, fork)
    assert steps[0].actor == "bob" and steps[0].reason == "bad deploy 41"
    assert "by bob: bad deploy 41" in str(steps[0])
    assert steps[1].event_type == "TaskForked"
    assert f"fork of {source}" in steps[1].why and f"position {before_failure}" in steps[1].why
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        rows = ReadModel(projector).audit(fork)
    assert rows[1]["event_type"] == "TaskForked"
    assert rows[1]["detail"] == {"source_id": source, "source_position": before_failure}
    assert (rows[0]["actor"], rows[0]["reason"]) == ("bob", "bad deploy 41")


def test_submit_takes_memos_checked_as_memo_checks_them(scheduler: Scheduler) -> None:
    task = scheduler.submit("leaf", memos={"day": "2026-01-05", "tries": 3})
    assert scheduler.memo(task, "day") == "2026-01-05" and scheduler.memo(task, "tries") == 3
    before = event_count(scheduler.store)
    with pytest.raises(InvalidArgument, match="memo name"):
        scheduler.submit("leaf", memos={"": 1})
    with pytest.raises(InvalidArgument, match="JSON"):
        scheduler.submit("leaf", memos={"when": object()})
    with pytest.raises(InvalidArgument, match="mapping"):
        scheduler.submit("leaf", memos=[("a", 1)])  # type: ignore[arg-type]
    assert event_count(scheduler.store) == before


def test_until_lives_in_the_domain_and_replay_names_it_as_before() -> None:
    from tasktrail.replay.state import Until as ReplayUntil
    from tasktrail.replay.until import Until as OldName

    assert ReplayUntil is Until and OldName is Until


def test_the_cli_registry_less_scheduler_only_marks_at_abort(
    sqlite_url: str, clock: ManualClock
) -> None:
    worker = Scheduler.open(
        sqlite_url, clock=clock, registry=Registry([TaskDefinition("job", 1, {})]), worker="a"
    )
    task = worker.submit("ghost", phase="start")  # no definition takes it
    worker.close()
    operator = Scheduler.open(sqlite_url, clock=clock, worker="b")  # no registry
    assert operator.abort(task) is True
    assert operator.task(task).status == "pending" and operator.task(task).abort_requested
    operator.close()


def test_until_parse_is_what_fork_reads() -> None:
    assert Until.parse("12").position == 12 and Until.parse(3.5).at == 3.5


def test_a_fork_as_of_each_position_starts_where_a_replay_to_it_leaves_the_source(
    sqlite_url: str, clock: ManualClock
) -> None:
    """Reading the source's own stream as of a position gives what replaying the whole
    log to that position gives (its checkpoint and memos), at every position."""
    waits = Registry([TaskDefinition("job", 1, {}), TaskDefinition("leaf", 1, {})])
    s = Scheduler.open(sqlite_url, clock=clock, registry=waits, worker="w")
    source = s.submit("job", phase="a")
    other = s.submit("leaf", phase="go")
    s.reserve(source)
    s.memo(source, "n", 1)
    s.checkpoint(source, "b", 1)
    s.memo(source, "n", [2, {"deep": True}])
    s.wait(source, on=[other], phase="c", attempt=3)
    s.reserve(other)
    s.finish(other)
    clock.advance(10)
    s.reserve(source)
    s.sleep(source, until=clock() + 5, phase="d")
    clock.advance(10)
    s.reserve(source)
    s.finish(source, "failed")
    head = s.store.head()
    for position in range(1, head + 1):
        then = replay(sqlite_url, until=position).held.get(source)
        if then is None or then.status not in ("pending", "running", "waiting", "sleeping"):
            with pytest.raises(InvalidArgument if then is None else Refused):
                s.fork(source, at=position)
            continue
        fork = s.task(s.fork(source, at=position))
        assert fork.checkpoint == then.checkpoint and dict(fork.memos) == dict(then.memos)
    s.close()


ACTS = "SELECT position, task_id, command, actor, reason, detail FROM audit WHERE actor IS NOT NULL"
"""docs/operating.md's query for "who aborted or forked what, and why"."""


def _acts_store(store_url: str, clock: ManualClock, registry: Registry) -> tuple[str, str, int]:
    """A store with an operator's submit, a failed run, and a fork of it by an operator
    (its source and the position forked at); the fork's id."""
    scheduler = Scheduler.open(store_url, clock=clock, registry=registry, worker="w")
    try:
        scheduler.submit("leaf", actor="ana", reason="by hand")
        source, before_failure = _failing_run(scheduler)
        fork = scheduler.fork(source, at=before_failure, actor="bob", reason="bad deploy 41")
        scheduler.submit("leaf")  # after the fork: a batch may end anywhere
    finally:
        scheduler.close()
    return source, fork, before_failure


@pytest.mark.parametrize("batch_size", [1, 2, 5_000])
def test_a_forks_acting_row_says_fork_and_names_its_source(
    store_url: str, clock: ManualClock, registry: Registry, tmp_path: Path, batch_size: int
) -> None:
    """The query docs/operating.md gives for who forked what tells a fork from a submit:
    the fork's acting row says ``fork`` and names its source and position, in the read
    model whatever its batches, and in a replay alike."""
    source, fork, before_failure = _acts_store(store_url, clock, registry)
    views = tmp_path / "views.db"
    with Projector(store_url, views, batch_size=batch_size) as projector:
        projector.catch_up()
        acts = [
            dict(
                zip(
                    ("position", "task_id", "command", "actor", "reason", "detail"),
                    row,
                    strict=True,
                )
            )
            for row in projector.db.execute(ACTS)
        ]
        live = folded_rows(projector, "audit")
    assert [(a["command"], a["actor"]) for a in acts] == [("submit", "ana"), ("fork", "bob")]
    forked = acts[1]
    assert forked["task_id"] == fork and forked["reason"] == "bad deploy 41"
    detail = orjson.loads(forked["detail"])
    assert (detail["source_id"], detail["source_position"]) == (source, before_failure)
    assert detail["kind"] == "job" and detail["phase"] == "end"  # the submission's fields too
    replayed = replay(store_url).audit
    assert sorted(live, key=lambda r: r["position"]) == sorted(
        replayed, key=lambda r: r["position"]
    )
    steps = story(store_url, fork)
    assert steps[0].command == "fork" and f"source_id={source}" in steps[0].why


def test_a_read_model_an_earlier_release_built_is_folded_again_for_the_fork_rows(
    store_url: str, clock: ManualClock, registry: Registry, tmp_path: Path
) -> None:
    """A read model whose audit rows an earlier release wrote (a fork's acting row said
    ``submit``, and no version was tracked) is folded again from 0 for the audit, and
    only for it: its tables are then what a rebuild writes."""
    _, fork, _ = _acts_store(store_url, clock, registry)
    views = tmp_path / "views.db"
    with Projector(store_url, views) as projector:
        projector.catch_up()
    with sqlite3.connect(views) as conn:  # as the earlier release left it
        conn.execute("UPDATE audit SET command = 'submit' WHERE event_type = 'TaskSubmitted'")
        conn.execute("ALTER TABLE projection_positions DROP COLUMN version")
    conn.close()
    with Projector(store_url, views) as projector:
        report = projector.catch_up()
        caught_up = projector.table_checksums()
        (command,) = projector.db.execute(
            "SELECT command FROM audit WHERE task_id = ? AND event_type = 'TaskSubmitted'", [fork]
        ).fetchone()
    assert command == "fork"
    assert report.written["audit"] > 0 and report.written["live_mirror"] == 0
    with Projector(store_url, tmp_path / "rebuilt.db") as rebuilt:
        rebuilt.rebuild()
        assert rebuilt.table_checksums() == caught_up
