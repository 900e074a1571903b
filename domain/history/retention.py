"""Which snapshots a store keeps: the newest two, and older ones at a geometric spacing.

A service runs for months, and a writer takes a snapshot every so many events and at
each close: kept all, the table would grow with the history. It is kept bounded instead,
each time a snapshot is written (:meth:`.table.SnapshotTable.write`, in the same
transaction), by :func:`superseded`. Opening a store reads only the newest snapshot;
``replay --until P`` and a projector resuming at ``P`` read the newest at or before
``P``, so the older ones are kept where they still save a fold. Measured back from the
newest, a kept snapshot is at most twice as far back as the next newer one kept wherever
one between them was dropped, so replaying to a position ``D`` events before the newest
snapshot folds at most ``D`` events after the one it starts from (or the spacing the
writers took, when that is more); and each kept snapshot is more than twice as far back
as the one two places newer, so the table holds never more than ``2 * log2(head) + 3``
snapshots (``head``: the newest one's position), in practice a few more than
``log2(head / snapshot_every)``: 15 after a thousand snapshots taken evenly, 22 after a
hundred thousand.

The rule is a pure function of the positions, so every writer of a fleet prunes alike;
``verify`` checks each snapshot that is kept and never deletes one (it opens read-only).
"""

from __future__ import annotations

from collections.abc import Iterable

KEEP_NEWEST = 2
"""The newest snapshots always kept: opening reads the newest, and passes over it to the
one before when it cannot be read."""

SPACING = 2
"""How many times as far back from the newest a snapshot may be as the nearest newer one
kept, where the ones between them are dropped."""


def superseded(positions: Iterable[int]) -> list[int]:
    """Of the snapshots of the format this release reads, at ``positions``, those no
    longer worth keeping, oldest first.

    From the newest down, a snapshot is dropped when the next older one (or position 0,
    where a fold starts with no snapshot) is at most :data:`SPACING` times as far back
    from the newest as the nearest newer snapshot kept: a replay to any position between
    the two then folds no more than it is far back. Dropping keeps that true as the log
    grows (both distances grow by the same number of events), so the rule can run at
    every write with what earlier writes left.
    """
    newest_first = sorted(set(positions), reverse=True)
    if len(newest_first) <= KEEP_NEWEST:
        return []
    head = newest_first[0]
    newer = newest_first[KEEP_NEWEST - 1]  # the nearest newer snapshot kept
    dropped: list[int] = []
    for index in range(KEEP_NEWEST, len(newest_first)):
        position = newest_first[index]
        older = newest_first[index + 1] if index + 1 < len(newest_first) else 0
        if head - older <= SPACING * (head - newer):
            dropped.append(position)
        else:
            newer = position
    return sorted(dropped)
