"""Idempotent submits (rule 18): ``submit(..., key=K)`` is one task per key and store.

The first submission with a key creates the task, with the key's own stream
(``key:K``, one event) in the same append; every later one returns that task's id
and appends nothing, whatever its other arguments, from this process or another,
after compaction, a snapshot and a reopen. Two writers racing one key get one task:
the store's version check on the key's stream refuses the loser's append whole, and
the loser returns the winner's task.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from conftest import crash, event_count, reopen
from helpers.cli import run
from helpers.contender import registry as contended_kinds
from test_concurrency import CONTENDERS, Contenders, _appended, race_to_submit

from tasktrail.domain import (
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    UnknownTask,
)
from tasktrail.domain.tasks.events import TaskSubmitted
from tasktrail.domain.tasks.keys import KeyClaimed, key_stream_id

ROUNDS = 4


def test_a_second_submit_with_a_key_is_the_first_task_and_appends_nothing(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    try:
        first = s.submit("job", key="order-17", memos={"n": 1}, actor="web", reason="POST")
        head = event_count(store_url)
        again = [
            s.submit("job", key="order-17"),
            # Whatever the other arguments: another kind, phase, input, priority, id, owner.
            s.submit("leaf", key="order-17", phase="go", memos={"n": 2}, priority=9, id="other"),
            s.submit("job", key="order-17", owner=first),
        ]
        assert again == [first] * 3
        assert event_count(store_url) == head  # nothing appended
        with pytest.raises(UnknownTask):
            s.task("other")
        task = s.task(first)
        assert (task.kind, task.memos, task.priority, task.owner_id) == ("job", {"n": 1}, 0, None)
        submitted = s.history(first)[0]
        assert isinstance(submitted, TaskSubmitted) and submitted.key == "order-17"
        assert s.task_of_key("order-17") == first
        assert s.task_of_key("order-18") is None
        assert s.submit("job", key="order-18") != first  # another key, another task
    finally:
        s.close()


def test_a_key_outlives_its_tasks_end_through_compaction_a_snapshot_and_a_reopen(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    done = s.submit("leaf", key="done")
    s.run_pass()
    assert s.task(done).status == "terminal"
    live = s.submit("job", key="live")
    s.world.compact()
    # The ended task's key is no longer held in memory: read back from the store.
    assert key_stream_id("done") not in s.world.streams and done not in s.world.tasks
    assert key_stream_id("live") in s.world.streams
    head = event_count(store_url)
    assert s.submit("leaf", key="done") == done
    assert s.submit("job", key="live") == live
    assert event_count(store_url) == head
    s.close()  # a snapshot at close
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    try:
        assert s.snapshot_at == head and s.snapshot_problems == []
        assert key_stream_id("done") not in s.world.streams  # the snapshot holds live work
        assert s.submit("leaf", key="done") == done
        assert s.submit("job", key="live") == live
        assert s.task_of_key("done") == done
        assert event_count(store_url) == head
    finally:
        s.close()


def test_two_writers_racing_one_key_get_one_task(store_url: str) -> None:
    """Two schedulers submit one key at once (threads behind a barrier; on PostgreSQL
    each append waits until both decided, so both decide before either appends and
    the store settles it): both get the winner's id, and the store holds one task. With
    fresh ids each, and (odd rounds) with the same id."""
    writers = [
        Scheduler.open(store_url, clock=ManualClock(0), registry=contended_kinds(), worker=w)
        for w in ("w0", "w1")
    ]
    hold = store_url.startswith("postgresql")
    try:
        for round_ in range(ROUNDS):
            key = f"race-{round_}"
            head = len(list(writers[0].store.read()))
            task_id = f"same-{round_}" if round_ % 2 else None
            outcomes = race_to_submit(writers, task_id, hold, key=key)  # type: ignore[arg-type]
            assert isinstance(outcomes[0], str) and outcomes == [outcomes[0]] * 2, outcomes
            # The winner's submission and its key's claim only.
            assert len(list(writers[0].store.read())) == head + 2
            (claim,) = writers[0].store.stream_records(key_stream_id(key))
            assert isinstance(claim.event, KeyClaimed) and claim.event.task_id == outcomes[0]
            for writer in writers:
                assert writer.task(outcomes[0]).status == "pending"
    finally:
        for writer in writers:
            writer.close()


@pytest.fixture
def contenders(store_url: str) -> Iterator[Contenders]:
    opened = Contenders(store_url, CONTENDERS)
    yield opened
    opened.close()


def test_processes_racing_one_key_get_one_task(store_url: str, contenders: Contenders) -> None:
    """Processes (``helpers/contender.py``) submit one key at once, each deciding on the
    same snapshot, so every append but the first loses on the key's stream (a
    conflict, nothing appended); deciding again, each reads the winner's task."""
    s = Scheduler.open(store_url, clock=ManualClock(0), registry=contended_kinds())
    try:
        for round_ in range(ROUNDS):
            key = f"shared-{round_}"
            head = s.store.head()
            answers = contenders.race(["submit_key"] * CONTENDERS, key, retry=True)
            assert [a["outcome"] for a in answers] == ["won"] * CONTENDERS, answers
            assert len({a["value"] for a in answers}) == 1, answers  # one task for all
            assert _appended(s, head, answers) == 2  # its submission and its key's claim
            assert sorted(a["written"] for a in answers) == [0] * (CONTENDERS - 1) + [2]
            assert sum(a["conflicts"] for a in answers) == CONTENDERS - 1  # lost at the store
            assert s.task_of_key(key) == answers[0]["value"]
    finally:
        s.close()


def test_a_phase_submits_its_child_once_with_a_key(store_url: str, clock: ManualClock) -> None:
    """``inv.submit(..., key=)``: a phase run again after its process died gets the
    child its earlier run submitted, not a second one; so does a second submission."""
    seen: list[str] = []

    def child_key(inv: Any) -> str:
        return f"{inv.task_id}/child"

    def first(inv: Any) -> str:
        seen.append(inv.submit("leaf", key=child_key(inv)))
        seen.append(inv.submit("leaf", key=child_key(inv), memos={"other": True}))
        return "second"

    def second(inv: Any) -> None:
        seen.append(inv.submit("leaf", key=child_key(inv)))
        inv.finish("completed")

    kinds = Registry(
        [
            TaskDefinition("parent", 1, {"first": first, "second": second}),
            TaskDefinition("leaf", 1, {"go": lambda inv: inv.finish("completed")}),
        ]
    )
    s = Scheduler.open(store_url, clock=clock, registry=kinds, worker="w")
    parent = s.submit("parent")
    # An earlier invocation of the phase submitted the child, then its process died.
    s.reserve(parent)
    earlier = s.submit_owned(parent, "leaf", key=f"{parent}/child")
    crash(s)
    s = reopen(store_url, clock, kinds, 3)  # recovery: the parent is pending again
    try:
        assert s.task(parent).restarts == 1
        s.run_until_idle()
        assert seen == [earlier] * 3, seen
        child = s.task(seen[0])
        assert child.owner_id == parent and child.status == "terminal"
        assert [t.id for t in s.tasks() if t.kind == "leaf"] == [child.id]
        assert s.task(parent).status == "terminal"
    finally:
        s.close()


@pytest.mark.parametrize("bad", ["", "  ", 7, b"k", "k" * 257, "a\x00b", "\udc80"])
def test_a_key_that_is_no_name_is_refused_by_rule_18(
    store_url: str, clock: ManualClock, registry: Registry, bad: object
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    try:
        head = event_count(store_url)
        with pytest.raises(RuleViolation) as refused:
            s.submit("job", key=bad)  # type: ignore[arg-type]
        assert refused.value.rule == 18 and "idempotency key" in str(refused.value)
        with pytest.raises(RuleViolation, match="rule 18"):
            s.task_of_key(bad)  # type: ignore[arg-type]
        assert event_count(store_url) == head
    finally:
        s.close()


def test_the_submit_command_with_a_key_twice(
    sqlite_url: str, clock: ManualClock, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    Scheduler.open(sqlite_url, clock=clock, registry=registry).close()
    first = run(["submit", sqlite_url, "job", "--phase", "start", "--key", "K-1"], capsys)
    assert first.code == 0 and first.err == "", first
    task_id = first.out.split()[-1]
    head = event_count(sqlite_url)
    again = run(["submit", sqlite_url, "other", "--phase", "x", "--key", "K-1", "--json"], capsys)
    assert again.code == 0, again
    record = orjson.loads(again.out)
    assert record["task_id"] == task_id and record["existed"] is True
    assert record["kind"] == "job" and record["key"] == "K-1"
    assert f"task {task_id} existed with key 'K-1': nothing recorded" in again.err
    assert event_count(sqlite_url) == head
    plain = run(["submit", sqlite_url, "job", "--phase", "start", "--key", "K-1"], capsys)
    assert plain.out.split()[-1] == task_id and "existed" in plain.err
    history = run(["history", sqlite_url, task_id], capsys)
    assert "key=K-1" in history.out
