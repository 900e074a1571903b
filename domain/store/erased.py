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

from .chain import _SUFFIX

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


__all__ = ["ERASED_KEY", "erased_leaf", "erased_mark"]
