"""Issue 17, item 9: progress on long work draws only on a terminal.

``project`` and ``demo`` redraw a progress bar with ``\\r`` on stderr when it is a
terminal; into a file or a pipe they write no frame at all (a log file stays one
line per line), and ``--quiet`` turns the bar off everywhere.
"""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tasktrail.domain.demo.workload import MIN_TASKS
from tasktrail.replay.cli import main

CLI = [sys.executable, "-m", "tasktrail.replay.cli"]


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_into_a_file_there_are_no_frames(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    for argv in (
        ["demo", "--db", str(db), "--tasks", str(MIN_TASKS)],
        ["project", str(db), "--rebuild"],
    ):
        with (tmp_path / "err.log").open("w") as err, (tmp_path / "out.log").open("w") as out:
            result = subprocess.run([*CLI, *argv], stdout=out, stderr=err, timeout=300)
        assert result.returncode == 0, argv
        for log in ("err.log", "out.log"):
            assert "\r" not in (tmp_path / log).read_text(), (argv, log)


def test_on_a_terminal_the_bar_is_redrawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "d.db"
    for argv in (
        ["demo", "--db", str(db), "--tasks", str(MIN_TASKS)],
        ["project", str(db), "--rebuild"],
    ):
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        assert main(argv) == 0
        monkeypatch.undo()
        frames = terminal.getvalue()
        assert frames.count("\r") >= 1 and "%" in frames, argv
        assert frames.endswith("\n")  # the bar ends its line before anything else prints
        assert "\r" not in capsys.readouterr().out
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        assert main([*argv, "--quiet"]) == 0
        monkeypatch.undo()
        assert "\r" not in terminal.getvalue()


def test_a_real_terminal_gets_frames(tmp_path: Path) -> None:
    """The same through a pseudo-terminal: stderr.isatty() as a shell gives it."""
    controller, device = pty.openpty()
    try:
        result = subprocess.run(
            [*CLI, "demo", "--db", str(tmp_path / "d.db"), "--tasks", str(MIN_TASKS)],
            stdout=subprocess.DEVNULL,
            stderr=device,
            timeout=300,
        )
        os.close(device)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    assert result.returncode == 0
    assert b"\r" in shown and b"tasks ended" in shown
