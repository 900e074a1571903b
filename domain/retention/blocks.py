"""The blocks an act records: where the events it takes sat in the full log's tree.

Each event is a leaf of the log's RFC 6962 tree (:mod:`..store.seals`), numbered from 0
in log order over every event ever appended. The events one act takes form runs of
consecutive leaves; each run splits into aligned perfect subtrees (a power of two of
leaves, starting at a multiple of itself, as large as fits), and each becomes a block
``(first_leaf, size, first position, last position, hash)``. A tree over the rows left
with each block added in its place is the full log's tree (:mod:`..store.gaps`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..store.erased import erased_leaf
from ..store.seals import leaf_hash, node_hash


@dataclass(frozen=True)
class Block:
    """One aligned perfect subtree of the full log's tree."""

    first_leaf: int
    size: int
    first: int
    last: int
    hash: bytes


def row_leaf(position: int, stream_id: str, version: int, topic: str, state: bytes) -> bytes:
    """A row's leaf in the full log's tree (an erased row's, the one it keeps)."""
    return erased_leaf(state) or leaf_hash(position, stream_id, version, topic, state)


def subtree(leaves: list[bytes]) -> bytes:
    """The RFC 6962 hash of a perfect subtree over ``leaves`` (a power of two of them)."""
    level = leaves
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0] if level else hashlib.sha256(b"").digest()


class BlockBuilder:
    """Leaves in, blocks out: :meth:`add` each taken event's leaf in log order."""

    def __init__(self) -> None:
        self._blocks: list[Block] = []
        self._run: list[tuple[bytes, int]] = []
        self._start = 0

    def add(self, leaf_index: int, leaf: bytes, position: int) -> None:
        """The next taken event: its leaf's number, its leaf, its position."""
        if self._run and leaf_index != self._start + len(self._run):
            self._close()
        if not self._run:
            self._start = leaf_index
        self._run.append((leaf, position))

    def _close(self) -> None:
        run, at = self._run, self._start
        offset = 0
        while offset < len(run):
            index = at + offset
            size = index & -index if index else 1 << (len(run) - offset).bit_length()
            while size > len(run) - offset:
                size //= 2
            part = run[offset : offset + size]
            self._blocks.append(
                Block(index, size, part[0][1], part[-1][1], subtree([leaf for leaf, _ in part]))
            )
            offset += size
        self._run = []

    def done(self) -> list[Block]:
        """Every block, in log order."""
        if self._run:
            self._close()
        return self._blocks


__all__ = ["Block", "BlockBuilder", "row_leaf", "subtree"]
