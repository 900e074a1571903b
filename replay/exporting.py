"""``export``: a store's log as a JSONL file (the format :mod:`.log` describes), its
stream heads and its seal last, written to a temporary file renamed into place."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import orjson

from tasktrail.domain import CorruptEvent, Store, open_store
from tasktrail.domain.commands.sealing import seal_of
from tasktrail.domain.store.chain import as_bytes, unseal
from tasktrail.domain.store.files import atomic_output
from tasktrail.domain.store.gaps import Gap, rows_and_gaps
from tasktrail.domain.store.seals import LogTree
from tasktrail.domain.store.transcoder import row_problem

from .across_archive import ArchiveArg, across_archive


def export(
    store: Store | str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    chain_key: bytes | str | None = None,
    archive: ArchiveArg = None,
) -> int:
    """Write a store's whole log to a JSONL file, its heads and its seal last (MAC'd
    under ``chain_key`` when the store is keyed); returns how many events.

    The file is written beside ``path`` under a temporary name and renamed into
    place once complete: a failure leaves ``path`` as it was. ``archive``: the store's
    archive folder, its events written in place (without it, an archived range is
    left out and only its blocks keep the seal whole).
    """
    with across_archive(archive, store):
        return _export(store, path, chain_key)


def _export(
    store: Store | str | os.PathLike[str],
    path: str | os.PathLike[str],
    chain_key: bytes | str | None,
) -> int:
    opened = (
        store
        if isinstance(store, Store)
        else open_store(store, read_only=True, chain_key=chain_key)
    )
    tree, last, lines = LogTree(), b"{}", 0
    heads: dict[str, list[Any]] = {}
    try:
        with atomic_output(path) as out:
            for item in rows_and_gaps(opened):
                if isinstance(item, Gap):  # archived: its block keeps the seal whole
                    tree.add_block(item.size, item.hash, item.first, item.last)
                    continue
                position, originator_id, version, topic, state = item
                problem = row_problem(originator_id, version, topic, state)
                if problem is not None:
                    raise CorruptEvent(position, problem)
                out.write(_line(position, topic, originator_id, version, state))
                lines += 1
                last = as_bytes(state)
                tree.add(position, originator_id, version, topic, last)
                heads[originator_id] = [version, unseal(last)[1]]
            trailer = {"heads": heads, "events": lines, "chained_after": opened.chained_after}
            out.write(orjson.dumps(trailer) + b"\n")
            # Its last event's time and no snapshot: the seal is as byte-stable as the rest.
            sealed = seal_of(opened, tree, at=_time_of(last), snapshots=False)
            out.write(sealed.to_json().encode() + b"\n")
    finally:
        if opened is not store:
            opened.close()
    return lines


def _time_of(state: bytes) -> datetime:
    at = orjson.loads(state).get("at")
    return datetime.fromtimestamp(at / 1000 if isinstance(at, int | float) else 0, UTC)


def _line(position: int, topic: str, originator_id: str, version: int, state: bytes) -> bytes:
    try:
        payload = orjson.loads(state)
    except orjson.JSONDecodeError:
        raise CorruptEvent(position, "stored state is not JSON") from None
    if not isinstance(payload, dict):  # as decode_payload refuses it, so a reader would
        raise CorruptEvent(position, f"{topic} of task {originator_id}: payload is not an object")
    row = {
        "position": position,
        "topic": topic,
        "originator_id": str(originator_id),
        "originator_version": version,
        "at": payload.get("at"),
        "payload": payload,
    }
    try:
        return orjson.dumps(row) + b"\n"
    except TypeError as error:  # a string the store holds that is not UTF-8
        raise CorruptEvent(position, f"cannot be written as JSON: {error}") from None


__all__ = ["export"]
