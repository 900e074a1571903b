"""What the snapshot trust tests share (tests/test_snapshot_trust.py and
tests/test_snapshot_trust_resealed.py, issue 30 item 3): rewriting a snapshot row's
body, and editing its world then sealing it again with a good digest and heads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from tasktrail.domain import open_store
from tasktrail.domain.history import SnapshotTable, open_body, snapshot_body
from tasktrail.domain.history.codec import world_from


def _rewrite(location: str, position: int, body: bytes) -> None:
    with open_store(location) as store:
        table = SnapshotTable(store)
        mark = "%s" if location.startswith("postgresql") else "?"
        with table._cursor(commit=True) as cursor:
            cursor.execute(
                f"UPDATE {table._table} SET body = {mark} WHERE position = {mark}", (body, position)
            )


def _edit_world(location: str, position: int, edit: Callable[[Any], None]) -> None:
    """Edit the world's JSON inside the snapshot and seal it again with a good digest
    and heads (as someone who knows the scheme would): only the typed decode and the
    checks of its parts stand in the way."""
    with open_store(location) as store:
        data, _ = open_body(SnapshotTable(store).at(position).body)  # type: ignore[union-attr]
        world = world_from(data)
        edit(data)
        body = snapshot_body(store, world, position, orjson.dumps(data).replace(b'"DEEP"', DEEP))
    _rewrite(location, position, body)


DEEP = b"[" * 900 + b"1" + b"]" * 900
