"""Issue 17, item 1: no command writes over one of its inputs or a store, and outputs
are written whole or not at all.

Every case asserts the exit code, the message, and that every file that was there
before is byte-identical afterwards (and that none was created).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cli import folder_state, run
from helpers.tamper_rows import Tamperer

from tasktrail.domain import ManualClock, Registry, Scheduler, open_store
from tasktrail.domain.demo.workload import DEMO_MARK, MAX_TASKS, MIN_TASKS, run_demo


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "v.db"
    run_demo(path, MIN_TASKS, log=lambda _: None)
    return path


@pytest.fixture
def folder(tmp_path: Path, demo_db: Path) -> Path:
    """A folder holding a copy of the demo store ``v.db``, and nothing else."""
    shutil.copy(demo_db, tmp_path / "v.db")
    return tmp_path


def _same_names(folder: Path) -> list[tuple[list[str], str]]:
    """Outputs naming the store ``v.db`` itself, by every name a shell gives it."""
    (folder / "link.jsonl").symlink_to(folder / "v.db")
    os.link(folder / "v.db", folder / "hard.jsonl")
    return [
        (["v.db"], "is the input"),
        (["./v.db"], "is the input"),
        ([str(folder / "v.db")], "is the input"),
        (["../" + folder.name + "/v.db"], "is the input"),
        (["link.jsonl"], "is the input"),
        (["hard.jsonl"], "is the input"),
        (["v.db-wal"], "v.db-wal is part of it"),
        (["v.db-shm"], "v.db-shm is part of it"),
    ]


@pytest.mark.parametrize("command", ["export", "trace", "project"])
def test_an_output_naming_an_input_is_refused_by_every_name(
    command: str, folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    for out, message in _same_names(folder):
        before = folder_state(folder)
        argv = {
            "export": ["export", "v.db", *out],
            "trace": ["trace", "v.db", "--out", *out],
            "project": ["project", "v.db", "--out", *out],
        }[command]
        ran = run(argv, capsys)
        assert ran.code == 2, (argv, ran)
        assert message in ran.err and "Traceback" not in ran.err, ran.err
        assert folder_state(folder) == before, argv


def test_import_into_its_own_log_is_refused(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    assert run(["export", "v.db", "v.jsonl"], capsys).code == 0
    before = folder_state(folder)
    ran = run(["import", "v.jsonl", "./v.jsonl"], capsys)
    assert ran.code == 2 and "refusing to import a log into itself" in ran.err
    (folder / "notes.txt").write_text("my notes\n")
    before = folder_state(folder)
    ran = run(["import", "v.jsonl", "notes.txt"], capsys)
    assert ran.code == 2 and "notes.txt is not a SQLite store" in ran.err
    assert folder_state(folder) == before


def test_an_output_over_a_store_or_a_folder_or_in_a_missing_folder_is_refused(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    shutil.copy(folder / "v.db", folder / "other.db")
    (folder / "sub").mkdir()
    cases = [
        (["export", "v.db", "other.db"], "other.db is a SQLite database"),
        (["trace", "v.db", "--out", "other.db"], "other.db is a SQLite database"),
        (["project", "v.db", "--out", "other.db"], "is a tasktrail store, not read models"),
        (["export", "v.db", "sub"], "sub is a directory"),
        (["trace", "v.db", "--out", "sub"], "sub is a directory"),
        (["project", "v.db", "--out", "sub"], "sub is a directory"),
        (["export", "v.db", "missing/out.jsonl"], "does not exist"),
        (["trace", "v.db", "--out", "missing/t.json"], "does not exist"),
        (["project", "v.db", "--out", "missing/views.db"], "does not exist"),
        (["demo", "--db", "missing/d.db"], "does not exist"),
        (["demo", "--db", "sub"], "sub is a directory"),
    ]
    (folder / "notes.txt").write_text("not a database\n")
    cases.append((["project", "v.db", "--out", "notes.txt"], "notes.txt is not a SQLite database"))
    for argv, message in cases:
        before = folder_state(folder)
        ran = run(argv, capsys)
        assert ran.code == 2, (argv, ran)
        assert message in ran.err and "Traceback" not in ran.err, (argv, ran.err)
        assert folder_state(folder) == before, argv


@contextlib.contextmanager
def _tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB file system (tmpfs) where one can be mounted; else skip."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {result.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_leaves_the_output_as_it_was(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _tiny_disk(folder) as disk:
        (disk / "out.jsonl").write_text("yesterday's export\n")
        before = folder_state(folder)
        for argv in (
            ["export", str(folder / "v.db"), str(disk / "out.jsonl")],
            ["trace", str(folder / "v.db"), "--out", str(disk / "out.jsonl")],
            ["demo", "--db", str(disk / "d.db"), "--quiet"],
        ):
            ran = run(argv, capsys)
            assert ran.code == 2, (argv, ran)
            assert "No space left" in ran.err or "disk is full" in ran.err, ran.err
            assert str(disk) in ran.err and "Traceback" not in ran.err
            assert folder_state(folder) == before, argv
        assert sorted(p.name for p in disk.iterdir()) == ["out.jsonl"]


def test_a_failed_write_leaves_the_output_as_it_was_without_a_tmpfs(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, with the disk filling up simulated where a full disk shows last: the
    sync of the written file fails (ENOSPC)."""
    out = folder / "out.jsonl"
    out.write_text("yesterday's export\n")
    before = folder_state(folder)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    for argv in (
        ["export", str(folder / "v.db"), str(out)],
        ["trace", str(folder / "v.db"), "--out", str(out)],
    ):
        ran = run(argv, capsys)
        assert ran.code == 2 and f"{out}: No space left on device" in ran.err, ran
        assert folder_state(folder) == before


def test_outputs_are_renamed_into_place_whole(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export interrupted half way (Ctrl-C) leaves the old file and no temporary one."""
    from tasktrail.replay import exporting as log

    out = folder / "out.jsonl"
    out.write_text("yesterday's export\n")
    before = folder_state(folder)
    real_line = log._line
    lines = {"n": 0}

    def interrupted(*args: object) -> bytes:
        lines["n"] += 1
        if lines["n"] == 50:
            raise KeyboardInterrupt
        return real_line(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(log, "_line", interrupted)
    ran = run(["export", str(folder / "v.db"), str(out)], capsys)
    assert ran.code == 130 and "interrupted" in ran.err and "Traceback" not in ran.err
    assert folder_state(folder) == before
    monkeypatch.undo()
    ran = run(["export", str(folder / "v.db"), str(out)], capsys)
    assert ran.code == 0 and out.read_bytes().count(b"\n") > 100
    assert sorted(p.name for p in folder.iterdir()) == ["out.jsonl", "v.db"]
    assert oct(out.stat().st_mode & 0o777) == "0o644"


def test_demo_replaces_only_a_store_a_demo_made(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    with open_store(folder / "v.db", read_only=True) as store:
        assert store.made_by == DEMO_MARK  # the demo marks its stores
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "empty.db").touch()
    from tasktrail.domain import ManualClock, Scheduler

    Scheduler.open(folder / "real.db", clock=ManualClock(0)).close()  # a store, not a demo's
    for target in ("notes.txt", "empty.db", "real.db"):
        before = folder_state(folder)
        ran = run(["demo", "--db", target, "--tasks", str(MIN_TASKS)], capsys)
        assert ran.code == 2, ran
        assert f"{target} exists and is not a store tasktrail demo made" in ran.err
        assert folder_state(folder) == before
    before = folder_state(folder)
    ran = run(["demo", "--db", "v.db", "--tasks", str(MIN_TASKS), "--quiet"], capsys)
    assert ran.code == 0 and "store      v.db" in ran.out
    after = folder_state(folder)
    assert {k: v for k, v in after.items() if not k.endswith("v.db")} == {
        k: v for k, v in before.items() if not k.endswith("v.db")
    }
    assert sorted(p.name for p in folder.iterdir()) == [
        "empty.db",
        "notes.txt",
        "real.db",
        "v.db",
    ]


@pytest.mark.parametrize("tasks", [MIN_TASKS - 1, MAX_TASKS + 1, -5, 10**9])
def test_demo_tasks_are_bounded(
    tasks: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = folder_state(tmp_path)
    ran = run(["demo", "--db", str(tmp_path / "d.db"), "--tasks", str(tasks)], capsys)
    assert ran.code == 2 and f"{MIN_TASKS} to {MAX_TASKS} tasks" in ran.err
    assert folder_state(tmp_path) == before


def test_an_interrupted_demo_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasktrail.domain.demo import scenarios

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(scenarios, "crew_scenario", interrupted)
    ran = run(["demo", "--db", str(tmp_path / "d.db"), "--tasks", str(MIN_TASKS)], capsys)
    assert ran.code == 130 and ran.err.strip().endswith("tasktrail: interrupted")
    assert "Traceback" not in ran.err
    assert list(tmp_path.iterdir()) == []


def test_a_refused_project_leaves_no_read_models_behind(
    store_url: str, registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40, item 11: a new read-model file is written whole or not at all: a project
    refused half way (an unreadable event) leaves no file, nor its temporary one."""
    s = Scheduler.open(store_url, clock=ManualClock(1_000), registry=registry)
    for n in range(5):
        s.submit("leaf", id=f"t{n}")
    s.run_until_idle()
    s.close()
    tamper = Tamperer(store_url)
    position = tamper.rows()[-3][0]
    tamper.set_state(position, b"\x00\xff not JSON")
    out = tmp_path / "views" / "v-views.db"
    out.parent.mkdir()
    ran = run(["project", store_url, "--out", str(out), "--quiet"], capsys)
    assert ran.code == 2 and f"position {position}" in ran.err, ran.err
    assert list(out.parent.iterdir()) == []


def test_a_new_read_model_file_appears_whole_then_is_followed_in_place(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasktrail.projections import Projector

    followed: list[Path] = []
    monkeypatch.setattr(Projector, "follow", lambda self, **_: followed.append(self.path))
    out = folder / "views.db"
    ran = run(["project", str(folder / "v.db"), "--out", str(out), "--follow", "--quiet"], capsys)
    assert ran.code == 0 and followed == [out], (ran, followed)
    assert sorted(p.name for p in folder.iterdir()) == ["v.db", "views.db"]
    ran = run(["project", str(folder / "v.db"), "--out", str(out), "--follow", "--quiet"], capsys)
    assert ran.code == 0 and "no-op" in ran.out and followed == [out, out]
