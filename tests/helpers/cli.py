"""Running the ``tasktrail`` command line in a test, and proving it touched nothing.

:func:`run` calls ``main`` in-process and returns the exit code with what it printed;
:func:`folder_state` takes the name and bytes digest of every file in a folder
(hidden ones and SQLite's ``-wal``/``-shm`` included), so a test can assert that a
command left every pre-existing file byte-identical and created none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tasktrail.replay.cli import main


@dataclass(frozen=True)
class Ran:
    """What one command did: its exit code, its stdout and its stderr."""

    code: int
    out: str
    err: str


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Ran:
    """Run ``tasktrail ARGV`` in this process."""
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err)


def folder_state(*folders: Path) -> dict[str, str]:
    """Every file under ``folders`` (recursively) by path, with its sha256."""
    state = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                state[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state
