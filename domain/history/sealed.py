"""The seal a snapshot records: a commitment to the whole log up to its position
(:mod:`..store.seals`, the tree ``tasktrail seal`` takes), kept in the snapshot's
body beside its world and heads (issue 30: snapshots and exports record the seal of
their position), so that ``verify`` can hold the log to each snapshot's seal as to a
seal kept outside.

The tree is not hashed from position 0 for every snapshot: a snapshot's seal resumes
from the latest earlier snapshot whose body passes its digest and that records a
seal (its peaks), and hashes only the rows after it, about a writer's spacing of
them. The first snapshot of a store, or the first after an earlier release's, reads
the log from its start once. A resumed seal is derived data like the rest of a
snapshot: one resumed from a false seal is caught by ``verify``, which builds the
tree from position 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from ..store.gaps import add_to, rows_and_gaps
from ..store.keys import KEYED_MAC_KEY
from ..store.seals import LogTree, Seal, make_seal, parse_seal
from .codec import SnapshotUnreadable
from .envelope import body_key, open_body
from .table import FORMAT, SnapshotTable

if TYPE_CHECKING:
    from ..store.store import Store


def seal_marker(store: Store) -> dict[str, Any]:
    """What a seal records of a store's marker."""
    return {
        "format": store.format,
        "chained_after": store.chained_after,
        "keyed_after": store.keyed_after,
        "key_id": store.key_id,
        "keyed_mac": store.marker.get(KEYED_MAC_KEY),
    }


def seal_upto(store: Store, position: int) -> Seal:
    """The seal of ``store``'s log up to ``position``, resumed from the latest earlier
    snapshot's seal (see the module docstring)."""
    tree = LogTree()
    table = SnapshotTable(store)
    for earlier in sorted((p for p in table.positions() if p < position), reverse=True):
        stored = table.at(earlier)
        if stored is None or stored.format != FORMAT:
            continue
        seal = recorded_seal(stored.body, body_key(store, earlier))
        if seal is not None and seal.position <= earlier:
            tree = LogTree.resume(seal)
            break
    for item in rows_and_gaps(store, after=tree.position, until=position):
        add_to(tree, item)  # a row, or the block of events an archive took
    return make_seal(tree, seal_marker(store), key=store.chain_key)


def recorded_seal(body: bytes, key: bytes | None) -> Seal | None:
    """The seal a snapshot's body records, once the body passes its digest; ``None``
    for one that records none (an earlier format), fails its digest or holds a seal
    that is not one."""
    try:
        open_body(body, key)
        whole = orjson.loads(body)
    except (SnapshotUnreadable, orjson.JSONDecodeError):
        return None
    found = whole.get("seal") if isinstance(whole, dict) else None
    if found is None:
        return None
    try:
        return parse_seal(orjson.dumps(found), "a snapshot's seal")
    except Exception:  # a seal no writer made: derived data, passed over
        return None
