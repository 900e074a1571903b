"""Issue 15: the fast readers of a log (``domain/store/wire.py``) read what the checked
path reads, from a store's rows (``Store.read``) and from a JSONL export's lines
(``LogReader``), or leave the row to it.

For every topic of the demo log and every stored field, values of other JSON types,
integers beyond 64 bits, text that is not UTF-8, unknown and repeated keys: a fast
reader either builds the very record the checked path builds (the same class, equal,
the same bytes once encoded again) or answers ``None``, and then the checked path
builds it or says what is wrong, as it always did.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from tasktrail.domain import CorruptEvent, TasktrailError, open_store
from tasktrail.domain.demo.workload import run_demo
from tasktrail.domain.store.recorded import Recorded
from tasktrail.domain.store.transcoder import decode_checked, encode_event
from tasktrail.domain.store.wire import ROW_READERS, line_reader
from tasktrail.replay import export
from tasktrail.replay.log import LogError, LogReader, _parse_line

WHEN = datetime(2026, 1, 5, tzinfo=UTC)
Row = tuple[int, str, int, str, bytes]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A demo log (tasks, Turns, wakeups, runs, passes) and its JSONL export."""
    folder = tmp_path_factory.mktemp("demo")
    run_demo(folder / "demo.db", 30, log=lambda line: None)
    export(folder / "demo.db", folder / "demo.jsonl")
    return folder / "demo.db", folder / "demo.jsonl"


@pytest.fixture(scope="module")
def rows(demo: tuple[Path, Path]) -> list[Row]:
    with sqlite3.connect(demo[0]) as conn:
        return conn.execute(
            "SELECT rowid, originator_id, originator_version, topic, state "
            "FROM stored_events ORDER BY rowid"
        ).fetchall()


def same(fast: Recorded, checked: Recorded) -> None:
    """``fast`` is what the checked path built, to the class and the stored byte."""
    assert fast == checked and type(fast.event) is type(checked.event)
    assert encode_event(fast.event, WHEN) == encode_event(checked.event, WHEN)
    for f in dataclasses.fields(fast.event):
        assert type(getattr(fast.event, f.name)) is type(getattr(checked.event, f.name))


def outcome(read: Callable[[], Recorded]) -> Recorded | str:
    try:
        return read()
    except (TasktrailError, CorruptEvent) as error:
        return f"{type(error).__name__}: {error}"


def row_outcomes(position: int, stream: Any, version: Any, topic: Any, state: Any) -> None:
    """The fast reader of a row: the checked path's record, or ``None``."""
    reader = ROW_READERS[topic]
    fast = reader(position, stream, version, state) if reader is not None else None
    checked = outcome(
        lambda: Recorded(position, decode_checked(topic, stream, state, position), version)
    )
    if fast is not None:
        assert not isinstance(checked, str), (fast, checked)
        same(fast, checked)


def line_outcomes(raw: bytes) -> None:
    """The fast reader of a line: the checked path's record, or ``None``."""
    fast = line_reader()(raw)
    checked = outcome(lambda: _parse_line(raw, 1, "log.jsonl", False)[0])
    if fast is not None:
        assert not isinstance(checked, str), (raw, fast, checked)
        same(fast, checked)


def test_every_row_and_line_reads_fast_as_the_checked_path_reads_it(
    demo: tuple[Path, Path], rows: list[Row]
) -> None:
    for position, stream, version, topic, state in rows:
        reader = ROW_READERS[topic]
        assert reader is not None, topic  # every class of the demo has a fast reader
        fast = reader(position, stream, version, state)
        assert fast is not None, topic
        same(fast, Recorded(position, decode_checked(topic, stream, state, position), version))
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.event.at = 0  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.position = 0  # type: ignore[misc]
    lines = demo[1].read_bytes().splitlines(keepends=True)
    for number, raw in enumerate(lines[:-2], start=1):  # the last lines: heads, seal
        fast = line_reader()(raw)
        assert fast is not None, raw
        same(fast, _parse_line(raw, number, "demo.jsonl", False)[0])
    assert line_reader()(lines[-1]) is None and line_reader()(lines[-2]) is None
    with open_store(demo[0], read_only=True) as store:
        from_store = list(store.read())
    from_lines = list(LogReader(demo[1]))
    assert len(from_store) == len(rows) == len(from_lines)
    for a, b in zip(from_store, from_lines, strict=True):
        same(a, b)


WRONG = [b'{"not":["a"]}', b'"text"', b"1.5", b"[1]", b"true", b"null", b"-0", b"1e400"]
WRONG += [b"18446744073709551615", b"18446744073709551616", b"9223372036854775808"]
WRONG += [b"-9223372036854775809", b"[18446744073709551616]", b'{"a":1e2}', b'"\xff"']
WRONG += [b'"\\ud800"', b"1767603600000", b'"\\u00e9"', b"2"]


def mutations(state: bytes) -> Iterator[bytes]:
    """``state`` with each field set to each of :data:`WRONG`, an unknown field, a
    repeated one, and the stored-only keys of other types."""
    payload = orjson.loads(state)
    for name in [*payload, "class_version", "unknown"]:
        for value in WRONG:
            yield orjson.dumps({**payload, name: "@@"}).replace(b'"@@"', value)
    for name in payload:
        yield state[:-1] + b',"' + name.encode() + b'":' + orjson.dumps(payload[name]) + b"}"
        yield state[:-1] + b',"' + name.encode() + b'":"other"}'


def test_a_row_the_fast_reader_is_unsure_of_is_read_the_checked_way(rows: list[Row]) -> None:
    firsts: dict[str, Row] = {}
    for row in rows:
        firsts.setdefault(row[3], row)
    for position, stream, version, topic, state in firsts.values():
        for bad in mutations(state):
            row_outcomes(position, stream, version, topic, bad)
        for column in (b"x", 1, None, 1.5, True, 0, -1):
            row_outcomes(position, column, version, topic, state)
            row_outcomes(position, stream, column, topic, state)
            row_outcomes(position, stream, version, column, state)
            row_outcomes(position, stream, version, topic, column)
        row_outcomes(position, stream, version, topic, state.decode())  # TEXT, as SQLite may


def test_a_line_the_fast_reader_is_unsure_of_is_read_the_checked_way(
    demo: tuple[Path, Path],
) -> None:
    firsts: dict[str, bytes] = {}
    for raw in demo[1].read_bytes().splitlines(keepends=True)[:-2]:  # not heads, seal
        firsts.setdefault(orjson.loads(raw)["topic"], raw)
    for raw in firsts.values():
        line = orjson.loads(raw)
        for bad in mutations(orjson.dumps(line["payload"])):
            line_outcomes(raw.replace(orjson.dumps(line["payload"]), bad))
        for name in [*line, "unknown"]:
            for value in WRONG:
                line_outcomes(orjson.dumps({**line, name: "@@"}).replace(b'"@@"', value) + b"\n")
        repeated = orjson.dumps(line)[:-1] + b',"topic":"tasktrail.TaskStopped"}\n'
        line_outcomes(repeated)
        line_outcomes(orjson.dumps(line)[:-1] + b',"topic":' + orjson.dumps(line["topic"]) + b"}\n")
        line_outcomes(b"  " + raw.replace(b",", b" , "))  # spaces: still the same line
        line_outcomes(orjson.dumps({k: line[k] for k in reversed(line)}) + b"\n")


def test_an_older_event_in_an_export_is_upcast_and_bad_lines_are_still_named(
    demo: tuple[Path, Path], tmp_path: Path
) -> None:
    lines = demo[1].read_bytes().splitlines(keepends=True)
    line = orjson.loads(next(raw for raw in lines if b"tasktrail.TaskSubmitted" in raw))
    del line["payload"]["class_version"], line["payload"]["priority"]  # as the first release
    old = orjson.dumps(line) + b"\n"
    assert line_reader()(old) is None
    path = tmp_path / "old.jsonl"
    path.write_bytes(old)
    (recorded,) = list(LogReader(path))
    assert recorded.event.priority == 0  # type: ignore[attr-defined]
    bad = old.replace(b'"kind":', b'"kind":4,"unknown":"\xff","k":')
    path.write_bytes(lines[0] + bad + lines[1])
    with pytest.raises(LogError) as error:
        list(LogReader(path))
    assert error.value.line == 2 and "not JSON" in str(error.value)
    path.write_bytes(lines[1] + lines[0])
    with pytest.raises(LogError, match="out of order"):
        list(LogReader(path))
    path.write_bytes(lines[0] + lines[1].rstrip(b"\n"))
    with pytest.raises(LogError, match="truncated"):
        list(LogReader(path))
    reader = LogReader(path, skip_invalid=True)
    assert len(list(reader)) == 1 and [s.line for s in reader.skipped] == [2]
