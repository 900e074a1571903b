"""Issue 30, item 5: what a full disk and a read-only folder do to the commands.

With the disk full, a reader of an intact store must read it, or say the disk is full:
never call it "database disk image is malformed". ``project`` into a folder it cannot
write fails naming the file. The disks are small tmpfs mounts (root only: skipped
elsewhere), the read-only folder a read-only mount (root ignores permissions).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasktrail.domain import ManualClock, Registry, Scheduler
from tasktrail.replay.cli import main


@contextlib.contextmanager
def mounted(folder: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``folder`` with ``options``; skips where none can be mounted."""
    folder.mkdir(exist_ok=True)
    ran = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if ran.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {ran.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(folder: Path) -> None:
    """Take every free byte of the disk holding ``folder``."""
    with contextlib.suppress(OSError), open(folder / "filler", "wb") as handle:
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()


WRITE_UNTIL_FULL = textwrap.dedent(
    """
    import sys
    from tasktrail.domain import ManualClock, Registry, Scheduler, StoreError
    s = Scheduler.open(sys.argv[1], clock=ManualClock(1000), registry=Registry(),
                       snapshot_every=None)
    written = 0
    try:
        while True:
            s.submit("job", phase="a")
            written += 1
    except StoreError as error:
        assert "full" in str(error), error
    print(written)
    """
)


def test_readers_read_a_store_its_writer_left_on_a_full_disk(tmp_path: Path) -> None:
    """The writer stopped by the full disk leaves its last commits in the -wal, the main
    file short of them: the readers' first look (the main file alone) must not call
    that malformed, and they read every event the writer committed."""
    with mounted(tmp_path / "disk", "size=2m") as disk:
        store = disk / "trail.db"
        ran = subprocess.run(
            [sys.executable, "-c", WRITE_UNTIL_FULL, str(store)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ran.returncode == 0, ran.stderr
        written = int(ran.stdout)
        _fill(disk)
        for command in (["tasks", str(store), "--json"], ["verify", str(store)]):
            finished = subprocess.run(
                [sys.executable, "-m", "tasktrail.replay.cli", *command],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert "malformed" not in finished.stderr, finished.stderr
            assert finished.returncode == 0, finished.stderr
            if command[0] == "tasks":
                assert len(finished.stdout.splitlines()) == written


def test_a_reader_on_a_full_disk_says_so(
    tmp_path: Path, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store with no -wal on a full disk: SQLite cannot make the -shm a reader needs
    and says "disk I/O error"; the command says the disk is full, exit 2."""
    with mounted(tmp_path / "disk", "size=1m") as disk:
        store = disk / "trail.db"
        s = Scheduler.open(store, clock=clock, registry=Registry())
        s.submit("job", phase="a")
        s.close()
        _fill(disk)
        for command in (["tasks", str(store)], ["replay", str(store)], ["verify", str(store)]):
            assert main(command) == 2, command
            err = capsys.readouterr().err
            assert f"disk is full: the disk holding {disk} has" in err, err
            assert "malformed" not in err and "the store is not damaged" in err


def test_project_into_a_read_only_folder_names_the_file(
    tmp_path: Path, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "trail.db"
    s = Scheduler.open(store, clock=clock, registry=Registry())
    s.submit("job", phase="a")
    s.close()
    with mounted(tmp_path / "sealed", "ro,size=64k") as folder:
        out = folder / "views.db"
        assert main(["project", str(store), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"cannot write the read models to {out}" in err
        assert f"its folder {folder} cannot be written" in err
        assert not out.exists()


def test_sqlites_own_errors_on_the_read_models_name_the_file(
    tmp_path: Path,
    clock: ManualClock,
    registry: Registry,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tasktrail import projections

    store = tmp_path / "trail.db"
    s = Scheduler.open(store, clock=clock, registry=registry)
    s.submit("job", phase="start")
    s.close()

    def unable(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(projections.Projector, "__init__", unable)
    out = tmp_path / "views.db"
    assert main(["project", str(store), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the read models to {out}: unable to open database file" in err
    assert os.access(tmp_path, os.W_OK)
