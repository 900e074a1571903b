"""The store's archived history as the console reads it (``tasktrail serve --archive
DIR``, the Retention issue): across the archive, or not at all, said once on each page.

With a folder, the follower's store reads through an
:class:`~tasktrail.domain.retention.across.ArchiveView` (``Store.archive``): every
``Store.read`` and ``stream_records`` of it, the follower's fold and a task's page,
has each good segment's events in place, and a segment that fails its check is a
finding the pages show (its events read as a gap). Without one, the pages say which
archived ranges they skip. An archive act appended while the console serves renews the
view (:meth:`ArchivedHistory.look`), so a tree archived under it still reads whole.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tasktrail.domain import InvalidArgument, Store
from tasktrail.domain.retention.across import ArchiveView, skipped_ranges
from tasktrail.domain.store.gaps import gaps_of, history_acts, history_version

SKIPPED_ADVICE = "serve with --archive DIR to read them"


class ArchivedHistory:
    """One store's archive acts, looked at again as they change, and how it reads them."""

    def __init__(self, store: Store, folder: str | os.PathLike[str] | None) -> None:
        if folder is not None and not Path(folder).is_dir():
            raise InvalidArgument(f"--archive {folder}: not a folder")
        self.store = store
        self.folder = Path(folder) if folder is not None else None
        self.skipped: str | None = None
        """What the pages say of the ranges they skip (no folder), or ``None``."""
        self._version = -1
        self.look()

    def look(self) -> bool:
        """Look at the store's acts again (one indexed look); whether they changed since.
        A change renews the archive view (the segments it has not checked yet are
        checked at their next read), or the note of what is skipped."""
        version = history_version(self.store)
        if version == self._version:
            return False
        self._version = version
        if self.folder is not None:
            view = self.store.archive
            if view is None:
                self.store.archive = ArchiveView(self.store, self.folder)
            else:
                self.store.archive = view.renewed(self.store)
        else:
            self.skipped = skipped_ranges(gaps_of(history_acts(self.store)), SKIPPED_ADVICE)
        return True

    @property
    def across(self) -> bool:
        """Whether the store reads across an archive folder."""
        return self.folder is not None

    def findings(self) -> list[str]:
        """Each segment that failed its check, as the pages say it."""
        view = self.store.archive
        return [str(found) for found in view.findings] if view is not None else []

    def to_dict(self) -> dict[str, Any]:
        """The archive as ``/api/status`` says it: the folder, its findings, or the
        ranges skipped without it."""
        return {
            "folder": str(self.folder) if self.folder is not None else None,
            "findings": self.findings(),
            "skipped": self.skipped,
        }


__all__ = ["SKIPPED_ADVICE", "ArchivedHistory"]
