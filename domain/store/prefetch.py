"""Rows an append wrote (and, on PostgreSQL, brought back), kept for the read that
follows it.

When another writer appended between the log position a scheduler's world holds and
the scheduler's own append, the scheduler folds those events and then its own, from
the store, in log order (``DecisionCycle._commit``: its indexes number tasks by log
order, and a snapshot of its world must equal the fold). PostgreSQL's append function
returns the other writers' rows after that position, read under the table lock (so
every one is committed), before its own positions; with the append's own rows they
are the whole log from that position to the append's last, and that read costs no
round trip. On SQLite an append whose rows follow that position is the whole log
after it too (no other writer's rows between): the seal of the snapshot a batch takes
as it exits hashes them from here, not from the file again.

The append's own rows are kept as the stored events it wrote, made into rows only
when a read takes them (an append no read follows pays for nothing), until a read
takes them or the log goes on; a batch drops them as it exits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from .transcoder import Row


class Kept(NamedTuple):
    """The rows of the log's ``(after, rows[-1][0]]``."""

    after: int
    rows: list[Row]


class Prefetched:
    """The rows of one span of the log, ``(after, last]``, kept until a read takes them
    or finds the log went on after them."""

    def __init__(self) -> None:
        # One tuple, set and read at once: a read never sees half of another append's.
        self._kept: tuple[int, list[Row], Sequence[Any], Sequence[int]] | None = None

    def keep(
        self,
        after: int | None,
        others: list[Row] | None,
        own: Sequence[Any],
        positions: Sequence[int],
    ) -> None:
        """Keep the rows after ``after``: ``others`` (``None``: not known, keep nothing
        unless ``positions`` follow ``after``), then the append's ``own`` stored events
        at ``positions``."""
        if others is None and after is not None and positions and positions[0] == after + 1:
            others = []  # SQLite's rows right after ``after``: nobody else's came between
        if after is None or others is None or not positions:
            self._kept = None
        else:
            self._kept = (after, others, own, positions)

    def take(self, after: int, until: int | None) -> Kept | None:
        """The kept rows if they end the log's ``(after, until]``, from ``after`` or a
        later position (the read takes what comes before them from the store). A read
        of what follows them leaves them kept (the store drops them once such a read
        finds a row: the log went on, and an erasure rewrites rows in place); any
        other read takes them, or drops them when they do not end it."""
        kept = self._kept
        if kept is None or after >= kept[3][-1]:
            return None
        self.drop()
        kept_after, others, own, positions = kept
        if after > kept_after or positions[-1] != until:
            return None
        mine = [
            (position, str(r.originator_id), r.originator_version, r.topic, bytes(r.state))
            for position, r in zip(positions, own, strict=True)
        ]
        return Kept(kept_after, [*others, *mine])

    def drop(self) -> None:
        """Keep nothing."""
        self._kept = None

    def pages(
        self,
        selected: Callable[[int, int | None], Iterator[list[Row]]],
        after: int,
        until: int | None,
    ) -> Iterator[list[Row]]:
        """The log's ``(after, until]`` in pages: the kept rows where they end it, the
        rest from ``selected`` (the store's read)."""
        kept = self.take(after, until)
        if kept is None:
            for page in selected(after, until):
                if page:
                    self.drop()  # the log went on: kept rows may be rewritten (an erasure)
                yield page
            return
        if after < kept.after:
            yield from selected(after, kept.after)
        yield kept.rows
