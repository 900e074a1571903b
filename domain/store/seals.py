"""Seals: one JSON line that commits to the whole log up to a position, kept elsewhere.

A seal is what a certificate-transparency log calls a signed tree head: the root of
a Merkle tree over every event in log order, with the tree's size (``count``), the
position of its last event, the time it was taken and, for a keyed store, a MAC
under the chain key. The tree hashes as RFC 6962 does (SHA-256; a leaf is
``0x00 || leaf``, a node ``0x01 || left || right``, split at the largest power of
two below the size), and a leaf is one event: its position, version, stream, topic
and stored state (its payload and digest) with their lengths, so no byte of a
sealed event can change, move or go without changing the root.

A seal also carries the tree's *peaks*, the roots of the perfect subtrees its size
splits into (at most one per bit of ``count``). They fold into the root, they let a
later seal be checked as an extension of this one from the events between them
alone, and they tell ``verify --seals`` which stretch of the log stopped agreeing:
the first peak that differs bounds the first difference. The seal records the
store's marker as it was (format, ``chained_after``, ``keyed_after``, key id), so a
lowered marker shows, and the latest snapshot's position, so deleted snapshot rows
show.

Building the tree keeps only the peaks: a seal of a log costs one read of its rows
and one hash a row (plus one a merge), in memory independent of the log's length.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from ..errors import InvalidArgument
from .erased import erased_leaf

SEAL_VERSION = 1
TREE = "rfc6962-sha256"
SEAL_KEYS = (
    "seal",
    "tree",
    "count",
    "position",
    "root",
    "peaks",
    "at",
    "format",
    "chained_after",
    "keyed_after",
    "key_id",
    "keyed_mac",
    "snapshot",
    "mac",
)
_LEAF, _NODE = b"\x00", b"\x01"
_NUMBERS = struct.Struct(">QQQQ")
_sha256 = hashlib.sha256


def leaf_hash(position: int, stream_id: str, version: int, topic: str, state: bytes) -> bytes:
    """The tree's hash of one event (RFC 6962's leaf hash of its encoding)."""
    stream = stream_id.encode("utf-8", "surrogatepass")
    name = topic.encode("utf-8", "surrogatepass")
    numbers = _NUMBERS.pack(position, version, len(stream), len(name))
    return _sha256(b"".join((_LEAF, numbers, stream, name, state))).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962's hash of an inner node."""
    return _sha256(_NODE + left + right).digest()


def fold_peaks(peaks: Iterable[bytes]) -> bytes:
    """The root of a tree from its peaks, largest first (an empty tree: SHA-256 of nothing)."""
    ordered = list(peaks)
    if not ordered:
        return hashlib.sha256(b"").digest()
    root = ordered[-1]
    for left in reversed(ordered[:-1]):
        root = node_hash(left, root)
    return root


@dataclass(frozen=True)
class Peak:
    """A perfect subtree of the log's tree: its size, hash, first and last position."""

    size: int
    hash: bytes
    first: int
    last: int


class LogTree:
    """The Merkle tree of a log, built one event at a time, keeping only its peaks."""

    def __init__(self) -> None:
        # The peaks, largest first, as parallel lists: a million adds make no objects.
        self._sizes: list[int] = []
        self._hashes: list[bytes] = []
        self._firsts: list[int] = []
        self.count = 0
        self.position = 0

    def add(self, position: int, stream_id: str, version: int, topic: str, state: bytes) -> None:
        """Add the next event of the log (an erased one as the leaf it keeps, :mod:`.erased`)."""
        leaf = erased_leaf(state) or leaf_hash(position, stream_id, version, topic, state)
        self._push(leaf, 1, position, position)

    def add_block(self, size: int, value: bytes, first: int, last: int) -> None:
        """Add ``size`` events at once, as the hash of their perfect subtree (a block an
        archive or prune act recorded, :mod:`.gaps`): the tree's count must be a multiple
        of ``size``, a power of two, as the block was aligned in the full log."""
        if size < 1 or size & (size - 1) or self.count % size:
            raise ValueError(f"a block of {size} events cannot follow {self.count} events")
        self._push(value, size, first, last)

    def _push(self, node: bytes, size: int, first: int, last: int) -> None:
        sizes, hashes, firsts = self._sizes, self._hashes, self._firsts
        added = size
        while sizes and sizes[-1] == size:
            sizes.pop()
            node = _sha256(_NODE + hashes.pop() + node).digest()
            first = firsts.pop()
            size *= 2
        sizes.append(size)
        hashes.append(node)
        firsts.append(first)
        self.count += added
        self.position = last

    @property
    def peak_hashes(self) -> list[bytes]:
        """The roots of the perfect subtrees the tree splits into, largest first."""
        return list(self._hashes)

    @classmethod
    def resume(cls, seal: Seal) -> LogTree:
        """The tree as a seal left it: its peaks, count and position (no first positions
        of its peaks: they were not sealed), ready for the events after it."""
        tree = cls()
        tree._sizes = seal.peak_sizes()
        tree._hashes = [bytes.fromhex(peak) for peak in seal.peaks]
        tree._firsts = [0] * len(tree._sizes)
        tree.count, tree.position = seal.count, seal.position
        return tree

    def last_peak(self) -> Peak:
        """The smallest peak: the one the latest event closed."""
        return Peak(self._sizes[-1], self._hashes[-1], self._firsts[-1], self.position)

    def root(self) -> bytes:
        """The tree's root (RFC 6962's Merkle tree hash of every event so far)."""
        return fold_peaks(self._hashes)


@dataclass(frozen=True)
class Seal:
    """A commitment to a log up to a position: what ``tasktrail seal`` prints."""

    count: int
    position: int
    root: str
    peaks: tuple[str, ...]
    at: str
    format: int
    chained_after: int | None = None
    keyed_after: int | None = None
    key_id: str | None = None
    keyed_mac: str | None = None
    """The marker's ``keyed_mac`` (:mod:`.keys`), so a keyed export's import carries it."""
    snapshot: int | None = None
    """The latest snapshot's position when sealed (``None``: the store had none)."""
    mac: str | None = None
    """HMAC-SHA256 under the chain key of the line without it (a keyed store's)."""

    def to_dict(self) -> dict[str, Any]:
        """The seal as JSON, its keys in a fixed order."""
        fields = asdict(self)
        fields["peaks"] = list(self.peaks)
        return {"seal": SEAL_VERSION, "tree": TREE, **{k: fields[k] for k in SEAL_KEYS[2:]}}

    def to_json(self) -> str:
        """The seal as one JSON line (no newline)."""
        return orjson.dumps(self.to_dict()).decode()

    def signed_bytes(self) -> bytes:
        """What the MAC covers: the line with ``mac`` null."""
        return orjson.dumps({**self.to_dict(), "mac": None})

    def expected_mac(self, key: bytes) -> str:
        """The MAC this seal should carry under ``key``."""
        return hmac.new(key, self.signed_bytes(), hashlib.sha256).hexdigest()

    def peak_sizes(self) -> list[int]:
        """The size of each peak, largest first: the bits of ``count``."""
        bits = reversed(range(self.count.bit_length()))
        return [1 << bit for bit in bits if self.count >> bit & 1]


def extends(earlier: Seal, later: Seal, rows: Iterable[tuple[int, str, int, str, bytes]]) -> bool:
    """Whether ``later`` extends ``earlier``, given only the events between them (the
    log's rows after ``earlier.position`` up to ``later.position``): the earlier
    seal's peaks, extended by those events, must fold into the later seal's root."""
    tree = LogTree.resume(earlier)
    for position, stream_id, version, topic, state in rows:
        if position <= earlier.position or position > later.position:
            continue
        tree.add(position, stream_id, version, topic, state)
    return tree.count == later.count and tree.root().hex() == later.root


def make_seal(
    tree: LogTree,
    marker: dict[str, Any],
    *,
    key: bytes | None = None,
    snapshot: int | None = None,
    at: datetime | None = None,
) -> Seal:
    """The seal of a tree built over a log; ``marker`` holds the store's ``format``,
    ``chained_after``, ``keyed_after`` and ``key_id`` as they are now."""
    when = (at or datetime.now(UTC)).astimezone(UTC)
    seal = Seal(
        count=tree.count,
        position=tree.position,
        root=tree.root().hex(),
        peaks=tuple(peak.hex() for peak in tree.peak_hashes),
        at=when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        format=int(marker.get("format") or 0),
        chained_after=marker.get("chained_after"),
        keyed_after=marker.get("keyed_after"),
        key_id=marker.get("key_id"),
        keyed_mac=marker.get("keyed_mac"),
        snapshot=snapshot,
    )
    if key is not None and seal.key_id is not None:
        seal = Seal(**{**asdict(seal), "peaks": seal.peaks, "mac": seal.expected_mac(key)})
    return seal


def parse_seal(line: bytes | str, where: str) -> Seal:
    """A seal line read back, checked for shape and against its own peaks; a bad one
    raises :class:`InvalidArgument` naming ``where`` (a file and line)."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise InvalidArgument(f"{where}: not JSON ({error})") from None
    if not isinstance(row, dict) or list(row) != list(SEAL_KEYS):
        raise InvalidArgument(f"{where}: a seal line holds exactly {', '.join(SEAL_KEYS)}")
    if row["seal"] != SEAL_VERSION or row["tree"] != TREE:
        raise InvalidArgument(f"{where}: a seal of version {row['seal']!r}, tree {row['tree']!r}")
    problem = _field_problem(row)
    if problem is not None:
        raise InvalidArgument(f"{where}: {problem}")
    fields = {k: row[k] for k in SEAL_KEYS[2:]}
    seal = Seal(**{**fields, "peaks": tuple(row["peaks"])})
    if len(seal.peaks) != len(seal.peak_sizes()):
        raise InvalidArgument(
            f"{where}: {len(seal.peaks)} peaks for {seal.count} events (expected "
            f"{len(seal.peak_sizes())}): the seal was edited"
        )
    if fold_peaks(bytes.fromhex(p) for p in seal.peaks).hex() != seal.root:
        raise InvalidArgument(f"{where}: its peaks do not fold into its root: the seal was edited")
    return seal


def _field_problem(row: dict[str, Any]) -> str | None:
    for name in ("count", "position", "format"):
        if type(row[name]) is not int or row[name] < 0:
            return f"{name} must be a count, not {row[name]!r}"
    for name in ("chained_after", "keyed_after", "snapshot"):
        if row[name] is not None and (type(row[name]) is not int or row[name] < 0):
            return f"{name} must be a position or null, not {row[name]!r}"
    hashes = [row["root"], *row["peaks"]] if isinstance(row["peaks"], list) else None
    if hashes is None or not all(_is_hash(h) for h in hashes):
        return "root and peaks must be SHA-256 hashes in hex"
    for name in ("at", "key_id", "keyed_mac", "mac"):
        if row[name] is not None and not isinstance(row[name], str):
            return f"{name} must be text or null"
    if not isinstance(row["at"], str):
        return "at must be a time"
    return None


def _is_hash(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


__all__ = [
    "SEAL_KEYS",
    "LogTree",
    "Peak",
    "Seal",
    "extends",
    "fold_peaks",
    "leaf_hash",
    "make_seal",
    "node_hash",
    "parse_seal",
]
