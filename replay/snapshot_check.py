"""``verify``'s check of a store's snapshots: each must equal the fold at its position.

A snapshot is derived data (:mod:`tasktrail.domain.history`): the scheduler opens
from the latest one that passes its checks, so ``verify`` folds the log from position 0
and, passing each snapshot's position, compares the snapshot with the fold
compacted the same way, and its recorded heads with the log. One that differs, or
cannot be read, is a violation named by its position. One of another format (an
earlier release's) is no violation: opening passes over it, so it is only noted in
:attr:`SnapshotWatch.outdated` (the next snapshot written drops it). The check only
reads: it never drops a snapshot.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from tasktrail.domain import Store, open_store
from tasktrail.domain.history import FORMAT, SnapshotTable, snapshot_differs
from tasktrail.domain.history.envelope import keyed_snapshot
from tasktrail.domain.store.gaps import gaps_of, history_acts
from tasktrail.domain.store.store import Recorded

from .state import SchedulerState


class SnapshotWatch:
    """Wraps a fold's records; :attr:`problems` are the snapshots that differ."""

    def __init__(
        self, source: str | os.PathLike[str] | Store, chain_key: bytes | str | None = None
    ) -> None:
        self.source = source
        self.chain_key = chain_key
        """A keyed store's key: its snapshots' digests are HMACs under it."""
        self.problems: list[tuple[int, str]] = []
        self.outdated: dict[int, int] = {}
        """The positions of the snapshots of another format, and each one's format."""
        self.checked = 0
        self.unkeyed = 0
        """Snapshots of a keyed store left unchecked: no key was given."""
        self._store: Store | None = None
        self._archived: int | None = None

    def __call__(self, records: Iterator[Recorded], state: SchedulerState) -> Iterator[Recorded]:
        # One read-only open of the store for the whole fold, not one per snapshot.
        source = self.source
        store = (
            source
            if isinstance(source, Store)
            else open_store(source, read_only=True, chain_key=self.chain_key)
        )
        try:
            table = SnapshotTable(store)
            self._store = store
            pending = table.positions()
            for recorded in records:
                while pending and pending[0] < recorded.position:
                    self._check(table, pending.pop(0), state)
                yield recorded
            head: int | None = None
            for position in pending:
                if position <= state.position:
                    self._check(table, position, state)
                    continue
                if head is None:
                    head = store.head()
                # Past what this fold read but not past the log as it stands: a writer
                # appended, then snapshotted, while the fold read (its read began
                # first). Not this check's to judge; the next verify checks it.
                if position > head:
                    self.problems.append((position, "it is past the log's end"))
        finally:
            if store is not source:
                store.close()

    def _check(self, table: SnapshotTable, position: int, state: SchedulerState) -> None:
        stored = table.at(position)
        if stored is None:
            return
        if stored.format != FORMAT:
            self.outdated[position] = stored.format
            return
        assert self._store is not None
        if keyed_snapshot(self._store, position) and self._store.chain_key is None:
            self.unkeyed += 1  # its digest is an HMAC under a key not given: unchecked
            return
        self.checked += 1
        if self._archived is None:  # the first events any archive or prune act took
            gaps = gaps_of(history_acts(self._store))
            self._archived = min((gap.first for gap in gaps), default=0)
        archived = 0 < self._archived < position  # counted apart, with the archive or not
        differs = snapshot_differs(
            state.held.copy(to_compact=True),
            stored.body,
            self._store,
            position,
            archived=archived,
        )
        if differs is not None:
            self.problems.append((position, differs))


def outdated_note(outdated: dict[int, int]) -> list[str]:
    """One line for the snapshots of another format, however many."""
    if not outdated:
        return []
    formats = ", ".join(str(f) for f in sorted(set(outdated.values())))
    where = sorted(outdated)
    span = f"position {where[0]}" if len(where) == 1 else f"positions {where[0]} to {where[-1]}"
    return [
        f"{len(where)} snapshot(s) at {span} of format {formats}, not {FORMAT} (another "
        "release's fold): opening passes over them; `tasktrail snapshot STORE` takes a "
        "current one, which drops them"
    ]
