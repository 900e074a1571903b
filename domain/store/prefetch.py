"""Rows a PostgreSQL append brought back, kept for the read that follows it.

When another writer appended between the log position a scheduler's world holds and
the scheduler's own append, the scheduler folds those events and then its own, from
the store, in log order (``DecisionCycle._commit``: its indexes number tasks by log
order, and a snapshot of its world must equal the fold). The append function returns
the other writers' rows after that position, read under the table lock (so every one
is committed), before its own positions; with the append's own rows they are the
whole log from that position to the append's last, and that read costs no round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .transcoder import Row


class Prefetched:
    """The rows of one span of the log, ``(after, last]``, kept until the next read."""

    def __init__(self) -> None:
        self._after: int | None = None
        self._rows: list[Row] | None = None

    def keep(
        self,
        after: int | None,
        others: list[Row] | None,
        own: Sequence[Any],
        positions: Sequence[int],
    ) -> None:
        """Keep the rows after ``after``: ``others`` (``None``: not known, keep nothing),
        then the append's ``own`` stored events at ``positions``."""
        if after is None or others is None:
            self._rows = None
            return
        mine = [
            (position, str(r.originator_id), r.originator_version, r.topic, bytes(r.state))
            for position, r in zip(positions, own, strict=True)
        ]
        self._after, self._rows = after, [*others, *mine]

    def take(self, after: int, until: int | None) -> list[Row] | None:
        """The kept rows if they are exactly the log's ``(after, until]``; either way
        nothing is kept after (a later read must ask the store)."""
        rows, self._rows = self._rows, None
        if rows is None or after != self._after or not rows or rows[-1][0] != until:
            return None
        return rows
