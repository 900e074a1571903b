"""Issue 15: a fold calls an indexer only for the event classes it reacts to.

Each registered indexer declares those classes (``register_indexer(reacts_to=...)``),
and :func:`~tasktrail.domain.hooks.indexers_for` builds from them a table, event
class -> the indexers to call. These tests hold the table to the slow path it
replaces, every indexer called for every event: on mixed logs (tasks with owners and
waits, Turns, wakeups, cleanups, passes, runs and schedules) both folds give the same
world after every event, to the byte of its snapshot.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain import Refused, World, open_store, world_fold
from tasktrail.domain.demo.workload import run_demo
from tasktrail.domain.history import encode_world
from tasktrail.domain.hooks import INDEXERS, REACTS, STREAM_INDEXERS, indexers_for
from tasktrail.domain.runs.events import ScheduleSet
from tasktrail.domain.store.store import Recorded
from tasktrail.domain.tasks.events import TaskEnded, TaskReserved, TaskSubmitted
from tasktrail.domain.tasks.evolve import evolve, evolve_stream
from tasktrail.replay.harness import Harness
from tasktrail.replay.strategies import command_sequences


class _EveryIndexer(dict[type, Any]):
    """A dispatch table that calls every indexer for every event (the slow path)."""

    def get(self, cls: type, default: Any = None) -> Any:
        return indexers_for(cls, every=True)


def _reference_step(world: World, event: Any) -> None:
    """One event folded the plain way: ``evolve``, the task indexes through
    :func:`~tasktrail.domain.world_fold.index_task` (which ``apply_event`` inlines),
    then every indexer."""
    cls = type(event)
    world.folded += 1
    if cls.task_stream:
        previous = world.tasks.get(event.task_id)
        state = evolve(previous, event)
        world.tasks[state.id] = state
        world.unknown.discard(state.id)
        world_fold.index_task(world, previous, state)
    else:
        stream_id = event.stream_id()
        previous = world.streams.get(stream_id)
        state = evolve_stream(previous, event)
        world.streams[stream_id] = state
        world.stream_versions[stream_id] = world.stream_versions.get(stream_id, 0) + 1
        world.absent.discard(stream_id)
    for indexer in indexers_for(cls, every=True):
        indexer(world, event, previous, state)


def folds(records: Iterable[Recorded], *, every: bool) -> list[bytes]:
    """The world after each record, as snapshot bytes (``every``: the slow path, every
    indexer called and the task indexes kept by ``index_task``, not inlined)."""
    world, out = World(), []
    table = world_fold._DISPATCH
    world_fold._DISPATCH = _EveryIndexer() if every else table  # type: ignore[assignment]
    try:
        for record in records:
            if every:
                _reference_step(world, record.event)
            else:
                world.apply_stored(record.position, record.event, record.originator_version)
            out.append(encode_world(world))
    finally:
        world_fold._DISPATCH = table
    return out


def assert_dispatch_is_every_indexer(location: str | list[Recorded]) -> None:
    if isinstance(location, list):
        records = location
    else:
        with open_store(location, read_only=True) as store:
            records = list(store.read())
    assert records
    fast, slow = folds(records, every=False), folds(records, every=True)
    for record, dispatched, called_all in zip(records, fast, slow, strict=True):
        assert dispatched == called_all, (record.position, type(record.event).__name__)


def test_every_indexer_declares_the_events_it_reacts_to() -> None:
    assert INDEXERS and STREAM_INDEXERS
    for indexer in [*INDEXERS, *STREAM_INDEXERS]:
        assert REACTS.get(indexer), indexer.__name__


@pytest.mark.parametrize("tasks", [30, 60])
def test_a_demo_log_folds_the_same_as_with_every_indexer(tmp_path: Path, tasks: int) -> None:
    path = tmp_path / "demo.db"
    run_demo(path, tasks, log=lambda line: None)
    assert_dispatch_is_every_indexer(str(path))


def test_a_schedule_set_before_its_task_was_submitted_folds_the_same() -> None:
    # No command writes this order (a schedule needs a live task), but a log may hold
    # it: the index follows the task's submission.
    events = [
        ScheduleSet(task_id="t1", at=1.0, run_at=50.0),
        TaskSubmitted(task_id="t1", at=2.0, kind="a", version=1, phase="a"),
        TaskReserved(task_id="t1", at=3.0, mode="run", worker="w"),
        TaskEnded(task_id="t1", at=4.0, status="completed"),
    ]
    versions: dict[str, int] = {}
    records = []
    for position, event in enumerate(events, 1):
        stream = event.stream_id()
        versions[stream] = versions.get(stream, 0) + 1
        records.append(Recorded(position, event, versions[stream]))
    assert_dispatch_is_every_indexer(records)


extras = st.lists(
    st.tuples(
        st.sampled_from(["schedule", "unschedule", "stop", "settle", "fail_cleanup"]),
        st.integers(0, 4),
        st.sampled_from(["leader", "worker"]),
    ),
    max_size=12,
)
"""Commands the harness does not generate: schedules and runtime cleanups."""


@settings(max_examples=examples(10, 100), deadline=None)
@given(steps=command_sequences(min_size=5, max_size=40), more=extras)
def test_a_random_log_folds_the_same_as_with_every_indexer(
    steps: list[Any], more: list[tuple[str, int, str]]
) -> None:
    with Harness.temporary() as harness:
        # The extra commands land spread over the log, between chunks of the steps.
        size = len(steps) // (len(more) + 1) + 1
        chunks = [steps[at : at + size] for at in range(0, len(steps), size)]
        for chunk, extra in itertools.zip_longest(chunks, more):
            harness.run(chunk or [])
            if extra is not None:
                _extra(harness, *extra)
        assert_dispatch_is_every_indexer(harness.location)


def _extra(harness: Harness, name: str, slot: int, role: str) -> None:
    s = harness.scheduler
    if not harness.ids:
        return
    task_id = harness.ids[slot % len(harness.ids)]
    try:
        if name == "schedule":
            s.schedule_run(task_id, s.now() + 60_000)
        elif name == "unschedule":
            s.schedule_run(task_id, None)
        elif name == "stop":
            s.stop_roles(task_id, [role])
        else:
            s.settle_cleanup(task_id, role, error="boom" if name == "fail_cleanup" else None)
    except Refused:
        pass
