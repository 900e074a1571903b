"""Bad input, tried systematically: a clear, typed error, and the store as it was.

Every command here gets values of the wrong type, unknown task ids, values out
of range (a negative or non-finite ``until``, empty names, payloads over
MAX_VALUE_BYTES). A command either does what it says, recording only well
typed events that read back as the live state, or raises a tasktrail error
(``TasktrailError``: never a bare TypeError, KeyError or a driver's error) and
leaves every stored row as it was. So do malformed store locations, corrupt
and truncated SQLite files, read-only stores, and stores written by a newer
tasktrail.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.checks import file_digest, fold, stored_rows, verify_problems
from hypothesis import given
from hypothesis import strategies as st

from tasktrail.domain import (
    CorruptEvent,
    InvalidArgument,
    ManualClock,
    Registry,
    Scheduler,
    StoreError,
    TaskDefinition,
    TasktrailError,
    UnknownEventTopic,
    open_store,
)
from tasktrail.domain.errors import NewerEventVersion
from tasktrail.domain.tasks.events import (
    OUTCOME_STATUSES,
    CheckpointCommitted,
    MemoRecorded,
    OutcomeHeld,
    SleepStarted,
    TaskEnded,
    TaskEvent,
    TaskSubmitted,
    WaitStarted,
)
from tasktrail.domain.tasks.validation import MAX_VALUE_BYTES
from tasktrail.replay.harness import crash

TRIED: Counter[str] = Counter()
"""Bad inputs tried, by kind (printed at the end of the module, for docs/reliability.md)."""


@pytest.fixture(scope="module", autouse=True)
def _tally() -> Iterator[None]:
    yield
    print(f"\nbad inputs tried: {sum(TRIED.values())} {dict(sorted(TRIED.items()))}")


def registry() -> Registry:
    return Registry([TaskDefinition("job", 1, {"start": lambda i: "end", "end": lambda i: None})])


# ─── values ─────────────────────────────────────────────────────────────────

huge_text = st.integers(MAX_VALUE_BYTES - 8, 3 * MAX_VALUE_BYTES).map(lambda n: "x" * n)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(2**63, 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", " ", "\ud800", "\x00", "start", "end", "job"]),
    st.text(max_size=12),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.lists(st.lists(st.integers(), max_size=2), min_size=1, max_size=2),
    st.tuples(st.text(max_size=3)),
    st.frozensets(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
    st.builds(object),
    huge_text,
)
json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
value = st.one_of(json_like, junk, huge_text.map(lambda text: {"blob": text}))

SLOTS = ("pending", "running", "owner", "child", "terminal")
task_ref = st.one_of(st.sampled_from(SLOTS).map(lambda slot: ("slot", slot)), junk)
until = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.sampled_from([-1, -0.0, math.nan, math.inf, -math.inf, "10", None, True]),
)

commands = st.one_of(
    st.tuples(
        st.just("submit"),
        st.fixed_dictionaries(
            {},
            optional={
                "kind": st.one_of(junk, st.just("job")),
                "version": st.one_of(junk, st.integers(-2, 3)),
                "owner": task_ref,
                "phase": st.one_of(junk, st.just("start")),
                "id": st.one_of(junk, task_ref),
                "conversation_id": junk,
                "project_ids": st.one_of(junk, st.lists(junk, max_size=3)),
                "trace": st.one_of(
                    junk, st.dictionaries(st.one_of(st.none(), st.integers(), st.text()), junk)
                ),
                "abandon_on_restart": junk,
            },
        ),
    ),
    st.tuples(st.just("reserve"), task_ref),
    st.tuples(st.just("checkpoint"), task_ref, junk, st.one_of(st.none(), junk)),
    st.tuples(st.just("memo"), task_ref, st.one_of(junk, st.just("m")), value),
    st.tuples(st.just("read_memo"), task_ref, junk),
    st.tuples(
        st.just("wait"),
        task_ref,
        st.one_of(junk, st.lists(st.one_of(task_ref, junk), max_size=3)),
        st.one_of(junk, st.sampled_from(["all", "failFast"])),
        st.one_of(st.none(), junk),
    ),
    st.tuples(st.just("sleep"), task_ref, until, st.one_of(st.none(), junk)),
    st.tuples(
        st.just("finish"),
        task_ref,
        st.one_of(junk, st.sampled_from(OUTCOME_STATUSES)),
        st.one_of(junk, value, st.fixed_dictionaries({"message": junk, "detail": value})),
        st.one_of(st.none(), junk),
    ),
    st.tuples(st.just("abort"), task_ref),
    st.tuples(st.just("retry"), task_ref),
    st.tuples(st.just("task"), task_ref),
    st.tuples(st.just("history"), task_ref),
    st.tuples(st.just("blocked_reason"), task_ref),
)


# ─── applying a command ─────────────────────────────────────────────────────


def _resolve(ref: Any, ids: dict[str, str]) -> Any:
    if isinstance(ref, tuple) and len(ref) == 2 and ref[0] == "slot":
        return ids[ref[1]]
    return ref


def _apply(s: Scheduler, ids: dict[str, str], step: tuple[Any, ...]) -> Any:
    name, *args = step
    if name == "submit":
        options = {k: _resolve(v, ids) for k, v in args[0].items()}
        kind = options.pop("kind", "job")
        return s.submit(kind, **options)
    task_id = _resolve(args[0], ids)
    match name:
        case "checkpoint":
            return s.checkpoint(task_id, args[1], args[2])
        case "memo":
            return s.memo(task_id, args[1], args[2])
        case "read_memo":
            return s.memo(task_id, args[1])
        case "wait":
            on = [_resolve(r, ids) for r in args[1]] if isinstance(args[1], list) else args[1]
            return s.wait(task_id, on, args[2], args[3])
        case "sleep":
            return s.sleep(task_id, args[1], args[2])
        case "finish":
            return s.finish(task_id, args[1], args[2], reason=args[3])
        case _:
            return getattr(s, name)(task_id)


def _seeded(path: Path) -> tuple[Scheduler, dict[str, str]]:
    """A store with a task in each state the commands may meet."""
    s = Scheduler.open(path, clock=ManualClock(1_000), registry=registry())
    ids = {slot: s.submit("job", id=f"t-{slot}") for slot in SLOTS if slot != "child"}
    ids["child"] = s.submit("job", id="t-child", owner=ids["owner"])
    s.reserve(ids["running"])
    s.reserve(ids["owner"])
    s.reserve(ids["terminal"])
    s.finish(ids["terminal"], "completed")
    return s, ids


def _event_problems(event: TaskEvent) -> list[str]:
    """Fields of a recorded event that have the wrong type or are out of range."""

    def text(x: Any) -> bool:
        return isinstance(x, str) and bool(x.strip())

    problems = []
    if not (isinstance(event.at, int | float) and math.isfinite(event.at)):
        problems.append(f"at {event.at!r}")
    if isinstance(event, TaskSubmitted):
        if not (text(event.kind) and text(event.phase)):
            problems.append(f"kind/phase {event.kind!r}/{event.phase!r}")
        if type(event.version) is not int or type(event.abandon_on_restart) is not bool:
            problems.append(f"version/abandon {event.version!r}/{event.abandon_on_restart!r}")
        if not all(text(p) for p in event.project_ids):
            problems.append(f"project_ids {event.project_ids!r}")
    elif isinstance(event, CheckpointCommitted):
        if not text(event.phase) or not (event.attempt is None or type(event.attempt) is int):
            problems.append(f"checkpoint {event.phase!r}/{event.attempt!r}")
    elif isinstance(event, MemoRecorded):
        if not text(event.name) or len(orjson.dumps(event.value)) > MAX_VALUE_BYTES:
            problems.append(f"memo {event.name!r}")
    elif isinstance(event, WaitStarted):
        if not event.on or not all(isinstance(a, str) for a in event.on):
            problems.append(f"wait on {event.on!r}")
    elif isinstance(event, SleepStarted):
        finite = isinstance(event.until, int | float) and math.isfinite(event.until)
        if not finite or event.until < 0:
            problems.append(f"sleep until {event.until!r}")
    elif isinstance(event, OutcomeHeld | TaskEnded):
        if event.status not in OUTCOME_STATUSES:
            problems.append(f"status {event.status!r}")
        if not (event.message is None or isinstance(event.message, str)):
            problems.append(f"message {event.message!r}")
        if len(orjson.dumps(event.message)) > MAX_VALUE_BYTES:
            problems.append("message over the limit")
    return problems


@given(st.lists(commands, min_size=1, max_size=12))
def test_bad_commands_raise_typed_errors_and_record_nothing(steps: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trail.db"
        s, ids = _seeded(path)
        try:
            for step in steps:
                TRIED[f"command:{step[0]}"] += 1
                before = stored_rows(str(path))
                try:
                    _apply(s, ids, step)
                except TasktrailError:
                    assert stored_rows(str(path)) == before, step  # nothing appended
                except Exception as error:  # a leak: the test names the command
                    message = f"{step!r} leaked {type(error).__name__}: {error}"
                    raise AssertionError(message) from error
                else:
                    for row in stored_rows(str(path))[len(before) :]:
                        event = fold_one(row)
                        assert _event_problems(event) == [], (step, event)
                # What is stored folds to exactly what the scheduler holds: a value
                # that reads back differently (NaN, a tuple, a date) would show here.
                assert fold(s.store).world.tasks == s.world.tasks, step
        finally:
            crash(s)


def fold_one(row: tuple[Any, ...]) -> TaskEvent:
    from tasktrail.domain.store.transcoder import decode_event

    position, originator_id, _, topic, state = row
    return decode_event(topic, originator_id, state, position)


# ─── Scheduler.open's own arguments ─────────────────────────────────────────


@given(
    restart_limit=st.one_of(junk, st.integers(-3, 0)),
    clock=st.one_of(junk, st.just(lambda: math.nan), st.just(lambda: "soon")),
)
def test_bad_open_arguments_are_typed_errors(restart_limit: Any, clock: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trail.db"
        for options in ({"restart_limit": restart_limit}, {"clock": clock}, {"registry": clock}):
            TRIED["open:arguments"] += 1
            try:
                s = Scheduler.open(path, **options)
            except TasktrailError:
                continue
            try:
                s.submit("job", phase="start")  # a clock that gives no time fails here
            except TasktrailError:
                pass
            finally:
                crash(s)
            assert fold(str(path)).world.tasks.keys() <= {t.id for t in s.tasks()}


# ─── store locations ────────────────────────────────────────────────────────

bad_urls = st.one_of(
    st.builds(
        "{}://{}".format,
        st.sampled_from(["mysql", "sqlite", "file", "http", "redis", "postgresq1"]),
        st.text(max_size=10),
    ),
    st.builds(
        "postgresql://127.0.0.1:{}/test".format,
        st.one_of(st.integers(65_536, 10**7), st.text("abcxyz", min_size=1, max_size=5)),
    ),
    st.builds(
        "postgresql://{}127.0.0.1{}".format,
        st.sampled_from(["", "user@", "user:secret@"]),
        st.sampled_from(["", "/", ":5432", ":5432/", "/a/b", "/test/"]),
    ),
    st.builds("postgresql://[{}/test".format, st.sampled_from(["", "::1", "zz", "127.0.0.1"])),
    st.builds(
        "postgres://user:secret@127.0.0.1:1/{}?connect_timeout=1".format,
        st.sampled_from(["test", "x", "db%20name"]),
    ),
)


@given(location=st.one_of(bad_urls, junk.filter(lambda v: not isinstance(v, str))))
def test_malformed_store_locations_are_store_errors(location: Any) -> None:
    TRIED["location"] += 1
    with tempfile.TemporaryDirectory() as folder:
        cwd = os.getcwd()
        os.chdir(folder)  # whatever a location names, nothing may be created
        try:
            with pytest.raises(StoreError) as caught:
                Scheduler.open(location)
            assert "secret" not in str(caught.value)  # a password is never shown
            assert os.listdir(folder) == []
        finally:
            os.chdir(cwd)


# ─── damaged files ──────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store of 600 tasks (2,400 events), closed as a crash leaves it."""
    path = tmp_path_factory.mktemp("good") / "good.db"
    s = Scheduler.open(path, clock=ManualClock(0), registry=registry(), durability="normal")
    for n in range(600):
        task_id = s.submit("job", id=f"task-{n:04}")
        s.reserve(task_id)
        s.memo(task_id, "note", "x" * 100)
        if n % 2:
            s.finish(task_id, "completed")
    crash(s)
    return path


def _truncate(fraction: float) -> Callable[[bytearray], bytearray]:
    return lambda data: data[: int(len(data) * fraction)]


def _scribble(data: bytearray) -> bytearray:
    noise = random.Random(8)
    for offset in range(len(data) // 3, 2 * len(data) // 3, 97):
        data[offset] = noise.randrange(256)
    return data


DAMAGE: dict[str, Callable[[bytearray], bytearray]] = {
    "truncated to half": _truncate(0.5),
    "truncated to a page boundary": lambda d: d[: (len(d) // 4096 // 3) * 4096],
    "truncated by its last bytes": _truncate(0.99),
    "scribbled over its middle": _scribble,
    "header zeroed": lambda d: bytearray(100) + d[100:],
    "not a database": lambda d: bytearray(b"tasktrail? no. " * 200),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_sqlite_file_is_a_store_error_and_stays_as_it_was(
    damage: str, good_store: Path, tmp_path: Path
) -> None:
    TRIED["damaged file"] += 1
    path = tmp_path / "damaged.db"
    path.write_bytes(DAMAGE[damage](bytearray(good_store.read_bytes())))
    before = file_digest([path])
    with pytest.raises(StoreError) as caught, open_store(path) as store:  # or CorruptEvent
        list(store.read())
    assert str(path.name) in str(caught.value) or isinstance(caught.value, CorruptEvent)
    with pytest.raises(StoreError):
        Scheduler.open(path, registry=registry())
    problems = _verify_damaged(path)
    assert problems is None or problems, "verify found nothing wrong with a damaged file"
    assert file_digest([path]) == before


def _verify_damaged(path: Path) -> list[str] | None:
    try:
        return verify_problems(str(path))
    except StoreError as error:  # typed: verify could not read the file at all
        return [str(error)]


# ─── read-only stores ───────────────────────────────────────────────────────


def _read_only_copy(good_store: Path, tmp_path: Path, *, recovered: bool) -> Path:
    path = tmp_path / "readonly.db"
    shutil.copy(good_store, path)
    if recovered:  # nothing left running, so opening needs no write
        crash(Scheduler.open(path, registry=registry()))
    return path


def test_read_only_uri_store_refuses_writes_with_store_errors(
    good_store: Path, tmp_path: Path
) -> None:
    TRIED["read-only"] += 1
    path = _read_only_copy(good_store, tmp_path, recovered=True)
    before = file_digest([path])
    uri = f"file:{path}?mode=ro"
    s = Scheduler.open(uri, registry=registry())  # reading works
    tasks = {t.id: t for t in s.tasks()}
    assert len(tasks) == 600
    for command in (
        lambda: s.submit("job"),
        lambda: s.reserve("task-0000"),
        lambda: s.abort("task-0002"),
    ):
        with pytest.raises(StoreError, match="readonly"):
            command()
    assert {t.id: t for t in s.tasks()} == tasks  # a failed write changed nothing here
    crash(s)
    assert file_digest([path]) == before


def test_read_only_store_that_needs_recovery_is_a_store_error(
    good_store: Path, tmp_path: Path
) -> None:
    TRIED["read-only"] += 1
    path = _read_only_copy(good_store, tmp_path, recovered=False)
    before = file_digest([path])
    with pytest.raises(StoreError, match="readonly"):
        Scheduler.open(f"file:{path}?mode=ro", registry=registry())
    assert file_digest([path]) == before


READ_ONLY_OPEN = """
import sys
from tasktrail.domain import Scheduler, TasktrailError
try:
    Scheduler.open(sys.argv[1])
except TasktrailError as error:
    print(type(error).__name__, error)
else:
    print("opened")
"""


def test_store_without_write_permission_is_a_store_error(good_store: Path, tmp_path: Path) -> None:
    """File permissions stop nobody running as root, so the open then runs as root
    without capabilities (``setpriv``), which file permissions do stop."""
    TRIED["read-only"] += 1
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root, and no setpriv to drop the capabilities")
        prefix = [setpriv, "--bounding-set=-all", "--inh-caps=-all"]
    folder = tmp_path / "locked"
    folder.mkdir()
    path = folder / "readonly.db"
    shutil.copy(good_store, path)
    before = file_digest([path])
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        result = subprocess.run(
            [*prefix, sys.executable, "-c", READ_ONLY_OPEN, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
    assert result.stdout.startswith("StoreError"), result.stdout + result.stderr
    assert file_digest([path]) == before
    assert sorted(p.name for p in folder.iterdir()) == ["readonly.db"]


# ─── stores written by a newer tasktrail ────────────────────────────────────


def _newer_rows() -> dict[str, tuple[str, bytes, type[Exception]]]:
    submitted = orjson.dumps(
        {"at": 1, "kind": "job", "version": 1, "phase": "start", "class_version": 3}
    )
    extra_field = orjson.dumps(
        {"at": 1, "kind": "job", "version": 1, "phase": "start", "color": "blue"}
    )
    return {
        "an unknown topic": ("tasktrail.TaskTeleported", b'{"at": 1}', UnknownEventTopic),
        "a newer class version": ("tasktrail.TaskSubmitted", submitted, NewerEventVersion),
        "a field this version lacks": ("tasktrail.TaskSubmitted", extra_field, CorruptEvent),
    }


@pytest.mark.parametrize("newer", list(_newer_rows()))
def test_store_written_by_a_newer_tasktrail_is_refused_and_kept(newer: str, store_url: str) -> None:
    TRIED["newer store"] += 1
    from eventsourcing.persistence import StoredEvent

    topic, state, error_type = _newer_rows()[newer]
    s = Scheduler.open(store_url, clock=ManualClock(0), registry=registry())
    s.submit("job", id="old")
    s.reserve("old")  # running: an open that could read the log would recover it
    s.store.app.recorder.insert_events([StoredEvent("new", 1, topic, state)])
    crash(s)
    with open_store(store_url) as store:
        head = store.head()
    with pytest.raises(error_type) as caught:
        Scheduler.open(store_url, registry=registry())
    assert caught.value.position == head
    expected = "color" if error_type is CorruptEvent else "newer tasktrail"
    assert expected in str(caught.value)
    problems = verify_problems(store_url)
    assert problems is None or any("position" in p or "event" in p for p in problems)
    with open_store(store_url) as store:
        assert store.head() == head  # nothing was recovered, nothing written


def test_invalid_argument_names_the_task_and_the_limit(scheduler: Scheduler) -> None:
    task_id = scheduler.submit("job")
    scheduler.reserve(task_id)
    with pytest.raises(InvalidArgument) as caught:
        scheduler.memo(task_id, "blob", "x" * (MAX_VALUE_BYTES + 1))
    assert task_id in str(caught.value) and str(MAX_VALUE_BYTES) in str(caught.value)
    with pytest.raises(InvalidArgument, match="NaN"):
        scheduler.memo(task_id, "ratio", [1.0, math.nan])
    with pytest.raises(InvalidArgument, match="limit"):
        scheduler.finish(task_id, "failed", error="x" * (MAX_VALUE_BYTES + 1))
    scheduler.memo(task_id, "pair", (1, 2))  # read back as a list, live as in a replay
    assert scheduler.task(task_id).memos["pair"] == [1, 2]
    assert sqlite3.sqlite_version  # the SQLite the file tests ran against
