"""An event's row with its values erased (the Retention issue's erasure): what
``erase`` writes in place of a row, and what a reader of an archive copy made before
an erasure serves instead of the values the erasure took (:mod:`.erased` says what an
erased row keeps)."""

from __future__ import annotations

import dataclasses
import hashlib
import typing
from typing import Any

import orjson

from ..tasks.events import EVENT_TYPES, TaskEvent
from .chain import seal, unseal
from .erased import erased_leaf, erased_mark
from .seals import leaf_hash

_VALUE_FIELDS: dict[type, tuple[str, ...]] = {}


def value_fields(cls: type[TaskEvent]) -> tuple[str, ...]:
    """The fields of an event class that hold any JSON value: what erasure nulls."""
    found = _VALUE_FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _VALUE_FIELDS[cls] = tuple(
            f.name for f in dataclasses.fields(cls) if hints.get(f.name) is Any
        )
    return found


def erased_row(
    position: int, stream_id: str, version: int, topic: str, state: bytes
) -> tuple[bytes, list[Any]] | None:
    """A row with its values erased and the act's entry for it; ``None`` when it holds
    none (or was erased before)."""
    cls = EVENT_TYPES.get(topic)
    if cls is None or erased_leaf(state) is not None:
        return None
    payload_bytes, digest = unseal(state)
    if digest is None:
        return None  # an unchained row: nothing to keep the chain with (verify says more)
    payload = orjson.loads(payload_bytes)
    fields = [name for name in value_fields(cls) if payload.get(name) is not None]
    if not fields:
        return None
    for name in fields:
        payload[name] = None
    leaf = leaf_hash(position, stream_id, version, topic, state)
    erased = seal(orjson.dumps(payload)[:-1] + erased_mark(leaf) + b"}", digest)
    entry = [
        position,
        stream_id,
        version,
        digest,
        leaf.hex(),
        hashlib.sha256(erased).hexdigest(),
        fields,
    ]
    return erased, entry


__all__ = ["erased_row", "value_fields"]
