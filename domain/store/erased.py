"""An erased event, as its row keeps it (the Retention issue's erasure).

Erasure takes the values a person may ask to have forgotten out of an event's stored
payload and keeps what the proofs need: the digest its stream's chain holds (still the
last key, :mod:`.chain`), and, as the key before it, the leaf hash the full log's tree
had for the event (:mod:`.seals`), so every seal taken before or after the erasure
still folds to the same root::

    {...fields, values null..., "timestamp": ..., "erased": {"leaf": "<64 hex>"}, "digest": ...}

The erasure act (``HistoryErased``) records each erased row's digest, leaf and the
SHA-256 of its new stored bytes: ``verify`` holds each erased row to it, and reports the
row as erased, never as an edit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import orjson

_SUFFIX = len(b',"digest":"') + 64 + 2  # the digest's key and value at a row's end (.chain)

ERASED_KEY = "erased"
_MARK = b',"erased":{"leaf":"'
_TAIL = len(_MARK) + 64 + 2  # the mark, the leaf in hex, '"}'
_HEX_DIGITS = frozenset(b"0123456789abcdef")


def erased_leaf(state: bytes) -> bytes | None:
    """The leaf hash an erased row keeps, or ``None`` for a row not erased."""
    end = len(state) - _SUFFIX  # where the digest's key begins
    start = end - _TAIL
    if start < 1 or state[start : start + len(_MARK)] != _MARK:
        return None
    leaf = state[start + len(_MARK) : start + len(_MARK) + 64]
    if state[start + len(_MARK) + 64 : end] != b'"}' or not _HEX_DIGITS.issuperset(leaf):
        return None
    return bytes.fromhex(leaf.decode("ascii"))


def erased_mark(leaf: bytes) -> bytes:
    """The bytes an erased payload ends with, before its closing brace."""
    return _MARK + leaf.hex().encode("ascii") + b'"}'


class ErasureMatch:
    """Holds each erased row (or a row an erasure act names) to the act's entry, for
    :class:`.chain.ChainCheck`: the same digest, leaf and stored bytes, or a finding."""

    def __init__(
        self,
        erasures: dict[int, tuple[int, list[Any]]],
        problem: Callable[[int | None, str, str], None],
    ) -> None:
        self.erasures = erasures
        self.notes: list[str] = []
        self.vouched = 0
        """Erased rows held to their act and found as it recorded them."""
        self._problem = problem
        self._rows: dict[int, tuple[str, str | None, bytes | None, str]] = {}

    def act(self, position: int, payload: bytes) -> None:
        """An erasure act read: its entries, and what it took in words."""
        try:
            act = orjson.loads(payload)
            entries = [e for e in act.get("entries") or () if isinstance(e, list) and e]
        except (orjson.JSONDecodeError, AttributeError, TypeError):
            return  # its digest says it was edited
        for entry in entries:
            self.erasures.setdefault(int(entry[0]), (position, entry))
            self._match(int(entry[0]))
        who = f" by {act.get('actor')}" if act.get("actor") else ""
        why = f": {act.get('why')}" if act.get("why") else ""
        self.notes.append(
            f"position {position}: {len(entries)} events of the tree of {act.get('tree')} "
            f"erased{who} at {act.get('at')}{why}"
        )

    def row(
        self, position: int, stream_id: str, found: str | None, leaf: bytes | None, state: bytes
    ) -> None:
        """A row erased, or named by an act: matched now, or when its act is read."""
        self._rows[position] = (stream_id, found, leaf, hashlib.sha256(state).hexdigest())
        self._match(position)

    def _match(self, position: int) -> None:
        row, named = self._rows.get(position), self.erasures.get(position)
        if row is None or named is None:
            return
        del self._rows[position]
        stream_id, found, leaf, hashed = row
        act, entry = named
        if leaf is None:
            self._problem(
                position,
                stream_id,
                f"holds the values the erasure act at position {act} erased: a copy made "
                "before the erasure (an archive segment or an export), or values put back",
            )
        elif [found, leaf.hex(), hashed] != list(entry[3:6]):
            self._problem(
                position,
                stream_id,
                f"is not the erased event the erasure act at position {act} recorded: "
                "edited after its erasure",
            )
        else:
            self.vouched += 1  # its stream's chain goes on from the digest it kept

    def finish(self) -> None:
        """The rows marked erased that no erasure act names."""
        for position, (stream_id, _, leaf, _) in sorted(self._rows.items()):
            if leaf is not None:
                self._problem(
                    position,
                    stream_id,
                    "is marked erased, but no erasure act names it: its values were "
                    "removed by hand, or the mark forged",
                )
        self._rows.clear()


__all__ = ["ERASED_KEY", "ErasureMatch", "erased_leaf", "erased_mark"]
