"""Taking a seal of a store (:mod:`..store.seals`): one read of its rows, the tree's
root and peaks, the marker and the latest snapshot as they are, a MAC when keyed.
``Scheduler.seal()`` and ``tasktrail seal`` both take theirs here."""

from __future__ import annotations

from datetime import datetime

from ..errors import CorruptEvent
from ..history import SnapshotTable
from ..history.sealed import seal_marker
from ..store.gaps import Gap, add_to, rows_and_gaps
from ..store.seals import LogTree, Seal, make_seal
from ..store.store import Store
from ..store.transcoder import row_problem


def take_seal(store: Store, *, until: int | None = None, at: datetime | None = None) -> Seal:
    """The seal of a store's log up to ``until`` (default: its head as it is now)."""
    head = store.head() if until is None else until
    tree = LogTree()
    for item in rows_and_gaps(store, until=head):  # what archives took: their blocks
        if not isinstance(item, Gap):
            problem = row_problem(item[1], item[2], item[3], item[4])
            if problem is not None:  # a row no writer wrote: verify says more
                raise CorruptEvent(item[0], f"{problem}; no seal taken")
        try:
            add_to(tree, item)
        except ValueError as error:  # a block out of line: rows removed, verify says more
            raise CorruptEvent(item.first if isinstance(item, Gap) else None, str(error)) from None
    return seal_of(store, tree, at=at)


def seal_of(
    store: Store, tree: LogTree, *, at: datetime | None = None, snapshots: bool = True
) -> Seal:
    """The seal of a tree built over a store's rows (an export builds one as it writes,
    leaving out the snapshot, which an import does not carry)."""
    positions = [p for p in SnapshotTable(store).positions() if p <= tree.position]
    snapshot = max(positions) if positions and snapshots else None
    return make_seal(tree, seal_marker(store), key=store.chain_key, snapshot=snapshot, at=at)


__all__ = ["seal_marker", "seal_of", "take_seal"]
