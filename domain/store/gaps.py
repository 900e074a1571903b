"""What left the store and stays proven: the gaps that archive and prune acts leave in
its log, as the full log's Merkle tree sees them.

A seal commits to every event ever appended, in log order (:mod:`.seals`). An archive
or prune act (the Retention issue, :mod:`tasktrail.domain.retention`) deletes the
rows of finished task trees, and records, on the one stream :data:`HISTORY_STREAM`,
the *blocks* they were in that tree: each an aligned perfect subtree of the full log
(``size`` leaves from leaf ``first_leaf``, a power of two aligned to itself) with its
hash and the positions of its first and last event. A tree built over the rows the
store still holds, with each block added in its place (:meth:`.seals.LogTree.add_block`),
is the tree of the whole log: seals taken before and after an act agree, and every
reader that builds one (``seal``, snapshots, ``export``, ``verify --seals``) reads
the rows with :func:`rows_and_gaps`. Read across an archive (``--archive``), a
segment's own rows take the place of its blocks.

Reading the acts is one indexed read of their stream; their payloads are parsed here
as JSON (the store room does not import the retention room's classes). A read of the
rows after a position past every gap (a keeper's or a follower's next rows) reads no
act: each store object keeps the last position any act's blocks begin at, and reads
only the act rows appended since it last looked (acts are only ever appended), so a
keeper that acts every second on a store with years of acts reads one row an act.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .chain import as_bytes, unseal
from .transcoder import Row

if TYPE_CHECKING:
    from .store import Store

HISTORY_STREAM = "history:acts"
"""The stream of every archive, prune and erasure act of a store, in act order."""
ARCHIVED_TOPIC = "tasktrail.HistoryArchived"
PRUNED_TOPIC = "tasktrail.HistoryPruned"
ERASED_TOPIC = "tasktrail.HistoryErased"
REMOVING_TOPICS = (ARCHIVED_TOPIC, PRUNED_TOPIC)


@dataclass(frozen=True)
class Gap:
    """One block of the full log's tree whose events left the store."""

    first_leaf: int
    size: int
    first: int
    """The position of its first event."""
    last: int
    """The position of its last event."""
    hash: bytes
    act: int
    """The position of the act that took it."""
    segment: str | None
    """The segment file that holds its events (``None``: pruned)."""


@dataclass(frozen=True)
class Act:
    """An archive, prune or erasure act as its stream records it (raw)."""

    position: int
    version: int
    topic: str
    payload: dict[str, Any]


def history_acts(store: Store) -> list[Act]:
    """The acts of a store's history stream, in order (one indexed read)."""
    return _acts(store.stream_rows(HISTORY_STREAM))


def _acts(rows: list[tuple[int, int, str, bytes]]) -> list[Act]:
    """The acts of rows of the history stream, each parsed."""
    acts = []
    for position, version, topic, state in rows:
        payload, _ = unseal(bytes(state))
        try:
            parsed = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue  # verify reports the row; no gap is made of it
        if isinstance(parsed, dict):
            acts.append(Act(position, version, topic, parsed))
    return acts


def history_version(store: Store) -> int:
    """How many acts the history stream holds (one indexed look, no act read)."""
    recorder: Any = store.app.recorder
    if store.kind == "sqlite":
        found = recorder._select(
            f"SELECT max(originator_version) FROM {recorder.events_table_name} "
            "WHERE originator_id = ?",
            (HISTORY_STREAM,),
        )
        return int(found[0][0] or 0)
    with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
        curs.execute(
            f"SELECT max(originator_version) AS v FROM {recorder._table} WHERE originator_id = %s",
            (HISTORY_STREAM,),
        )
        return int(curs.fetchone()["v"] or 0)


def gaps_of(acts: list[Act]) -> list[Gap]:
    """The blocks every archive and prune act took, in log order."""
    gaps = []
    for act in acts:
        if act.topic not in REMOVING_TOPICS:
            continue
        segment = act.payload.get("segment")
        for block in act.payload.get("blocks") or ():
            try:
                first_leaf, size, first, last, value = block
                gaps.append(
                    Gap(
                        int(first_leaf),
                        int(size),
                        int(first),
                        int(last),
                        bytes.fromhex(value),
                        act.position,
                        segment if isinstance(segment, str) else None,
                    )
                )
            except (TypeError, ValueError):
                continue  # not a block any act wrote: verify reports the act
    gaps.sort(key=lambda gap: gap.first)
    return gaps


def erasures_of(acts: list[Act]) -> dict[int, tuple[int, list[Any]]]:
    """The rows every erasure act names, by position: the act's position, its entry."""
    named: dict[int, tuple[int, list[Any]]] = {}
    for act in acts:
        if act.topic == ERASED_TOPIC:
            for entry in act.payload.get("entries") or ():
                if isinstance(entry, list) and entry and isinstance(entry[0], int):
                    named.setdefault(entry[0], (act.position, entry))
    return named


def store_gaps(store: Store) -> list[Gap]:
    """The gaps a store's log holds now: none read across an archive for the segments
    it found whole (their rows are read in place instead)."""
    gaps = gaps_of(history_acts(store))
    across = getattr(store, "archive", None)
    return across.gaps_left(gaps) if across is not None and gaps else gaps


@dataclass
class _Looked:
    """What a store object saw of its history stream: up to which version, and the
    last position at which a block of an act of it begins (0: none)."""

    version: int = 0
    last_first: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


_LOOKED: weakref.WeakKeyDictionary[Store, _Looked] = weakref.WeakKeyDictionary()
_MAKING = threading.Lock()


def _last_gap_first(store: Store) -> int:
    """The last position at which a gap of the store's log begins (0: none), from the
    act rows appended since this store object last looked (see the module docstring)."""
    with _MAKING:
        looked = _LOOKED.get(store)
        if looked is None:
            looked = _LOOKED[store] = _Looked()
    with looked.lock:
        version = history_version(store)
        if version < looked.version:  # another log under this store object now: anew
            looked.version = looked.last_first = 0
        if version > looked.version:
            rows = store.stream_rows(HISTORY_STREAM, after=looked.version)
            looked.version = max([looked.version, *(row[1] for row in rows)])
            for gap in gaps_of(_acts(rows)):
                looked.last_first = max(looked.last_first, gap.first)
        return looked.last_first


def rows_and_gaps(
    store: Store, after: int = 0, until: int | None = None, gaps: list[Gap] | None = None
) -> Iterator[Row | Gap]:
    """The store's rows after ``after`` (up to ``until``), with each gap in its place
    (a gap whose events begin after ``after`` and end by ``until``)."""
    if gaps is None and after >= _last_gap_first(store):
        pending: list[Gap] = []  # every gap begins at or before ``after``: none is read
    else:
        pending = [
            gap
            for gap in (store_gaps(store) if gaps is None else gaps)
            if gap.first > after and (until is None or gap.last <= until)
        ]
    index = 0
    for row in store.rows(after=after, until=until):
        while index < len(pending) and pending[index].first < row[0]:
            yield pending[index]
            index += 1
        yield row
    yield from pending[index:]


def add_to(tree: Any, item: Row | Gap) -> None:
    """Add a row, or a gap's block, to a :class:`.seals.LogTree` (or anything with its
    ``add`` and ``add_block``)."""
    if isinstance(item, Gap):
        tree.add_block(item.size, item.hash, item.first, item.last)
        return
    position, stream_id, version, topic, state = item
    tree.add(position, stream_id, version, topic, as_bytes(state))


__all__ = [
    "ARCHIVED_TOPIC",
    "ERASED_TOPIC",
    "HISTORY_STREAM",
    "PRUNED_TOPIC",
    "Act",
    "Gap",
    "add_to",
    "erasures_of",
    "gaps_of",
    "history_acts",
    "history_version",
    "rows_and_gaps",
    "store_gaps",
]
