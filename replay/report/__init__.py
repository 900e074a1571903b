"""An incident report: one self-contained HTML file that draws a task tree's history.

>>> from tasktrail.replay.report import write_report
>>> write_report("trail.db", "report.html", "research-0003")   # doctest: +SKIP

The file holds a timeline on the scheduler clock (a row per task: its stays, Turns,
runs, waits with arrows to what it awaited, and the moments: abort marks, crashes
and recoveries, refusals, outcomes), the owner tree with outcomes, restarts and
blocked reasons, the explain trail of the task asked, the verify result, and where
in the log the report was taken. It loads nothing and opens from disk.

The modules: :mod:`.streams` (what is read), :mod:`.gather` (one fold of it),
:mod:`.timeline` (the timeline as data), :mod:`.draw` and :mod:`.page` (HTML),
:mod:`.assets` (the inline style and script).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from tasktrail.domain import InvalidArgument, Registry, Store
from tasktrail.domain.store.files import atomic_output

from ..across_archive import ArchiveArg, across_archive
from ..log import is_jsonl
from ..state import Until
from .gather import DEFAULT_LIMIT, ReportData, gather
from .page import render

_COMPANIONS = ("", "-wal", "-shm", "-journal")
"""A SQLite store's files: the database and what SQLite keeps beside it."""


def write_report(
    source: str | os.PathLike[str] | Store,
    out: str | os.PathLike[str],
    task_id: str | None = None,
    *,
    until: int | float | str | datetime | Until | None = None,
    limit: int | None = DEFAULT_LIMIT,
    restart_limit: int | None = None,
    registry: Registry | None = None,
    page: int = 1,
    archive: ArchiveArg = None,
) -> ReportData:
    """Write the report of ``task_id`` (or of the whole log) to ``out``; returns what it
    shows. ``out`` is never the source: that is refused before anything is read. The
    page is written to a temporary file beside ``out`` and renamed into place, so
    ``out`` is either the old file or the whole new report, never half of one.
    ``archive``: the store's archive folder, its events read in place."""
    target = check_out(source, out)
    with across_archive(archive, source):
        data = gather(
            source,
            task_id,
            until=until,
            limit=limit,
            restart_limit=restart_limit,
            registry=registry,
            page=page,
        )
    write_atomically(target, render(data))
    return data


def check_out(source: str | os.PathLike[str] | Store, out: str | os.PathLike[str]) -> Path:
    """``out`` as a path, if a report may be written there: not the source (in any
    spelling: ``./``, a symlink, a hard link), nor one of a SQLite store's side files,
    nor a folder, and in a folder that exists."""
    target = Path(out)
    if target.is_dir():
        raise InvalidArgument(f"--out {target} is a folder; name the .html file to write")
    if not target.parent.is_dir():
        raise InvalidArgument(f"--out {target}: the folder {target.parent} does not exist")
    location = _local_file(source)
    if location is not None:
        resolved = target.resolve()
        for suffix in _COMPANIONS:
            other = Path(f"{location}{suffix}")
            same = resolved == other.resolve()
            if not same and target.exists() and other.exists():
                same = os.path.samefile(target, other)
            if same:
                what = "the source" if not suffix else f"the store's {suffix[1:]} file"
                raise InvalidArgument(
                    f"--out {target} is {what} {other}: refusing to write over it; "
                    "name another file"
                )
    return target


def write_atomically(target: Path, page: str) -> None:
    """Write ``page`` to ``target`` whole or not at all (:func:`atomic_output`: a
    temporary file beside it, renamed over it)."""
    with atomic_output(target) as out:
        out.write(page.encode("utf-8"))


def _local_file(source: str | os.PathLike[str] | Store) -> Path | None:
    """The file a source is kept in, if it is a file (a SQLite store or a JSONL log)."""
    if isinstance(source, Store):
        return Path(str(source.location)) if source.kind == "sqlite" else None
    text = os.fspath(source)
    if "://" in text:
        return None
    if is_jsonl(text):
        return Path(text)
    return Path(text.removeprefix("file:").split("?", 1)[0])


__all__ = ["ReportData", "check_out", "gather", "render", "write_atomically", "write_report"]
