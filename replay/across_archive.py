"""``archive=`` on the Python read functions (issue 45): a store read across its archive
folder, the segments its acts name read as if their events were still in place, as
``--archive DIR`` reads it on the command line."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from tasktrail.domain import InvalidArgument, Store
from tasktrail.domain.retention.across import (
    ArchiveView,
    archive_folder,
    findings,
    reading_archive,
    warn_of,
)

from .log import is_jsonl

ArchiveArg = str | os.PathLike[str] | None
"""``archive=``: a store's archive folder (``tasktrail archive --to DIR``), or ``None``."""


@contextlib.contextmanager
def across_archive(
    archive: ArchiveArg, source: Any, *, warn: bool = True
) -> Iterator[list[ArchiveView]]:
    """Within it, ``source`` (an open store) and every store opened read-only read across
    ``archive`` (``None``: as usual); yields the views made. A segment that fails its
    check is read as a gap, its events left out, and is then an
    :class:`~tasktrail.domain.retention.across.ArchiveWarning` (``warn=False``: the
    caller reports it). Only a store has an archive: a folded state, an export or
    records given with ``archive`` are refused, as is a folder that is not one."""
    if archive is None:
        yield []
        return
    refuse_without_store(source)
    folder = archive_folder(archive)
    with reading_archive(folder, source if isinstance(source, Store) else None) as views:
        yield views
    if warn:
        warn_of(findings(views), stacklevel=4)  # past contextlib: at the reading call


def refuse_without_store(source: Any) -> None:
    """Refuse ``archive=`` with a source that is not a store or a store's location."""
    if isinstance(source, Store):
        return
    if isinstance(source, str | os.PathLike):
        if not is_jsonl(source):
            return
        what = f"{os.fspath(source)!r} is an export"
    else:
        what = f"got a {type(source).__name__}"
    raise InvalidArgument(
        f"archive= reads a store's archived segments: give the store or its location, "
        f"not a state already folded, an export or records ({what})"
    )


__all__ = ["ArchiveArg", "across_archive", "refuse_without_store"]
