"""Issue 17, item 4: every stored field is type-checked as it is read, and every
store holds the same limits, checked before anything is written.

A field of the wrong JSON type is a :class:`CorruptEvent` naming the event's
position, from a store and from an export alike, instead of a bare ``TypeError``
in some later fold. A NUL, a lone surrogate or an over-long id, kind, phase, memo
name or reason is an :class:`InvalidArgument` on SQLite and PostgreSQL alike, and
nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from eventsourcing.persistence import StoredEvent

from tasktrail.domain import (
    CorruptEvent,
    InvalidArgument,
    ManualClock,
    Registry,
    Scheduler,
    TaskDefinition,
    open_store,
)
from tasktrail.domain.store.transcoder import decode_event
from tasktrail.domain.tasks.events import EVENT_TYPES
from tasktrail.domain.tasks.fields import MAX_NAME_BYTES, MAX_TEXT_BYTES
from tasktrail.replay import LogError, replay

GOOD = {
    "tasktrail.TaskSubmitted": {"at": 1, "kind": "k", "version": 1, "phase": "p"},
    "tasktrail.WaitStarted": {"at": 1, "on": ["a"], "policy": "all", "phase": "p"},
    "tasktrail.SleepStarted": {"at": 1, "until": 5, "phase": "p"},
    "tasktrail.TaskEnded": {"at": 1, "status": "completed"},
    "tasktrail.TaskReserved": {"at": 1, "mode": "run"},
    "tasktrail.MemoRecorded": {"at": 1, "name": "n", "value": {"any": ["json"]}},
}
WRONG: list[tuple[str, str, Any]] = [
    ("tasktrail.WaitStarted", "on", 42),
    ("tasktrail.WaitStarted", "on", [1, 2]),
    ("tasktrail.WaitStarted", "policy", "some"),
    ("tasktrail.TaskSubmitted", "kind", ["batch"]),
    ("tasktrail.TaskSubmitted", "version", "1"),
    ("tasktrail.TaskSubmitted", "version", True),
    ("tasktrail.TaskSubmitted", "owner_id", 7),
    ("tasktrail.TaskSubmitted", "trace", {"traceparent": 1}),
    ("tasktrail.TaskSubmitted", "abandon_on_restart", 1),
    ("tasktrail.SleepStarted", "until", "soon"),
    ("tasktrail.SleepStarted", "at", "yesterday"),
    ("tasktrail.SleepStarted", "at", None),
    ("tasktrail.TaskEnded", "status", "won"),
    ("tasktrail.TaskEnded", "message", {"text": "x"}),
    ("tasktrail.TaskReserved", "mode", None),
    ("tasktrail.TaskReserved", "rule", "9"),
    # No read model's SQLite column holds an integer beyond 64 signed bits.
    ("tasktrail.TaskReserved", "rule", 2**63),
    ("tasktrail.SleepStarted", "until", 2**64 - 1),
    ("tasktrail.MemoRecorded", "name", None),
]


@pytest.mark.parametrize("topic,field,value", WRONG, ids=[f"{t[10:]}.{f}" for t, f, _ in WRONG])
def test_a_stored_field_of_the_wrong_type_is_a_corrupt_event_with_its_position(
    topic: str, field: str, value: Any
) -> None:
    good = GOOD[topic]
    decode_event(topic, "t", orjson.dumps(good), 7)  # the good payload reads
    payload = {**good, field: value}
    with pytest.raises(CorruptEvent) as caught:
        decode_event(topic, "t", orjson.dumps(payload), 7)
    assert caught.value.position == 7
    assert f".{field} must be" in str(caught.value) and "position 7" in str(caught.value)


def test_every_event_class_checks_every_field_it_stores() -> None:
    """Each field of each registered event (but ``Any`` ones: memo values, error
    details) has a check, and the check refuses a value no annotation allows."""
    import typing
    from dataclasses import fields

    from tasktrail.domain.tasks.fields import field_check

    class Odd:
        pass

    for cls in EVENT_TYPES.values():
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            expression, expected, names = field_check(hints[f.name])
            if hints[f.name] is Any:
                assert expression is None
                continue
            assert expression is not None, (cls.__name__, f.name)
            assert not eval(expression, {**names, "v": Odd()}), (cls.__name__, f.name)
            assert expected


def test_a_wrong_type_in_a_store_and_in_an_export_names_the_position(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    s = Scheduler.open(path, clock=ManualClock(1_000))
    task = s.submit("job", phase="a")
    s.store.app.recorder.insert_events(
        [
            StoredEvent(
                task, 2, "tasktrail.WaitStarted", b'{"at":1000,"on":42,"policy":"all","phase":"a"}'
            )
        ]
    )
    s.store.close()
    with pytest.raises(
        CorruptEvent, match=r"event at position 2: .*WaitStarted\.on must be a list"
    ):
        replay(path)
    export = tmp_path / "s.jsonl"
    export.write_bytes(
        b'{"position":1,"topic":"tasktrail.TaskSubmitted","originator_id":"t","originator_version":1,'
        b'"at":1,"payload":{"at":1,"kind":"k","version":1,"phase":"p"}}\n'
        b'{"position":2,"topic":"tasktrail.SleepStarted","originator_id":"t","originator_version":2,'
        b'"at":1,"payload":{"at":1,"until":"soon","phase":"p"}}\n'
    )
    with pytest.raises(LogError, match=r"s\.jsonl:2: .*SleepStarted\.until must be a number"):
        replay(export)


def _registry() -> Registry:
    return Registry([TaskDefinition("job", 1, {"a": lambda inv: None})])


BAD_NAMES = {
    "a NUL": "a\x00b",
    "a lone surrogate": "a\udcffb",
    "too long": "x" * (MAX_NAME_BYTES + 1),
    "too long in UTF-8": "é" * (MAX_NAME_BYTES // 2 + 1),
}


@pytest.mark.parametrize("bad", list(BAD_NAMES))
def test_names_are_held_to_the_same_limits_on_every_store(bad: str, store_url: str) -> None:
    text = BAD_NAMES[bad]
    s = Scheduler.open(store_url, clock=ManualClock(1_000), registry=_registry())
    task = s.submit("job")
    s.reserve(task)
    head = s.store.head()
    refused = {
        "task id": lambda: s.submit("job", id=text),
        "kind": lambda: s.submit(text, phase="a"),
        "phase": lambda: s.checkpoint(task, text),
        "memo name": lambda: s.memo(task, text, 1),
        "role": lambda: s.start_turn(task, text),
    }
    for what, command in refused.items():
        with pytest.raises(InvalidArgument) as caught:
            command()
        words = str(caught.value)
        reasons = ("limit", "NUL", "surrogate", "must be a non-empty name")
        assert any(reason in words for reason in reasons), (what, words)
    assert s.store.head() == head  # nothing written
    s.close()


@pytest.mark.parametrize("bad", ["a NUL", "a lone surrogate", "too long"])
def test_reasons_are_held_to_the_same_limits_on_every_store(bad: str, store_url: str) -> None:
    text = {
        "a NUL": "aborted\x00",
        "a lone surrogate": "abort \udcff",
        "too long": "r" * (MAX_TEXT_BYTES + 1),
    }[bad]
    s = Scheduler.open(store_url, clock=ManualClock(1_000), registry=_registry())
    task = s.submit("job")
    s.reserve(task)
    head = s.store.head()
    with pytest.raises(InvalidArgument) as caught:
        s.finish(task, "aborted", reason=text)
    assert task in str(caught.value)
    with pytest.raises(InvalidArgument):
        s.request_wakeup(task, text)
    with open_store(store_url) as store:  # as another reader sees it
        assert store.head() == head
    s.close()


def test_the_longest_names_are_recorded_on_every_store(store_url: str) -> None:
    """At the limit, both stores take it (PostgreSQL's index as SQLite's table)."""
    name = "n" * MAX_NAME_BYTES
    s = Scheduler.open(store_url, clock=ManualClock(1_000), registry=_registry())
    task = s.submit("job", id=name)
    s.reserve(task)
    s.memo(task, name, 1)
    s.finish(task, "failed", error={"message": "m" * 1000}, reason="r" * MAX_TEXT_BYTES)
    s.close()
    state = replay(store_url)
    assert state.tasks[name].status == "terminal"
