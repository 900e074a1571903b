"""The command path's shortcuts read what the long way reads.

* A refresh of a SQLite store reads nothing while no other connection committed since
  it last read to the end of the log (``data_version``): every read still returns
  exactly the rows a fresh ``SELECT`` returns, whoever appended them.
* A controller pass's new stream (a random id) is not looked up in the store.
* A world folded from position 0 and never compacted holds every stream of the log: a
  new id costs no read (in a batch's view too); once compacted, what it dropped is read
  back, and a world opened from a snapshot reads back what the snapshot left out.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition, UnknownTask
from tasktrail.domain.store.store import Store, open_store


def _registry() -> Registry:
    return Registry([TaskDefinition("job", 1, {"go": lambda t: None})])


def _fresh_rows(path: Path, after: int) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
            "WHERE rowid > ? ORDER BY rowid",
            (after,),
        ).fetchall()
    return [tuple(row) for row in rows]


def _rows(store: Store, after: int) -> list[tuple[object, ...]]:
    return [tuple(row) for row in store.rows(after)]


def test_every_read_returns_what_a_fresh_select_does(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    clock = ManualClock(1_000)
    first = Scheduler.open(path, clock=clock, registry=_registry(), durability="normal")
    second = Scheduler.open(path, clock=clock, registry=_registry(), durability="normal")
    try:
        for n in range(6):
            writer, reader = (first, second) if n % 2 else (second, first)
            task = writer.submit("job", id=f"t{n}")
            # The reader's log: the writer's new rows, then nothing past the end.
            for scheduler in (reader, writer):
                for after in range(max(0, scheduler.position - 3), scheduler.position + 2):
                    assert _rows(scheduler.store, after) == _fresh_rows(path, after)
            assert reader.task(task).events == 1  # the refresh folded it in
            reader.reserve(task)
            assert writer.task(task).status == "running"
            assert _rows(writer.store, writer.position) == _fresh_rows(path, writer.position)
            clock.advance(1)
        # A third connection, with nothing of tasktrail's, appends a copy of a row.
        with sqlite3.connect(path) as conn:
            conn.execute(
                "INSERT INTO stored_events SELECT originator_id, originator_version + 100, "
                "topic, state FROM stored_events WHERE rowid = 1"
            )
        head = _fresh_rows(path, 0)[-1][0]
        for scheduler in (first, second):
            assert _rows(scheduler.store, head - 1) == _fresh_rows(path, head - 1)
            assert _rows(scheduler.store, head) == []
        with sqlite3.connect(path) as conn:  # gone again before a refresh folds it
            conn.execute("DELETE FROM stored_events WHERE rowid = ?", (head,))
        for scheduler in (first, second):
            assert _rows(scheduler.store, head - 1) == _fresh_rows(path, head - 1)
    finally:
        first.close()
        second.close()


def test_a_pass_does_not_look_its_new_stream_up(tmp_path: Path) -> None:
    scheduler = Scheduler.open(tmp_path / "pass.db", clock=ManualClock(0), registry=_registry())
    try:
        looked: list[str] = []
        loader = scheduler.world.loader
        assert loader is not None

        def spy(stream_id: str, task_stream: bool, until: int | None) -> object:
            looked.append(stream_id)
            return loader(stream_id, task_stream, until)

        scheduler.world.loader = spy  # type: ignore[assignment]
        report = scheduler.controller_pass()
        assert not [s for s in looked if s.startswith("pass:")]
        assert scheduler.world.stream(f"pass:{report.pass_id}") is not None
        assert [e.pass_id for e in scheduler.store.stream(f"pass:{report.pass_id}")] == [
            report.pass_id,
            report.pass_id,
        ]
    finally:
        scheduler.close()


def _spied(scheduler: Scheduler, looked: list[str]) -> None:
    loader = scheduler.world.loader
    assert loader is not None

    def spy(stream_id: str, task_stream: bool, until: int | None) -> object:
        looked.append(stream_id)
        return loader(stream_id, task_stream, until)

    scheduler.world.loader = spy  # type: ignore[assignment]


def test_a_world_folded_from_the_start_reads_nothing_back_until_compacted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "whole.db"
    s = Scheduler.open(path, clock=ManualClock(0), registry=_registry())
    looked: list[str] = []
    try:
        _spied(s, looked)
        ended = s.submit("job", id="ended")
        s.reserve(ended)
        s.finish(ended, "completed")
        s.submit("job", id="given", key="k1")
        with s.batch():  # the batch's view is a copy of a whole world: whole too
            s.submit("job", id="in-batch")
        with pytest.raises(UnknownTask):
            s.task("never-submitted")
        assert looked == []
        s.snapshot()  # compacts: the ended task is dropped from memory
        assert "ended" not in s.world.tasks
        assert s.task("ended").status == "terminal"  # read back
        assert looked == ["ended"]
    finally:
        s.close()
    reopened = Scheduler.open(path, clock=ManualClock(0), registry=_registry())
    try:  # from the close's snapshot: what it left out is read back
        assert reopened.task("ended").status == "terminal"
        with pytest.raises(UnknownTask):
            reopened.task("never-submitted")
    finally:
        reopened.close()


def test_no_global_provider_is_what_opentelemetry_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import metrics, trace

    from tasktrail.domain.telemetry import providers

    def agrees() -> None:  # "no provider" only where the getters give none (else: ask them)
        assert providers.no_global(0) <= isinstance(
            trace.get_tracer_provider(), providers.NO_TRACER
        )
        assert providers.no_global(1) <= isinstance(
            metrics.get_meter_provider(), providers.NO_METER
        )

    assert providers.no_global(0) and providers.no_global(1)  # the test run configures none
    agrees()
    for name in ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER"):
        with monkeypatch.context() as patch:
            patch.setenv(name, "named")  # the getters would load it: not "no provider"
            which = 0 if "TRACER" in name else 1
            assert not providers.no_global(which) and providers.no_global(1 - which)
    provider = object()  # a provider of the application's
    with monkeypatch.context() as patch:
        patch.setattr(trace, "_TRACER_PROVIDER", provider)  # as set_tracer_provider does
        assert not providers.no_global(0)
        agrees()


def test_every_demo_event_encodes_to_the_bytes_of_its_fields(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    import orjson

    from tasktrail.domain.demo.workload import run_demo
    from tasktrail.domain.store.transcoder import _checked_encode, encode_event
    from tasktrail.domain.tasks.events import TaskSubmitted

    path = tmp_path / "demo.db"
    run_demo(path, 30, log=lambda line: None)
    when = datetime(2026, 1, 5, tzinfo=UTC)
    with open_store(path, read_only=True) as store:
        events = [recorded.event for recorded in store.read()]
    assert len({type(e) for e in events}) > 10
    for event in events:
        assert encode_event(event, when) == _checked_encode(event, when)
        assert orjson.loads(encode_event(event, when))["timestamp"] == when.isoformat()
    # A class given another version records it, as the general encoder does.
    submitted = next(e for e in events if type(e) is TaskSubmitted)
    for version in (1, 7):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(TaskSubmitted, "class_version", version)
            encoded = encode_event(submitted, when)
            assert encoded == _checked_encode(submitted, when)
            assert orjson.loads(encoded).get("class_version") == (version if version > 1 else None)


BAD_TEXT = ["a\x00b", "\ud800", "é" * 200, "x" * 300, "y" * 70_000, "ok", "é"]
BAD_NUMBERS = [float("nan"), float("inf"), -float("inf"), 1.5, 2**64, -(2**64), True, None, "7"]


def test_the_quick_limit_check_says_what_the_long_one_says(tmp_path: Path) -> None:
    """An append checks every event with a generated check (:func:`.fields.fitting`)
    before the long way: for every demo event, and each of its fields given a value at
    or past a limit, ``event_problem`` says what the long way alone says."""
    import dataclasses

    from tasktrail.domain.demo.workload import run_demo
    from tasktrail.domain.tasks import fields
    from tasktrail.domain.tasks.events import _NUMBER_FIELDS, _TEXT_FIELDS, event_problem

    path = tmp_path / "demo.db"
    run_demo(path, 30, log=lambda line: None)
    with open_store(path, read_only=True) as store:
        events = [recorded.event for recorded in store.read()]
    samples = {}
    for event in events:
        samples.setdefault(type(event), []).append(event)
    checked = 0
    for cls, found in samples.items():
        variants = list(found[:5])
        for name in _TEXT_FIELDS[cls]:
            for bad in [*BAD_TEXT, ("ok", "a\x00"), ("é",), 3, {"k": "a\x00"}, {"k": "v"}]:
                variants.append(dataclasses.replace(found[0], **{name: bad}))
        for name, _, _ in _NUMBER_FIELDS[cls]:
            for bad in BAD_NUMBERS:
                variants.append(dataclasses.replace(found[0], **{name: bad}))
        for variant in variants:
            quick = event_problem(variant)
            with pytest.MonkeyPatch.context() as patch:
                patch.setitem(fields._FITS, cls, lambda event: False)  # the long way only
                assert quick == event_problem(variant), (cls.__name__, variant)
            checked += 1
    assert len(samples) > 10 and checked > 500
