"""Whether a JSONL export is whole: :mod:`.exporting` ends every export with its heads
line, then its seal. An export cut short (its last lines gone, or its last line cut
mid-way) or a 0-byte one lacks them: ``verify`` reports it incomplete (exit 1) and
``import`` refuses it, appending nothing. Only the end of the file is read, from the
back: the seal line and the heads line before it (one entry a stream), nothing else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO

import orjson

from tasktrail.domain import StoreError, TasktrailError

from .verify_report import VerifyReport, Violation

_HEADS, _SEAL = b'{"heads"', b'{"seal"'
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class MissingEnd:
    """What an export lacks at its end."""

    what: str
    """In words, for a person: what is missing, and after what."""
    lines_whole: bool
    """Whether every line that is there is whole (the events there can still be read);
    ``False``: the last line was cut mid-way."""


class IncompleteExport(TasktrailError):
    """An export without its closing heads line and seal: ``import`` refuses it, nothing
    appended (a line cut mid-way before reading the rest; else once every line passed)."""

    def __init__(self, path: str, missing: MissingEnd) -> None:
        self.path = path
        self.missing = missing
        super().__init__(f"{path}: {missing.what}")


def missing_end(path: str | os.PathLike[str]) -> MissingEnd | None:
    """What the export at ``path`` lacks at its end, or ``None`` when it closes with a
    heads line and then a seal line, as every export does."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            lines, cut = _last_lines(handle, size)
    except OSError as error:
        raise StoreError(f"cannot read {name}: {error.strerror or error}") from None
    if size == 0:
        return _missing("it is empty (0 bytes)")
    if cut is not None:
        if cut.startswith(_SEAL):
            return _missing("its seal line is cut off mid-way", whole=False)
        if cut.startswith(_HEADS):
            return _missing("its heads line is cut off mid-way and its seal is missing", False)
        return _missing(f"its last line is cut off mid-way{_after(lines)}", whole=False)
    last = lines[-1] if lines else b""
    before = lines[-2] if len(lines) > 1 else b""
    if last.startswith(_SEAL) and before.startswith(_HEADS):
        return None
    if last.startswith(_HEADS):
        return _missing("its seal is missing after its heads line")
    if last.startswith(_SEAL):
        return _missing("its heads line is missing before its seal")
    return _missing(f"its heads line and seal are missing{_after([last])}")


def incomplete(missing: MissingEnd | None) -> list[Violation]:
    """``verify``'s finding on an export without its end (none for a whole one)."""
    return [] if missing is None else [Violation("complete", None, missing.what)]


def cut_short(missing: MissingEnd) -> VerifyReport:
    """``verify``'s report on an export whose last line was cut mid-way: that line
    cannot be read, so nothing is folded; the export is incomplete (exit 1)."""
    return VerifyReport(position=0, events=0, checks=["complete"], violations=incomplete(missing))


def _missing(what: str, whole: bool = True) -> MissingEnd:
    return MissingEnd(
        f"the export is incomplete: {what}. An export ends with its heads line and its "
        "seal: this one was cut short (or written by a release before seals); export the "
        "store again",
        whole,
    )


def _after(lines: list[bytes]) -> str:
    """Where the export stops: after the event at a position, when its last whole line is
    one."""
    try:
        position = orjson.loads(lines[-1]).get("position") if lines else None
    except (orjson.JSONDecodeError, AttributeError):
        position = None
    return f" (it stops after the event at position {position})" if position else ""


def _last_lines(handle: BinaryIO, size: int) -> tuple[list[bytes], bytes | None]:
    """The file's last two whole lines (fewer in a shorter file), without their newlines,
    and the partial line after them if the file does not end with a newline."""
    tail, end, newlines = b"", size, 0
    # Three newlines hold two whole lines: the one before them ends the line before.
    while end > 0 and newlines < 3:
        start = max(0, end - _CHUNK)
        handle.seek(start)
        chunk = handle.read(end - start)
        newlines += chunk.count(b"\n")
        tail, end = chunk + tail, start
    parts = tail.split(b"\n")
    cut = parts.pop() or None  # what follows the last newline: "" when the file ends on one
    if end > 0:
        parts = parts[1:]  # the first part may have begun before what was read
    return parts[-2:], cut


__all__ = [
    "IncompleteExport",
    "MissingEnd",
    "cut_short",
    "incomplete",
    "missing_end",
]
