"""Flow control (issue 44, rules 33 and 34): a definition's ``Limit`` holds a task's
phase while its key's slots are taken, its ``Rate`` starts phases within a token
bucket; two workers race for the last slot, a refused group is put back, replay and a
snapshot keep the flow state, ``tasks`` and ``explain`` say why a task is held back,
and ``runnable(limit)`` passes over held-back tasks. Each on SQLite and PostgreSQL; a
submission's ``Debounce`` (rule 35) is tests/test_flow_debounce.py's, the policies
refused when made (rule 36) tests/test_flow_policies.py's, and the fleet of worker
processes tests/test_flow_fleet.py's."""

from __future__ import annotations

import contextlib

import pytest
from conftest import crash, event_count, examples
from helpers.flow import flows as flows  # a fixture, and flows.__wrapped__ below
from helpers.flow import s as s  # a fixture
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tasktrail.domain import (
    ConflictError,
    Debounce,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
)
from tasktrail.domain.tasks.flow_events import LimitSlotTaken, RateTokenTaken
from tasktrail.replay import replay


def test_rule_33_a_limit_holds_a_tasks_phase_until_one_of_its_key_stops(
    s: Scheduler, store_url: str
) -> None:
    acme = [s.submit("job", memos={"tenant": "acme"}) for _ in range(3)]
    other = s.submit("job", memos={"tenant": "globex"})
    free = s.submit("job", memos={})  # its key function answers None: not held back
    assert s.task(acme[0]).flow is not None and s.task(acme[0]).flow.limit_key == "acme"
    assert [s.reserve(t) for t in acme[:2]] == ["run", "run"]
    head = event_count(store_url)
    with pytest.raises(RuleViolation) as refused:
        s.reserve(acme[2])
    assert refused.value.rule == 33 and "'acme'" in str(refused.value)
    assert event_count(store_url) == head  # a refusal appends nothing
    held = s.held_back(acme[2])
    assert held is not None and (held.reason, held.key) == ("limited", "acme")
    assert (held.running, held.max_running) == (2, 2)
    assert s.reserve(other) == "run" and s.reserve(free) == "run"  # other keys run
    assert s.held_back(other) is None
    s.checkpoint(acme[0], "go")  # a running phase that goes on holds its slot
    assert s.held_back(acme[2]) is not None
    s.sleep(acme[0], s.now() + 60_000)  # a sleep lets it go
    assert s.held_back(acme[2]) is None
    assert s.reserve(acme[2]) == "run"
    slots = [e for e in s.store.read() if isinstance(e.event, LimitSlotTaken)]
    assert [(r.event.task_id, r.event.running) for r in slots if r.event.key == "acme"] == [
        (acme[0], 1),
        (acme[1], 2),
        (acme[2], 2),
    ]


def test_rule_33_held_back_tasks_are_not_runnable_and_a_pass_takes_them_in_turn(
    s: Scheduler,
) -> None:
    acme = [s.submit("job", memos={"tenant": "acme"}) for _ in range(5)]
    assert s.runnable() == acme[:2]  # only the free slots' worth of one key
    for task_id in acme:
        s.reserve(task_id) if task_id in s.runnable() else None
    assert [s.task(t).status for t in acme] == ["running"] * 2 + ["pending"] * 3
    assert s.runnable() == []
    assert s.wake() == {"active": True, "at": None}  # what runs is active; nothing due
    s.finish(acme[0], "completed")
    s.finish(acme[1], "completed")
    s.run_until_idle()
    assert [s.task(t).status for t in acme] == ["terminal"] * 5


def test_rule_34_a_rate_starts_phases_within_its_token_bucket_on_a_manual_clock(
    s: Scheduler, clock: ManualClock, store_url: str
) -> None:
    calls = [s.submit("call", memos={"model": "gpt"}) for _ in range(5)]
    assert s.runnable() == calls[:3]  # a full bucket: burst 3
    for task_id in calls[:3]:
        assert s.reserve(task_id) == "run"
        s.finish(task_id, "completed")
    head = event_count(store_url)
    with pytest.raises(RuleViolation) as refused:
        s.reserve(calls[3])
    assert refused.value.rule == 34 and event_count(store_url) == head
    held = s.held_back(calls[3])
    assert held is not None and (held.reason, held.key) == ("rate_limited", "gpt")
    start = clock.now
    assert held.next_at == start + 500  # 2 a second: the next token in 500 ms
    # 15. Nothing can run and nothing runs: not active, and due at the next token.
    assert s.wake() == {"active": False, "at": start + 500}
    clock.advance(499)
    assert s.runnable() == [] and s.held_back(calls[3]) is not None
    clock.advance(1)
    assert s.runnable() == [calls[3]]  # one token: one start, the other still held
    assert s.reserve(calls[3]) == "run"
    assert s.wake()["at"] == start + 1000
    clock.advance(500)
    assert s.reserve(calls[4]) == "run"
    tokens = [r.event.tokens for r in s.store.read() if isinstance(r.event, RateTokenTaken)]
    assert tokens == [2, 1, 0, 0, 0]
    clock.advance(60_000)  # a minute idle fills the bucket to its burst, no more
    more = [s.submit("call", memos={"model": "gpt"}) for _ in range(4)]
    assert s.runnable() == more[:3]


def test_rule_34_a_worker_sleeps_until_the_next_token(s: Scheduler, clock: ManualClock) -> None:
    from tasktrail.domain import Worker

    calls = [s.submit("call", memos={"model": "m"}) for _ in range(4)]
    worker = Worker(s, concurrency=8)
    worker.tick()
    assert [s.task(t).status for t in calls] == ["terminal"] * 3 + ["pending"]
    assert worker.next_deadline() == clock.now + 500  # the token, not a poll
    clock.advance(500)
    worker.tick()
    assert s.task(calls[3]).status == "terminal"


def test_two_workers_racing_for_the_last_slot_conflict_and_one_is_refused(
    store_url: str, clock: ManualClock, flows: Registry
) -> None:
    """The limit key's stream is the guard (docs/fleet.md): a reservation decided on a
    log another worker's reservation of the same key overtook is refused whole by the
    store, and decided again it is held back."""
    one = Scheduler.open(store_url, clock=clock, registry=flows, worker="w1")
    two = Scheduler.open(store_url, clock=clock, registry=flows, worker="w2")
    try:
        acme = [one.submit("job", memos={"tenant": "acme"}) for _ in range(3)]
        one.reserve(acme[0])
        two.refresh()
        # The batch decides on the log as it stands (one slot free); the other worker
        # takes that slot first.
        with pytest.raises(ConflictError), two.batch():
            assert two.reserve(acme[2]) == "run"
            one.reserve(acme[1])
        with pytest.raises(RuleViolation) as refused:
            two.reserve(acme[2])  # decided again: the limit is reached
        assert refused.value.rule == 33
        statuses = [one.task(t).status for t in acme]
        assert statuses == ["running", "running", "pending"]
    finally:
        one.close()
        two.close()


def test_replay_equals_live_and_a_snapshot_keeps_the_flow_state(
    store_url: str, clock: ManualClock, flows: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=flows, worker="w1")
    jobs = [s.submit("job", memos={"tenant": "acme"}) for _ in range(3)]
    calls = [s.submit("call", memos={"model": "m"}) for _ in range(4)]
    s.submit("plain", debounce=Debounce(key="d", wait_s=30))
    for task_id in [*jobs, *calls]:
        with contextlib.suppress(RuleViolation):
            s.reserve(task_id)
    s.finish(jobs[0], "completed")
    live = {t.id: t for t in s.tasks() if t.live}
    folded = replay(store_url)
    assert {t: folded.live[t] for t in live} == live
    s.snapshot()
    crash(s)
    again = Scheduler.open(store_url, clock=clock, registry=flows, worker="w1")
    try:
        assert again.snapshot_at > 0 and not again.snapshot_problems
        # Recovery let every running task go (rule 9): all of a key's slots are free.
        assert again.held_back(jobs[2]) is None
        held = again.held_back(calls[3])
        assert held is not None and held.reason == "rate_limited"
    finally:
        again.close()


def test_a_refused_group_of_limited_reservations_is_put_back_in_place(
    store_url: str, clock: ManualClock, flows: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group commit the store refused holds the flow keys' streams: put back from the
    states the group kept (``undoable``), not folded again from the store, and the world
    is the store's fold after it, its index of running tasks by key included."""
    from test_group_commit import Appends, assert_world_is_the_fold

    from tasktrail.domain.app.phases import PassReport
    from tasktrail.domain.commands.snapshots import SnapshotCommands

    s = Scheduler.open(store_url, clock=clock, registry=flows, worker="here")
    taken, free = (s.submit("job", memos={"tenant": "acme"}) for _ in range(2))
    calls = s.submit("call", memos={"model": "m"})
    other = Scheduler.open(store_url, clock=clock, registry=flows, worker="there")
    restores: list[bool] = []
    original = SnapshotCommands._restore
    monkeypatch.setattr(
        SnapshotCommands,
        "_restore",
        lambda self, in_place=False: restores.append(in_place) or original(self, in_place),
    )
    appends = Appends(s, before=lambda: other.reserve(taken))
    started = s.start_invocations([taken, free, calls], 3, PassReport())
    assert started.modes == {free: "run", calls: "run"} and s.conflicts == 1
    assert appends.kinds[0].count("LimitSlotTaken") == 2  # the refused group held them
    assert restores == []  # put back in place: no fold from the store
    assert_world_is_the_fold(s, store_url)
    fresh = replay(store_url).world
    assert s.world.indexes["flow_running"] == fresh.indexes["flow_running"]
    for stream_id, version in fresh.stream_versions.items():
        assert s.world.stream_versions[stream_id] == version
        assert s.world.streams[stream_id] == fresh.streams[stream_id]
    other.close()
    s.close()


def test_held_back_reasons_and_keys_in_tasks_and_explain(
    store_url: str, flows: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tasktrail tasks`` and ``explain`` read the keys and compute the reasons from the
    log alone (no registry), as of now."""
    import orjson

    from tasktrail.replay.cli import main

    s = Scheduler.open(store_url, registry=flows, worker="w1")  # the real clock: as `tasks`
    acme = [s.submit("job", memos={"tenant": "acme"}) for _ in range(3)]
    s.reserve(acme[0]), s.reserve(acme[1])
    crash(s)  # left running, as a live worker leaves them
    capsys.readouterr()
    assert main(["tasks", store_url]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    shown = "pending go limit=acme limited acme (2/2 running)"
    assert " ".join(lines[acme[2]].split()[2:]) == shown
    assert "limited" not in lines[acme[0]] and "limit=acme" in lines[acme[0]]
    assert main(["tasks", store_url, "--json"]) == 0
    rows = {r["id"]: r for r in map(orjson.loads, capsys.readouterr().out.splitlines())}
    assert rows[acme[2]]["flow"] == {"limit": {"key": "acme", "max_running": 2}}
    assert rows[acme[2]]["held_back"] == {
        "reason": "limited",
        "key": "acme",
        "running": 2,
        "max_running": 2,
    }
    assert "held_back" not in rows[acme[0]]
    assert main(["explain", store_url, acme[2]]) == 0
    told = capsys.readouterr().out
    assert "FlowKeysRecorded" in told and "limit_key=acme" in told
    assert "now held back, limited: 2 of 2 tasks of kind job with limit key 'acme'" in told
    assert main(["explain", store_url, acme[0]]) == 0
    assert "now held back" not in capsys.readouterr().out


@settings(max_examples=examples(20, 150), deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["job-acme", "job-beta", "call", "plain"]), max_size=14),
    running=st.integers(0, 4),
    limit=st.integers(0, 6),
)
@example(kinds=["job-acme"] * 3 + ["plain"], running=0, limit=3)  # a key's room shared
@example(kinds=["call"] * 5 + ["job-beta"], running=2, limit=2)  # a rate's tokens shared
def test_a_limited_runnable_is_the_head_of_the_whole_one_past_held_back_tasks(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str], running: int, limit: int
) -> None:
    """A worker with a few free slots asks ``runnable(limit)``, which asks after tasks
    only until ``limit`` are let through (issue 43: not every task queued at every
    tick). It must be the first ``limit`` of the whole answer: tasks that rules 33 and
    34 hold back are passed over, never end the look early nor starve the others."""
    registry = flows.__wrapped__()  # type: ignore[attr-defined]
    path = tmp_path_factory.mktemp("limited") / "trail.db"
    s = Scheduler.open(str(path), clock=ManualClock(1_000_000), registry=registry, worker="w")
    try:
        for kind in kinds:
            memos = {"tenant": kind.removeprefix("job-"), "model": "gpt"}
            s.submit(kind.split("-")[0], memos=memos)
        for task_id in s.runnable()[:running]:
            s.reserve(task_id)
        whole = s.runnable()
        assert s.runnable(limit) == whole[:limit]
    finally:
        s.close()
