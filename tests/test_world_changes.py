"""Per-tick work that looks only at what changed (issue 43: a cheaper task).

A worker's wake and blocked reports once asked after every live task at every tick;
they now ask after the tasks the world's fold says changed (``domain/app/changes.py``).
These tests hold the incremental answers to the full ones after every step of random
histories: tasks submitted, run, put to sleep, ended; a batch the block refuses (its
tasks put back); a snapshot (the world compacted, a reader's unread changes trimmed);
definitions unregistered and registered again (every blocked reason changes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition, Worker
from tasktrail.domain.app import changes
from tasktrail.domain.app.changes import Changes, Selected
from tasktrail.domain.tasks.definitions import blocked_reason
from tasktrail.domain.tasks.restart_limit import restart_limit_of

JOB = TaskDefinition("job", 1, {"start": lambda inv: None})
NAP = TaskDefinition("nap", 1, {"start": lambda inv: None, "done": lambda inv: None})

STEPS = st.lists(
    st.sampled_from(
        [
            *("submit", "nap", "reserve", "sleep", "finish", "refused", "batched"),
            *("snapshot", "drop", "add"),
        ]
    ),
    min_size=1,
    max_size=30,
)


def _timed(world: Any) -> set[str]:
    return {
        t for t in world.live if world.tasks[t].until is not None or world.tasks[t].flow is not None
    }


def _blocked(s: Scheduler) -> dict[str, str]:
    limit, failed = restart_limit_of(s.world), s.failed_migrations
    reasons = {t: blocked_reason(s.world.tasks[t], s.registry, limit, failed) for t in s.world.live}
    return {t: why for t, why in reasons.items() if why is not None}


def _step(s: Scheduler, clock: ManualClock, step: str, n: int) -> None:
    live = sorted(s.world.live)
    pick = live[n % len(live)] if live else None
    if step in ("submit", "nap"):
        s.submit("job" if step == "submit" else "nap", id=f"t{n}", phase="start")
    elif step == "reserve" and pick is not None and s.task(pick).status == "pending":
        if s.registry.get(s.task(pick).kind) is not None:  # a blocked task is refused
            s.reserve(pick)
    elif step == "sleep" and pick is not None and s.task(pick).status == "running":
        s.sleep(pick, clock.now + 1_000, phase="done" if s.task(pick).kind == "nap" else "start")
    elif step == "finish" and pick is not None and s.task(pick).status == "running":
        s.finish(pick, "completed")
    elif step == "refused":
        with pytest.raises(RuntimeError), s.batch():
            s.submit("job", id=f"refused-{n}", phase="start")
            if pick is not None and s.task(pick).status == "running":
                s.finish(pick, "completed")
            raise RuntimeError("the block fails: nothing of it is kept")
    elif step == "batched":  # the batch's view becomes the world, in place
        with s.batch():
            s.submit("nap", id=f"batched-{n}", phase="start")
            if pick is not None and s.task(pick).status == "running":
                s.sleep(pick, clock.now + 500, phase="start")
    elif step == "snapshot":
        s.snapshot()
    elif step == "drop":
        s.registry.unregister("job")
    elif step == "add":
        s.registry.register(JOB)
    clock.advance(300)


@settings(
    max_examples=examples(25, 200),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS, look_every=st.integers(1, 4))
@example(steps=["nap", "reserve", "batched"], look_every=1)  # a task put to sleep in a batch
@example(steps=["nap", "reserve", "snapshot", "sleep", "drop", "add"], look_every=2)
def test_incremental_answers_equal_the_full_ones_after_every_step(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[str],
    look_every: int,
) -> None:
    monkeypatch.setattr(changes, "OVERFLOW_AT", 2)  # a snapshot trims what was left unread
    path = tmp_path_factory.mktemp("changes") / "trail.db"
    clock = ManualClock(1_000_000)
    s = Scheduler.open(str(path), clock=clock, registry=Registry([JOB, NAP]), worker="w")
    blocked: list[tuple[str, str]] = []
    worker = Worker(
        s,
        on_blocked=lambda t, why: blocked.append((t, why)),
        on_unblocked=lambda t, why: blocked.append((t, "unblocked")),
    )
    timed = Selected(lambda task: task.until is not None or task.flow is not None)
    try:
        for n, step in enumerate(steps):
            _step(s, clock, step, n)
            if n % look_every == 0:  # a reader that skips ticks sees the changes of several
                with s._lock:
                    assert timed.of(s.world) == _timed(s.world), step
                worker._report_blocked()
                assert worker._blocked == _blocked(s), step
                assert s.wake() == _full_wake(s), step
    finally:
        s.close()


def _full_wake(s: Scheduler) -> dict[str, Any]:
    """Rule 15 asked of every live task (what ``wake`` answered before it kept changes)."""
    from tasktrail.domain.world import Draft

    with s._lock:
        ctx, draft = s._context(), Draft(s.world)
        active, at = bool(s._invocations), None
        for task_id in s.world.live:
            task = s.world.tasks[task_id]
            state = s._readiness(draft, ctx, task)
            if state in ("sleeping", "message") and task.until is not None:
                at = task.until if at is None else min(at, task.until)
            elif state in ("ready", "running"):
                active = True
    return {"active": active, "at": at}


def test_a_reader_of_another_world_looks_at_every_task_once(tmp_path: Path) -> None:
    s = Scheduler.open(str(tmp_path / "trail.db"), registry=Registry([JOB]), worker="w")
    try:
        reader = Changes()
        assert reader.since(s.world) is None  # a world it has not seen: look at all
        first = s.submit("job")
        assert reader.since(s.world) == {first}
        assert reader.since(s.world) == set()  # read: emptied
        other = s.world.copy()
        assert reader.since(other) is None
        assert not any(w is reader._changed for w in s.world.watchers)  # the old one forgot it
        reader.forget()
        assert other.watchers == []
    finally:
        s.close()


def test_a_reader_that_stops_looking_is_trimmed_at_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that asked ``wake`` once and never again keeps no set that grows with
    every task the scheduler ever changed: a compaction empties it, and the reader's
    next look is a full one."""
    monkeypatch.setattr(changes, "OVERFLOW_AT", 5)
    s = Scheduler.open(str(tmp_path / "trail.db"), registry=Registry([JOB]), worker="w")
    try:
        reader = Changes()
        reader.since(s.world)
        for _ in range(20):
            s.finish(_run(s), "completed")
        assert len(reader._changed) == 20
        s.world.compact()
        assert len(reader._changed) == 0 and reader._changed.overflowed
        assert reader.since(s.world) is None
    finally:
        s.close()


def _run(s: Scheduler) -> str:
    task = s.submit("job")
    s.reserve(task)
    return task


def test_a_task_put_back_after_a_refused_group_counts_as_changed(tmp_path: Path) -> None:
    """A group the store refused is undone task by task (``World.restore_task``): a
    reader sees each such task as changed, as it saw the group's events."""
    s = Scheduler.open(str(tmp_path / "trail.db"), registry=Registry([JOB]), worker="w")
    try:
        task = _run(s)
        before = s.world.tasks[task]
        s.finish(task, "completed")
        reader = Changes()
        reader.since(s.world)
        last = s.store.stream(task)[-1]
        with s._lock:
            s.world.restore_task(task, before, last)
        assert reader.since(s.world) == {task}
        assert task in s.world.live
    finally:
        s.close()


def test_a_world_given_another_state_in_place_tells_its_readers(tmp_path: Path) -> None:
    """A batch's view that becomes the world, or a restored snapshot, is copied into the
    world object others hold (:func:`hold_in_place`): its readers keep their sets, and
    learn the tasks the new state changed (every live one, unnamed)."""
    from tasktrail.domain.history.in_place import hold_in_place

    s = Scheduler.open(str(tmp_path / "trail.db"), registry=Registry([JOB]), worker="w")
    try:
        kept = _run(s)
        reader = Changes()
        reader.since(s.world)
        other = s.world.copy()
        new = s.submit("job", phase="start")
        hold_in_place(s.world, other, changed=["named"])
        assert reader.since(s.world) == {new, "named"}  # its own fold, and the named
        hold_in_place(s.world, other.copy())
        assert reader.since(s.world) == {kept}  # unnamed: every task live in either
        assert any(w is reader._changed for w in s.world.watchers)
    finally:
        s.close()
