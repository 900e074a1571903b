"""Reading a store across its archive: the segments its acts name, read as if their
events were still in place (``--archive DIR``, ``archive=`` in Python).

Under :func:`reading_archive`, every store opened read-only reads through an
:class:`ArchiveView`: ``Store.read``/``rows`` merge each segment's rows into the log in
position order, and ``stream_records`` adds a stream's archived events. A segment is
first checked against the act that named it: there (``missing``), readable, the one
named (its seal's name, span, count and root: not another act's segment, ``swapped``),
its events those the act took (each block of the full log's tree it recorded:
``altered``, naming the first position that differs) and, keyed, its MAC. One that
fails is a :class:`Finding` and is read as a gap, its blocks in place, so the rest of
the log still reads and proves.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from ..store.erased import erased_leaf
from ..store.erasing import erased_row
from ..store.gaps import (
    REMOVING_TOPICS,
    Act,
    Gap,
    erasures_of,
    gaps_of,
    history_acts,
)
from ..store.reading import READ_ACROSS
from ..store.recorded import Recorded
from ..store.store import Store
from ..store.transcoder import Row, decode_event
from .blocks import BlockBuilder, row_leaf
from .segments import read_segment, seal_mac

_PAGE = 10_000


@dataclass(frozen=True)
class Finding:
    """A segment that does not hold what its act recorded."""

    segment: str
    position: int | None
    message: str

    def __str__(self) -> str:
        where = f" at position {self.position}" if self.position is not None else ""
        return f"archive segment {self.segment}{where}: {self.message}"


class ArchiveWarning(UserWarning):
    """A segment read across that failed its check: read as a gap, its events left out."""


def archive_folder(folder: str | os.PathLike[str]) -> Path:
    """``archive=``'s folder, refused unless it is one (a typo would read every
    segment as missing)."""
    path = Path(folder)
    if not path.is_dir():
        raise InvalidArgument(
            f"archive={os.fspath(folder)!r}: not a folder (the one tasktrail archive --to filled)"
        )
    return path


class ArchiveView:
    """One store's archive folder, checked segment by segment on first use."""

    def __init__(self, store: Store, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.key = store.chain_key
        acts = history_acts(store)
        self.acts: list[Act] = [a for a in acts if a.topic in REMOVING_TOPICS]
        self.erasures = erasures_of(acts)
        self.findings: list[Finding] = []
        self._seen: dict[str, list[Row] | None] = {}
        self._stale: dict[str, tuple[int, int]] = {}  # copies made before an erasure: stat
        self._streams: list[set[str]] | None = None
        self._spans: dict[str, tuple[int, int]] = {}

    def renewed(self, store: Store) -> ArchiveView:
        """A view of the store's acts as they are now (a long-lived reader's, after an
        act), keeping each segment this one found good under the same act, unless an
        erasure came since (it may have made a copy stale): one act more costs its own
        segment's check, not the whole archive's again."""
        made = ArchiveView(store, self.folder)
        if made.erasures != self.erasures:
            return made
        before = {act.payload.get("segment"): act for act in self.acts}
        for act in made.acts:
            name = act.payload.get("segment")
            rows = self._seen.get(name) if isinstance(name, str) else None
            if rows is not None and before.get(name) == act:
                made._seen[str(name)] = rows
        return made

    def _checked(self) -> dict[str, list[Row]]:
        """The rows of every segment that holds what its act took, by segment name."""
        for act in self.acts:
            self._segment(act)
        return {name: rows for name, rows in self._seen.items() if rows is not None}

    def _segment(self, act: Act) -> list[Row] | None:
        """One act's segment, checked on first use (``None``: none good)."""
        name = act.payload.get("segment")
        if not isinstance(name, str):
            return None
        if name in self._stale and self._stale[name] != _stat(self.folder / name):
            # A copy made before an erasure, rewritten since (the erasure's own rewrite,
            # just after its act): read it again.
            del self._stale[name]
            self.findings = [f for f in self.findings if f.segment != name]
            del self._seen[name]
        if name not in self._seen:
            self._seen[name] = self._check(act, name)
        return self._seen[name]

    def _holding(self, stream_id: str) -> list[Act]:
        """The acts whose segments hold a stream's events (their stream lists, as sets)."""
        if self._streams is None:
            self._streams = [set(act.payload.get("streams") or ()) for act in self.acts]
        return [
            act for act, held in zip(self.acts, self._streams, strict=True) if stream_id in held
        ]

    def _check(self, act: Act, name: str) -> list[Row] | None:
        path = self.folder / name
        recorded: dict[str, Any] = act.payload.get("seal") or {}
        if not path.is_file():
            self._find(
                name,
                None,
                f"missing from {self.folder} (named by the act at position {act.position})",
            )
            return None
        try:
            read = read_segment(path)
        except Exception as error:  # whatever the file holds: a finding, never a crash
            self._find(name, None, f"unreadable: {error}")
            return None
        seal = read.seal or {}
        if seal.get("name") != name or seal.get("root") != recorded.get("root"):
            other = seal.get("name")
            said = f"it holds segment {other}" if other and other != name else "its seal"
            self._find(
                name,
                recorded.get("first"),
                f"{said} is not the one the act at "
                f"position {act.position} recorded: swapped or replaced",
            )
            return None
        mac = seal.get("mac")
        if (
            self.key is not None
            and mac is not None
            and not hmac.compare_digest(str(mac), seal_mac(seal, self.key))
        ):
            self._find(name, None, "its MAC does not match under the key: forged")
            return None
        blocks = [gap for gap in gaps_of([act])]
        problem = _differs(read.rows, blocks)
        if problem is not None:
            self._find(name, problem[0], problem[1])
            return None
        return self._erased_since(name, read.rows)

    def _erased_since(self, name: str, rows: list[Row]) -> list[Row]:
        """``rows`` with each row an erasure act named since the copy was made read as
        the act erased it (its values never served), and the copy a finding, read again
        once its file changed: an erasure rewrites its segments just after its act."""
        served: list[Row] = []
        for row in rows:
            position, stream_id, version, topic, state = row
            named = self.erasures.get(position)
            erased = None
            if named is not None and erased_leaf(bytes(state)) is None:
                erased = erased_row(position, stream_id, version, topic, bytes(state))
                if name not in self._stale:
                    self._stale[name] = _stat(self.folder / name)
                    self._find(
                        name,
                        position,
                        f"holds values the erasure act at position "
                        f"{named[0]} erased since: a copy made before it; erase again "
                        "with --archive to rewrite it",
                    )
            served.append(row if erased is None else (*row[:4], erased[0]))
        return served

    def rows_of(self, stream_id: str) -> dict[str, list[Row]]:
        """A stream's archived rows, by the segment that holds them."""
        found: dict[str, list[Row]] = {}
        for act in self._holding(stream_id):
            rows = [row for row in self._segment(act) or () if row[1] == stream_id]
            if rows:
                found.setdefault(str(act.payload["segment"]), []).extend(rows)
        return found

    def _find(self, name: str, position: Any, message: str) -> None:
        self.findings.append(
            Finding(name, position if isinstance(position, int) else None, message)
        )

    def gaps_left(self, gaps: list[Gap]) -> list[Gap]:
        """The gaps no good segment fills (a pruned act's, a failed segment's)."""
        good = self._checked()
        return [gap for gap in gaps if gap.segment not in good]

    def merge(
        self, pages: Iterator[list[Row]], after: int, until: int | None
    ) -> Iterator[list[Row]]:
        """The store's pages with every good segment's rows in place."""
        # Only the segments whose span meets the read: a follower's reads of the news
        # (after every archived position) touch no archived row.
        archived = sorted(
            (
                row
                for name, rows in self._checked().items()
                if rows and self._meets(name, rows, after, until)
                for row in rows
                if row[0] > after and (until is None or row[0] <= until)
            ),
            key=lambda row: row[0],
        )
        if not archived:
            yield from pages
            return
        index, page = 0, []
        for own in pages:
            for row in own:
                while index < len(archived) and archived[index][0] < row[0]:
                    page.append(archived[index])
                    index += 1
                page.append(row)
                if len(page) >= _PAGE:
                    yield page
                    page = []
        page.extend(archived[index:])
        if page:
            yield page

    def _meets(self, name: str, rows: list[Row], after: int, until: int | None) -> bool:
        """Whether a good segment's rows span any position in ``(after, until]``."""
        span = self._spans.get(name)
        if span is None:
            span = self._spans[name] = (min(r[0] for r in rows), max(r[0] for r in rows))
        return span[1] > after and (until is None or span[0] <= until)

    def stream(self, stream_id: str, records: list[Recorded]) -> list[Recorded]:
        """A stream's records with its archived events in place."""
        extra = []
        for act in self._holding(stream_id):
            for position, stream, version, topic, state in self._segment(act) or ():
                if stream == stream_id:
                    event = decode_event(topic, stream, state, position)
                    extra.append(Recorded(position, event, version))
        if not extra:
            return records
        return sorted([*records, *extra], key=lambda record: record.position)


def _differs(rows: list[Row], blocks: list[Gap]) -> tuple[int | None, str] | None:
    """Where a segment's rows stop being the events its act took, or ``None``."""
    expected = sum(gap.size for gap in blocks)
    if len(rows) != expected:
        return None, f"holds {len(rows)} events, its act took {expected}: cut or padded"
    builder = BlockBuilder()
    leaves = [leaf for gap in blocks for leaf in range(gap.first_leaf, gap.first_leaf + gap.size)]
    for (position, stream_id, version, topic, state), leaf in zip(rows, leaves, strict=True):
        builder.add(leaf, row_leaf(position, stream_id, version, topic, bytes(state)), position)
    for made, gap in zip(builder.done(), blocks, strict=False):
        if made.hash != gap.hash or (made.first, made.last) != (gap.first, gap.last):
            return made.first, (
                f"its events at positions {made.first}-{made.last} differ from those the act "
                "took: edited, removed, reordered or forged"
            )
    return None


def skipped_ranges(gaps: list[Gap], advice: str) -> str | None:
    """What a read that leaves the archived and pruned ranges out says of them, once:
    ``skipped archived ranges: positions 3-40, 52-60 (48 events, 2 segments; ADVICE)``
    (``None``: none)."""
    if not gaps:
        return None
    spans: list[list[int]] = []
    for gap in gaps:
        if spans and spans[-1][1] + 1 >= gap.first:
            spans[-1][1] = max(spans[-1][1], gap.last)
        else:
            spans.append([gap.first, gap.last])
    shown = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans[:5])
    more = f" and {len(spans) - 5} more" if len(spans) > 5 else ""
    segments = len({gap.segment for gap in gaps if gap.segment})
    events = sum(gap.size for gap in gaps)
    return (
        f"skipped archived ranges: positions {shown}{more} ({events} events, "
        f"{segments} segments; {advice})"
    )


@contextlib.contextmanager
def reading_archive(
    folder: str | os.PathLike[str] | None, store: Store | None = None
) -> Iterator[list[ArchiveView]]:
    """Within it, every store opened read-only reads across ``folder`` (``None``: as
    usual), and so does ``store`` if given (an open one); yields the views made, whose
    :attr:`ArchiveView.findings` say what failed."""
    views: list[ArchiveView] = []
    if folder is None:
        yield views
        return
    if store is not None:
        kept = store.archive
        store.archive = ArchiveView(store, folder)
        views.append(store.archive)
        try:
            with reading_archive(folder) as more:
                yield views
                views.extend(more)
        finally:
            store.archive = kept
        return

    def view(store: Store) -> ArchiveView:
        made = ArchiveView(store, folder)
        views.append(made)
        return made

    token = READ_ACROSS.set(view)
    try:
        yield views
    finally:
        READ_ACROSS.reset(token)


def findings(views: list[ArchiveView]) -> list[Finding]:
    """Each failed segment once, however many opens read it."""
    seen: dict[tuple[str, str], Finding] = {}
    for made in views:
        for found in made.findings:
            seen.setdefault((found.segment, found.message), found)
    return list(seen.values())


def warn_of(found: list[Finding], stacklevel: int = 2) -> None:
    """Each failed segment as an :class:`ArchiveWarning` (Python's ``--archive`` note)."""
    for finding in found:
        warnings.warn(str(finding), ArchiveWarning, stacklevel=stacklevel + 1)


def _stat(path: Path) -> tuple[int, int]:
    """A file's modification time and size (``(0, 0)``: gone), to see it rewritten."""
    try:
        found = path.stat()
    except OSError:
        return (0, 0)
    return (found.st_mtime_ns, found.st_size)


__all__ = [
    "ArchiveView",
    "ArchiveWarning",
    "Finding",
    "archive_folder",
    "findings",
    "reading_archive",
    "skipped_ranges",
    "warn_of",
]
