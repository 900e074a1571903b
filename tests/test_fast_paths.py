"""Issue 15: the fast paths build exactly what the checked ones build.

* ``domain/tasks/copies.py``: the generated copy of a frozen state is
  ``dataclasses.replace``'s copy (a class with a ``__post_init__`` keeps it).
* ``domain/store/wire.py``: a stored row decoded by msgspec is the event the checked
  path decodes, to the byte once encoded again (an ``at`` of ``1`` stays an int); a
  stored field of the wrong JSON type in any event (Turns, wakeups, runs, passes too)
  is a :class:`CorruptEvent` naming the row's position, never a bare ``TypeError``.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from tasktrail.domain import CorruptEvent
from tasktrail.domain.demo.workload import run_demo
from tasktrail.domain.runs.state import RunState
from tasktrail.domain.store.transcoder import decode_event, decode_payload, encode_event
from tasktrail.domain.store.wire import fast_decode
from tasktrail.domain.tasks.copies import copier, copyable, maker, replace
from tasktrail.domain.tasks.events import TaskSubmitted
from tasktrail.domain.tasks.evolve import evolve
from tasktrail.domain.tasks.state import Checkpoint, TaskState
from tasktrail.domain.turns.state import RoleState, TurnState, WakeupState
from tasktrail.replay import replay

WHEN = datetime(2026, 1, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo log: tasks, Turns, wakeups, runs and passes."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    run_demo(path, 30, log=lambda line: None)
    return path


@pytest.fixture(scope="module")
def demo_rows(demo_store: Path) -> list[tuple[int, str, str, bytes]]:
    """The rows of the demo log."""
    with sqlite3.connect(demo_store) as conn:
        rows = conn.execute(
            "SELECT rowid, originator_id, topic, state FROM stored_events ORDER BY rowid"
        ).fetchall()
    return [tuple(row) for row in rows]  # type: ignore[misc]


def test_the_copies_of_every_state_are_dataclasses_replace(demo_store: Path) -> None:
    state = replay(demo_store, snapshots=False)
    tasks = list(state.held.tasks.values())
    assert tasks
    for task in tasks:
        for changes in ({}, {"events": 9}, {"updated_at": 5.0, "status": "terminal"}):
            ours, theirs = replace(task, **changes), dataclasses.replace(task, **changes)
            assert ours == theirs and ours is not task
            assert [type(getattr(ours, f.name)) for f in dataclasses.fields(ours)] == [
                type(getattr(theirs, f.name)) for f in dataclasses.fields(theirs)
            ]
    for cls in (TaskState, TurnState, RoleState, WakeupState, RunState):
        assert copyable(cls), cls
    with pytest.raises(TypeError):
        replace(tasks[0], no_such_field=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        replace(tasks[0]).events = 1  # type: ignore[misc]


def test_a_copy_is_of_the_state_class_itself_and_a_new_task_is_its_constructors() -> None:
    # The copier fills a twin of the class's slot layout, then makes it a ``cls``.
    task = evolve(None, TaskSubmitted(task_id="t1", at=1.0, kind="a", version=2, phase="p"))
    assert type(task) is TaskState and type(replace(task, events=3)) is TaskState
    made = TaskState(
        id="t1", kind="a", version=2, status="pending", checkpoint=Checkpoint("p"),
        submitted_at=1.0, updated_at=1.0, events=1,
    )  # fmt: skip
    assert task == made and repr(task) == repr(made)
    for name in TaskState.__slots__:
        assert type(getattr(task, name)) is type(getattr(made, name)), name
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.events = 2  # type: ignore[misc]
    # A class whose slots are not its fields' own is filled through its descriptors.

    @dataclasses.dataclass(frozen=True, slots=True)
    class Base:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived(Base):
        b: int = 0

    assert copyable(Derived) and replace(Derived(1, 2), b=3) == Derived(1, 3)


def test_every_state_a_demo_fold_holds_is_made_and_stamped_as_its_class_does(
    demo_store: Path,
) -> None:
    world = replay(demo_store, snapshots=False).held
    states: list[Any] = [*world.tasks.values(), *world.streams.values()]
    states += [role for task in world.tasks.values() for role in task.roles.values()]
    states += [role.last for role in states if isinstance(role, RoleState) and role.last]
    kinds = set()
    for state in states:
        cls = type(state)
        if not copyable(cls):
            continue
        kinds.add(cls.__name__)
        every = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
        made = maker(cls)(**every)
        assert made == cls(**every) and type(made) is cls
        required = {f.name: every[f.name] for f in dataclasses.fields(state) if _required(f)}
        assert maker(cls)(**required) == cls(**required)
        if "events" in every and "updated_at" in every:
            event = TaskSubmitted(task_id="t", at=7.5, kind="a", version=1, phase="p")
            stamped = copier(cls, stamped=True)(state, event)
            assert stamped == dataclasses.replace(state, updated_at=7.5, events=state.events + 1)
            assert copier(cls, stamped=True)(state, event, events=2).events == 2
            # A copier of fixed changes: exactly those, each required.
            some = tuple(name for name in every if name not in ("updated_at", "events"))[:3]
            fixed = copier(cls, stamped=True, changing=some)
            changes = {name: every[name] for name in reversed(some)}
            assert fixed(state, event, **changes) == dataclasses.replace(
                state, updated_at=7.5, events=state.events + 1, **changes
            )
            with pytest.raises(TypeError):
                fixed(state, event, **dict(list(changes.items())[1:]))
            assert copier(cls, changing=some)(state, **changes) == state
    with pytest.raises(TypeError):
        copier(TaskState, changing=("no_such_field",))
    assert {"TaskState", "RoleState", "TurnState", "RunState", "PassState"} <= kinds


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def test_a_class_that_validates_is_copied_by_its_init() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("n < 0")

    assert not copyable(Checked) and copier(Checked) is dataclasses.replace
    assert replace(Checked(1), n=2) == Checked(2)
    with pytest.raises(ValueError):
        replace(Checked(1), n=-1)


def test_every_demo_row_decodes_fast_to_what_the_checked_path_builds(
    demo_rows: list[tuple[int, str, str, bytes]],
) -> None:
    topics = set()
    for position, stream, topic, state in demo_rows:
        fast = fast_decode(topic, stream, state)
        assert fast is not None, topic  # every class of the demo has a fast decoder
        checked = decode_payload(topic, stream, orjson.loads(state), position)
        assert fast == checked and type(fast) is type(checked)
        assert encode_event(fast, WHEN) == encode_event(checked, WHEN)
        assert decode_event(topic, stream, state, position) == checked
        topics.add(topic)
    for kind in ("TurnDelivered", "WakeupDispatched", "RunDone", "PassFinished", "WaitStarted"):
        assert f"tasktrail.{kind}" in topics


def test_an_int_time_stays_an_int() -> None:
    state = orjson.dumps({"at": 1, "kind": "k", "version": 1, "phase": "p", "class_version": 2})
    event = decode_event("tasktrail.TaskSubmitted", "t", state, 1)
    assert type(event.at) is int and event.at == 1


WRONG_VALUES: list[Any] = [{"not": ["a", "field", "value"]}, "text", 1.5, [1]]


def test_a_wrong_json_type_in_any_stored_field_is_a_corrupt_event(
    demo_rows: list[tuple[int, str, str, bytes]],
) -> None:
    """Every field of the first row of each topic, set to values of other JSON types:
    either the event still reads (a field that takes any JSON value, or text where
    text is taken) or it is a CorruptEvent at that row's position."""
    firsts: dict[str, tuple[int, str, str, bytes]] = {}
    for row in demo_rows:
        firsts.setdefault(row[2], row)
    refused = 0
    for position, stream, topic, state in firsts.values():
        payload = orjson.loads(state)
        for name in payload:
            if name in ("timestamp", "class_version", "digest"):
                continue
            for value in WRONG_VALUES:
                if type(value) is type(payload[name]):
                    continue
                bad = orjson.dumps({**payload, name: value})
                try:
                    decode_event(topic, stream, bad, position)
                except CorruptEvent as error:
                    assert error.position == position and f"position {position}" in str(error)
                    refused += 1
    assert refused > 50
