"""What every ``tasktrail`` command shares: the exit codes a script can rely on, the
help texts of the arguments several commands take, how a command says a line to a
person (escaped) or to a program (JSON, exact), the checks that keep an output
away from every input, and a progress bar that draws only on a terminal.

Exit codes: 0 ok, 1 violations or differences found, 2 bad input (what was wrong
and where: a file, a line, a position), 3 an internal error (one line; the
traceback only with ``--debug``), 4 nothing wrong found but the keys were not checked
(a keyed store verified without its key), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from tasktrail.domain import InvalidArgument, StoreError
from tasktrail.domain.store.files import companions, is_sqlite_file
from tasktrail.domain.store.location import parse_location
from tasktrail.domain.tasks.describe import printable

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_UNCHECKED = 4
EXIT_INTERRUPTED = 130

SOURCE_HELP = "SQLite path or file: URI, postgresql:// URL, or .jsonl export"
STORE_HELP = "SQLite path or file: URI (mode=ro, immutable=1), or postgresql:// URL"
UNTIL_HELP = "stop after this position (an integer) or at this time (ISO-8601, e.g. ...Z)"
SKIP_HELP = (
    "skip what cannot be read (an export's lines, a store's events) and report each one "
    "with where it was (never the default)"
)


def say(line: str = "") -> None:
    """One line for a person on stdout: whatever a log put in it is escaped."""
    sys.stdout.write(printable(line) + "\n")


def warn(line: str) -> None:
    """One line for a person on stderr, prefixed ``tasktrail:``, escaped."""
    sys.stderr.write(printable(f"tasktrail: {line}") + "\n")


def report_start(snapshot: int | None, passed_over: list[str], position: int) -> None:
    """Say on stderr where a read of a store started: the snapshot it trusted, or
    position 0, and each snapshot it passed over (failed a check) and why."""
    for problem in passed_over:
        warn(f"{problem}; passed over")
    if snapshot is not None:
        warn(f"started from the snapshot at position {snapshot}, folded to {position}")
    else:
        warn(f"folded from position 0 to {position} (no snapshot used)")


def emit(value: Any) -> None:
    """One JSON line for a program on stdout: exact (JSON escapes what it must)."""
    try:
        text = orjson.dumps(value, default=repr)
    except TypeError:  # a string that is not UTF-8 (a lone surrogate): shown escaped
        text = orjson.dumps(_encodable(value), default=repr)
    sys.stdout.write(text.decode() + "\n")


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(v) for v in value]
    return value


def task_id_argument(text: str) -> str:
    """A task id from the command line: a name the log could hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(
            f"the task id {printable(text)} is not valid UTF-8 (no store holds such an id)"
        ) from None
    return text


def until_argument(text: str | int | None) -> Any:
    """``--until``: a position (0 to 64 signed bits) or a time, checked here so a bad one
    is bad input, before anything is opened."""
    from tasktrail.replay.state import Until

    try:
        return Until.parse(text)
    except ValueError as error:
        raise InvalidArgument(f"--until: {error}") from None


# ─── inputs and outputs ─────────────────────────────────────────────────────


def local_file(location: str | os.PathLike[str]) -> Path | None:
    """The file a location reads (a SQLite path or ``file:`` URI, a ``.jsonl``), or
    ``None`` for a server URL."""
    text = os.fspath(location)
    if text.startswith(("postgresql://", "postgres://")):
        return None
    try:
        parsed = parse_location(text)
    except StoreError:
        return Path(text)
    return Path(parsed.path) if parsed.path is not None else None


def files_of(location: str | os.PathLike[str]) -> list[Path]:
    """Every file a location stands for: the file and SQLite's companions beside it."""
    path = local_file(location)
    return [] if path is None else [path, *companions(path)]


def check_output(out: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> Path:
    """Refuse an output that would write over an input (the same file by any name:
    ``./`` forms, symbolic or hard links, SQLite's ``-wal``/``-shm``), over a SQLite
    database, into a folder that is not there, or that is a folder; returns it."""
    path = Path(out)
    refuse_inputs(path, inputs, what="refusing to write over an input")
    check_folder(path)
    if is_sqlite_file(path):
        raise InvalidArgument(
            f"{out} is a SQLite database (a store?): refusing to write over it; "
            "give a new file, or remove it first"
        )
    return path


def refuse_inputs(out: Path, inputs: Iterable[str | os.PathLike[str]], *, what: str) -> None:
    """Refuse an output that is one of the inputs, or a file SQLite keeps beside one."""
    for location in inputs:
        for taken in files_of(location):
            if _same_file(out, taken):
                part = "" if taken == local_file(location) else f" ({taken.name} is part of it)"
                raise InvalidArgument(f"{out} is the input {location}{part}: {what}")


def check_folder(out: Path) -> None:
    """Refuse an output that is a folder, or in a folder that is not there."""
    if out.is_dir():
        raise InvalidArgument(f"{out} is a directory: give a file to write")
    folder = Path(os.path.realpath(out)).parent
    if not folder.is_dir():
        raise InvalidArgument(f"{out}: the folder {folder} does not exist")


def _same_file(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there: not the same file
        return False


class ProgressBar:
    """A one-line progress bar on stderr, redrawn with ``\\r``: only on a terminal (a
    file or pipe gets no frames), and never with ``--quiet``."""

    def __init__(self, label: str, *, enabled: bool = True, unit: str = "events") -> None:
        self.label = label
        self.unit = unit
        self.enabled = enabled and sys.stderr.isatty()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        width = 30
        filled = min(width, width * done // total)
        percent = min(100, 100 * done // total)
        bar = "#" * filled + "." * (width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {percent:3d}% {done:,}/{total:,} {self.unit}")
        sys.stderr.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            self.shown = False
