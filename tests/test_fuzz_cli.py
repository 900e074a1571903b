"""Issue 17: every read command, fed random and mutated logs, answers with an exit code
of the contract and no traceback, and leaves every file as it was.

Two generators, each from a real log (the demo's, every event type in it):

- **JSONL exports**, mutated line by line (lines removed, repeated, swapped or
  truncated; bytes flipped; a field of the line or of the stored payload replaced
  by a value of another JSON type, a huge or hostile string, a number out of
  range) or replaced by random bytes altogether;
- **SQLite stores**, mutated row by row through SQL (a payload's field replaced,
  the state made non-JSON, non-UTF-8 or NULL, a topic, stream id or version
  changed, rows deleted or copied, the marker edited) or byte by byte in the file.

Each is fed to ``replay``, ``verify``, ``explain``, ``diff`` and ``trace`` (and for
stores ``tasks``, ``history``, ``export`` and ``project`` too): the exit code is 0,
1 or 2, stderr holds no traceback and no "internal error", and the input's folder
is byte-identical afterwards. ``TRIED`` counts what was tried (printed at the end;
docs/reliability.md has the figures).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import examples
from helpers.cli import folder_state, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasktrail.domain.demo.workload import MIN_TASKS, run_demo
from tasktrail.replay import export

TRIED: Counter[str] = Counter()
EXIT_CODES = {0, 1, 2}
ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2**63,
    1e308,
    -1e308,
    0.5,
    "",
    "x",
    "\x00",
    "\x1b[2J\r\nforged",
    "\udcff".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    "y" * 70_000,
    [],
    [1, "a", None],
    {},
    {"a": {"b": [1]}},
    "2026-01-05T09:00:00Z",
    "tasktrail.TaskEnded",
]
FUZZ = settings(
    # 40 each by default; the long profile's count (500) when it is loaded.
    max_examples=examples(20, 500),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    print(f"\nfuzzed inputs tried: {sum(TRIED.values())} {dict(sorted(TRIED.items()))}")


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo's store and its export."""
    folder = tmp_path_factory.mktemp("seed")
    run_demo(folder / "seed.db", MIN_TASKS, log=lambda _: None)
    export(folder / "seed.db", folder / "seed.jsonl")
    return folder / "seed.db", folder / "seed.jsonl"


def _odd(rng: random.Random) -> Any:
    return rng.choice(ODD_VALUES)


def _mutate_object(row: dict[str, Any], rng: random.Random) -> None:
    """Replace, drop or add one key of a JSON object (or of its payload)."""
    target = row
    if isinstance(row.get("payload"), dict) and rng.random() < 0.6:
        target = row["payload"]
    keys = list(target)
    choice = rng.random()
    if keys and choice < 0.6:
        target[rng.choice(keys)] = _odd(rng)
    elif keys and choice < 0.8:
        del target[rng.choice(keys)]
    else:
        target[rng.choice(["digest", "class_version", "color", "at", "on"])] = _odd(rng)


def _mutate_lines(lines: list[bytes], rng: random.Random, steps: int) -> list[bytes]:
    lines = list(lines)
    for _ in range(steps):
        if not lines:
            break
        n = rng.randrange(len(lines))
        kind = rng.choice(["drop", "repeat", "swap", "truncate", "flip", "field", "field"])
        TRIED[f"jsonl:{kind}"] += 1
        if kind == "drop":
            del lines[n]
        elif kind == "repeat":
            lines.insert(n, lines[n])
        elif kind == "swap":
            m = rng.randrange(len(lines))
            lines[n], lines[m] = lines[m], lines[n]
        elif kind == "truncate":
            lines[n] = lines[n][: rng.randrange(len(lines[n]) + 1)]
        elif kind == "flip":
            data = bytearray(lines[n])
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            lines[n] = bytes(data)
        else:
            try:
                row = orjson.loads(lines[n])
            except orjson.JSONDecodeError:
                continue
            if isinstance(row, dict):
                _mutate_object(row, rng)
                lines[n] = orjson.dumps(row) + b"\n"
    return lines


READERS = [
    ["replay", "{src}"],
    ["replay", "{src}", "--json", "--until", "2026-01-05T09:00:30Z"],
    ["replay", "{src}", "--skip-invalid"],
    ["verify", "{src}"],
    ["verify", "{src}", "--json", "--skip-invalid"],
    ["explain", "{src}", "fragile-0001"],
    ["diff", "{src}", "{src}", "--until-a", "40"],
    ["trace", "{src}"],
]
STORE_READERS = [
    *READERS,
    ["tasks", "{src}"],
    ["tasks", "{src}", "--json"],
    ["tasks", "{src}", "--outcome", "failed", "--limit", "2"],
    ["runs", "{src}"],
    ["runs", "{src}", "--live", "--json"],
    ["workers", "{src}"],
    ["history", "{src}", "fragile-0001"],
    ["history", "{src}", "research-0003", "--json"],
    ["export", "{src}", "{out}/out.jsonl"],
    ["project", "{src}", "--out", "{out}/views.db", "--quiet"],
]


def _every_reader(
    readers: list[list[str]], source: Path, out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = folder_state(source.parent)
    for template in readers:
        argv = [part.format(src=source, out=out) for part in template]
        ran = run(argv, capsys)
        TRIED[f"run:{argv[0]}"] += 1
        assert ran.code in EXIT_CODES, (argv, ran.code, ran.err[-2000:])
        assert "Traceback" not in ran.err and "internal error" not in ran.err, (argv, ran.err)
        assert folder_state(source.parent) == before, argv
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()


@FUZZ
@given(seed_number=st.integers(0, 2**32), steps=st.integers(1, 6), garbage=st.booleans())
def test_mutated_exports_never_crash_a_reader(
    seed: tuple[Path, Path],
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    seed_number: int,
    steps: int,
    garbage: bool,
) -> None:
    rng = random.Random(seed_number)
    folder = tmp_path_factory.mktemp("jsonl")
    source = folder / "in" / "log.jsonl"
    source.parent.mkdir()
    if garbage and rng.random() < 0.3:
        TRIED["jsonl:random bytes"] += 1
        source.write_bytes(rng.randbytes(rng.randrange(2000)))
    else:
        lines = seed[1].read_bytes().splitlines(keepends=True)
        source.write_bytes(b"".join(_mutate_lines(lines, rng, steps)))
    out = folder / "out"
    out.mkdir()
    _every_reader(READERS, source, out, capsys)


def _mutate_store(path: Path, rng: random.Random, steps: int) -> None:
    connection = sqlite3.connect(path)
    set_state = "UPDATE stored_events SET state=? WHERE rowid=?"
    set_topic = "UPDATE stored_events SET topic=? WHERE rowid=?"
    try:
        rows = connection.execute(
            "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events"
        ).fetchall()
        for _ in range(steps):
            position, stream, version, topic, state = rng.choice(rows)
            kind = rng.choice(
                ["field", "field", "state", "topic", "stream", "version", "delete", "copy", "meta"]
            )
            TRIED[f"sqlite:{kind}"] += 1
            if kind == "field":
                payload = orjson.loads(state)
                _mutate_object(payload, rng)
                new: Any = orjson.dumps(payload)
                connection.execute(set_state, (new, position))
            elif kind == "state":
                new = rng.choice([b"not json", b"\xff\xfe\x00", None, b"[]", b"{}", "text", 42])
                connection.execute(set_state, (new, position))
            elif kind == "topic":
                new = rng.choice(["tasktrail.Nope", None, 7, "tasktrail.TaskEnded", "\x1b[31m"])
                connection.execute(set_topic, (new, position))
            elif kind == "stream":
                new = rng.choice(["other", "", "\x00x", "fragile-0001", 12, b"\xff"])
                connection.execute(
                    "UPDATE OR IGNORE stored_events SET originator_id=? WHERE rowid=?",
                    (new, position),
                )
            elif kind == "version":
                new = rng.choice([0, -1, version + 5, "two", None, 2**62])
                connection.execute(
                    "UPDATE OR IGNORE stored_events SET originator_version=? WHERE rowid=?",
                    (new, position),
                )
            elif kind == "delete":
                connection.execute("DELETE FROM stored_events WHERE rowid=?", (position,))
            elif kind == "copy":
                connection.execute(
                    "INSERT OR IGNORE INTO stored_events VALUES (?, ?, ?, ?)",
                    (f"{stream}-copy", version, topic, state),
                )
            else:
                new = rng.choice(["2", "banana", "", None, "1"])
                connection.execute(
                    "UPDATE tasktrail_meta SET value=? WHERE key=?",
                    (new, rng.choice(["format", "chained_after", "made_by"])),
                )
        connection.commit()
    finally:
        connection.close()


@FUZZ
@given(seed_number=st.integers(0, 2**32), steps=st.integers(1, 5), in_bytes=st.booleans())
def test_mutated_stores_never_crash_a_reader(
    seed: tuple[Path, Path],
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    seed_number: int,
    steps: int,
    in_bytes: bool,
) -> None:
    rng = random.Random(seed_number)
    folder = tmp_path_factory.mktemp("store")
    source = folder / "in" / "trail.db"
    source.parent.mkdir()
    shutil.copy(seed[0], source)
    if in_bytes and rng.random() < 0.4:
        TRIED["sqlite:bytes"] += 1
        data = bytearray(source.read_bytes())
        for _ in range(steps * 20):
            data[rng.randrange(len(data))] = rng.randrange(256)
        source.write_bytes(bytes(data))
    else:
        _mutate_store(source, rng, steps)
    out = folder / "out"
    out.mkdir()
    _every_reader(STORE_READERS, source, out, capsys)


@pytest.mark.parametrize("row", ["first", "last"])
def test_an_export_of_an_event_that_is_not_an_object_names_its_position(
    seed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], row: str
) -> None:
    """Found by the long profile's fuzzing: a store whose last event holds a JSON list made
    ``export`` exit 3 (its seal read the last event's time as an object); every reader
    names such an event by its position, export too."""
    source = tmp_path / "trail.db"
    shutil.copy(seed[0], source)
    with sqlite3.connect(source) as connection:
        chosen = "MIN" if row == "first" else "MAX"
        position = connection.execute(f"SELECT {chosen}(rowid) FROM stored_events").fetchone()[0]
        connection.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (b"[1]", position))
    out = tmp_path / "out.jsonl"
    ran = run(["export", str(source), str(out)], capsys)
    assert ran.code == 2 and f"position {position}" in ran.err, ran.err
    assert "payload is not an object" in ran.err and not out.exists()


def test_workers_of_a_store_whose_lease_row_is_damaged_names_it(
    seed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the long profile's fuzzing: a lease row whose time is not a number made
    ``workers`` exit 3 (it compared it with the clock); it is bad input, named."""
    source = tmp_path / "trail.db"
    shutil.copy(seed[0], source)
    with sqlite3.connect(source) as connection:
        # A number's column in SQLite keeps any value: here, text where a time was.
        row = ("w", "soon", 1.0, 1.0)
        connection.execute(
            "INSERT INTO tasktrail_leases (worker, expires_at, renewed_at, started_at) "
            "VALUES (?, ?, ?, ?)",
            row,
        )
    ran = run(["workers", str(source)], capsys)
    assert ran.code == 2 and "lease table" in ran.err and "damaged row" in ran.err, ran.err


def test_a_store_whose_schema_lost_a_column_is_named_by_every_reader(
    seed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the long profile's fuzzing: a damaged byte in the schema's text (the
    ``topic`` column renamed) made ``export`` exit 3: its look for archive gaps read the
    history stream outside the store's checked reads. Every reader names the store."""
    source = tmp_path / "in" / "trail.db"
    source.parent.mkdir()
    shutil.copy(seed[0], source)
    with sqlite3.connect(source) as connection:
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute(
            "UPDATE sqlite_master SET sql = replace(sql, ' topic TEXT', ' topix TEXT') "
            "WHERE name = 'stored_events'"
        )
    out = tmp_path / "out"
    out.mkdir()
    ran = run(["export", str(source), str(out / "log.jsonl")], capsys)
    assert ran.code == 2 and f"cannot read store {source}" in ran.err, ran.err
    assert "no such column: topic" in ran.err and not (out / "log.jsonl").exists()
    _every_reader(STORE_READERS, source, out, capsys)
