"""Bad stores, tried systematically: a clear, typed error, and the store as it was.

``Scheduler.open``'s own arguments of the wrong type, malformed store locations,
corrupt and truncated SQLite files, read-only stores, and stores written by a newer
tasktrail: each raises a tasktrail error (``TasktrailError``: never a bare TypeError,
KeyError or a driver's error) and leaves every stored row as it was. Bad commands are
in ``test_bad_input_commands.py``.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.bad_input_values import TRIED, junk, registry
from helpers.bad_input_values import _tally as _tally
from helpers.checks import file_digest, fold, verify_problems
from hypothesis import given
from hypothesis import strategies as st

from tasktrail.domain import (
    CorruptEvent,
    ManualClock,
    Scheduler,
    StoreError,
    TasktrailError,
    UnknownEventTopic,
    open_store,
)
from tasktrail.domain.errors import NewerEventVersion
from tasktrail.replay.harness import crash

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
