"""Issue 17, item 2: read commands never create or write anything.

A store is opened read-only (``mode=ro``, or ``immutable=1`` where nothing could
write it), so no table is created and no ``-wal``/``-shm`` is left behind; a file
that is empty or not SQLite is refused with exit 2, untouched; ``file:`` URIs with
``mode=ro`` or ``immutable=1`` are stores like any path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import folder_state, run

from tasktrail.domain import ManualClock, Scheduler, StoreError, open_store
from tasktrail.domain.demo.workload import MIN_TASKS, run_demo


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "v.db"
    run_demo(path, MIN_TASKS, log=lambda _: None)
    return path


def read_commands(store: str, task: str = "fragile-0001") -> list[list[str]]:
    """Every command that only reads, on ``store``."""
    return [
        ["replay", store],
        ["replay", store, "--json"],
        ["verify", store],
        ["tasks", store],
        ["tasks", store, "--all", "--kind", "fragile", "--since", "2026-01-01", "--limit", "3"],
        ["runs", store],
        ["runs", store, "--live"],
        ["schedules", store],
        ["inbox", store],
        ["workers", store],
        ["history", store, task],
        ["explain", store, task],
        ["diff", store, store],
        ["trace", store],
    ]


def test_read_commands_on_a_store_leave_its_folder_byte_identical(
    demo_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(demo_db, tmp_path / "v.db")
    before = folder_state(tmp_path)
    for argv in read_commands(str(tmp_path / "v.db")):
        ran = run(argv, capsys)
        assert ran.code == 0, (argv, ran.err)
        assert folder_state(tmp_path) == before, argv  # no -wal, no -shm, no table


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "is empty (0 bytes): not a tasktrail store"),
        (b"these are my notes\n", "is not a SQLite database"),
    ],
    ids=["empty", "not sqlite"],
)
@pytest.mark.parametrize("name", ["s.db", "s.jsonl.db", "notes"])
def test_an_empty_or_foreign_file_is_bad_input_and_stays_as_it_was(
    content: bytes, message: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    before = folder_state(tmp_path)
    outputs = [
        ["project", str(path), "--out", str(tmp_path / "o")],
        ["report", str(path), "--out", str(tmp_path / "o.html")],  # issue 40, item 8
    ]
    for argv in [*read_commands(str(path)), *outputs]:
        ran = run(argv, capsys)
        assert ran.code == 2, (argv, ran)
        assert message in ran.err and "Traceback" not in ran.err, (argv, ran.err)
        assert folder_state(tmp_path) == before, argv
        assert path.read_bytes() == content


def test_an_empty_jsonl_is_read_as_an_empty_log_and_not_turned_into_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "e.jsonl"
    path.touch()
    before = folder_state(tmp_path)
    assert run(["replay", str(path)], capsys).code == 0
    ran = run(["verify", str(path)], capsys)  # no heads, no seal: incomplete (issue 40)
    assert ran.code == 1 and "incomplete: it is empty (0 bytes)" in ran.out, ran
    ran = run(["tasks", str(path)], capsys)  # tasks reads stores only
    assert ran.code == 2 and "is empty (0 bytes)" in ran.err
    assert folder_state(tmp_path) == before


def test_a_sqlite_file_that_is_not_a_store_is_named_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE photos (name TEXT)")
    connection.close()
    before = folder_state(tmp_path)
    for argv in read_commands(str(path)):
        ran = run(argv, capsys)
        assert ran.code == 2 and "holds no tasktrail log" in ran.err, (argv, ran.err)
        assert folder_state(tmp_path) == before


@pytest.mark.parametrize("query", ["mode=ro", "immutable=1"])
def test_file_uris_read_only_are_stores(
    query: str, demo_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(demo_db, tmp_path / "v.db")
    before = folder_state(tmp_path)
    uri = f"file:{tmp_path / 'v.db'}?{query}"
    for argv in read_commands(uri):
        ran = run(argv, capsys)
        assert ran.code == 0, (argv, ran.err)
    out = tmp_path / "out"
    out.mkdir()
    assert run(["export", uri, str(out / "v.jsonl")], capsys).code == 0
    assert run(["project", uri, "--out", str(out / "views.db")], capsys).code == 0
    (out / "v.jsonl").unlink()
    shutil.rmtree(out)
    assert folder_state(tmp_path) == before


def test_a_read_only_file_store_leaves_no_companions_to_break_later_writers(
    demo_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "v.db"
    shutil.copy(demo_db, path)
    path.chmod(0o444)
    before = folder_state(tmp_path)
    try:
        for argv in read_commands(str(path)):
            assert run(argv, capsys).code == 0, argv
        assert folder_state(tmp_path) == before
    finally:
        path.chmod(0o644)
    writer = Scheduler.open(path, clock=ManualClock(1_800_000_000_000))
    writer.submit("later", phase="p")  # writers are not broken by leftovers
    writer.close()


READ_AS_NOBODY = """
import contextlib, io, json, sys
from tasktrail.replay.cli import main
ran = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
    ran.append([argv, code, err.getvalue()])
print(json.dumps(ran))
"""
"""Every read command, one after the other in one interpreter (one start, not one a
command: the commands are what is tested, not the start)."""


def _without_capabilities() -> list[str]:
    """File permissions stop nobody running as root: run as root without capabilities
    (``setpriv``), which they do stop."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, and no setpriv to drop the capabilities")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all"]


def test_a_store_in_a_read_only_folder_can_be_read(demo_db: Path, tmp_path: Path) -> None:
    prefix = _without_capabilities()
    folder = tmp_path / "locked"
    folder.mkdir()
    path = folder / "v.db"
    shutil.copy(demo_db, path)
    path.chmod(0o444)
    folder.chmod(0o555)
    before = folder_state(folder)
    commands = read_commands(str(path))
    try:
        result = subprocess.run(
            [*prefix, sys.executable, "-c", READ_AS_NOBODY, json.dumps(commands)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        assert "readonly" not in result.stderr
        ran = json.loads(result.stdout.strip().splitlines()[-1])
        assert [argv for argv, _, _ in ran] == commands
        for argv, code, err in ran:
            assert code == 0, (argv, err)
            assert "readonly" not in err, (argv, err)
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
    assert folder_state(folder) == before
    assert sorted(p.name for p in folder.iterdir()) == ["v.db"]


def test_open_store_read_only_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        open_store(tmp_path / "missing.db", read_only=True)
    assert list(tmp_path.iterdir()) == []
    store = open_store(tmp_path / "new.db")  # a writer creates the store and marks it
    store.close()
    before = folder_state(tmp_path)
    with open_store(tmp_path / "new.db", read_only=True) as store:
        assert store.read_only and store.head() == 0
    assert folder_state(tmp_path) == before


def test_open_store_read_only_on_postgresql_creates_no_table(postgres_url: str) -> None:
    import psycopg

    schema = postgres_url.rsplit("schema=", 1)[1]
    with pytest.raises(StoreError, match="holds no tasktrail log"):
        open_store(postgres_url, read_only=True)
    with psycopg.connect(postgres_url.split("?", 1)[0]) as connection:
        tables = connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
    assert tables == []
