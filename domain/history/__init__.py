"""Snapshots: a world saved as of a log position, so that opening a store, replaying
to a position or resuming a projector folds only the events after it.

:mod:`.codec` turns a world into bytes and back, :mod:`.table` keeps them in the
store's database (about a writer's spacing apart, however often one is written; an
earlier format's below one of this format is dropped), :mod:`.restore` builds a
world from the latest good snapshot and the events after it; :mod:`.envelope` seals a
body with the chain heads of the streams it holds and its digest, :mod:`.typecheck`
and :mod:`.coherence` hold what it decodes to the types and the agreement a fold
gives. A snapshot is derived data, never the truth: one that fails a check is
reported and passed over, and ``tasktrail verify`` checks each against the fold.
"""

from .codec import SnapshotUnreadable, decode_world, encode_world
from .envelope import open_body
from .restore import (
    DEFAULT_EVERY,
    Restored,
    failing,
    restore,
    snapshot_body,
    snapshot_differs,
    stream_loader,
    take_snapshot,
)
from .table import FORMAT, KeptSnapshot, SnapshotTable, StoredSnapshot, redundant

__all__ = [
    "DEFAULT_EVERY",
    "FORMAT",
    "KeptSnapshot",
    "Restored",
    "SnapshotTable",
    "SnapshotUnreadable",
    "StoredSnapshot",
    "decode_world",
    "encode_world",
    "failing",
    "open_body",
    "redundant",
    "restore",
    "snapshot_body",
    "snapshot_differs",
    "stream_loader",
    "take_snapshot",
]
