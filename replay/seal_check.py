"""``verify --seals FILE``: does the log still extend every seal kept outside it?

Each seal (:mod:`tasktrail.domain.store.seals`) is checked in the one pass ``verify``
makes over the log's rows: the rows are hashed into the same RFC 6962 tree, and
when the tree reaches the end of one of a seal's peaks, that peak must be the one
sealed. The first peak that differs bounds where the log stops agreeing: every event
before it is as sealed, one in it (those positions, as the log holds them now) was
edited, removed, reordered or forged. A log shorter than a seal was cut, or rolled
back to an older copy. After the rows, the store's marker must be the one sealed
(not lowered: digests stripped, the key dropped) and a snapshot must remain at or
after the one sealed (snapshot rows deleted show). A seal's MAC is checked under
the key; without it, MACs are counted as unchecked, never passed.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass, field
from pathlib import Path

from tasktrail.domain import InvalidArgument, Store, StoreError, open_store
from tasktrail.domain.history import SnapshotTable
from tasktrail.domain.store.files import refuse_store_input
from tasktrail.domain.store.gaps import Gap
from tasktrail.domain.store.keys import resolve_key
from tasktrail.domain.store.seals import LogTree, Seal, parse_seal

from .log import is_jsonl


@dataclass(frozen=True)
class SealProblem:
    """Where the log stops agreeing with one seal, and how."""

    line: int
    """The seal's line in its file."""
    position: int | None
    message: str


def read_seals(path: str | os.PathLike[str]) -> list[tuple[int, Seal]]:
    """The seals of a file, with their line numbers: a file of seal lines, or an export
    (whose seal line is read and its other lines passed over)."""
    name = os.fspath(path)
    refuse_store_input(path, "a file of seals")
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError as error:
        why = error.strerror or error
        raise InvalidArgument(f"cannot read the seals file {name}: {why}") from None
    export = is_jsonl(path)
    seals = []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or (export and not line.startswith(b'{"seal"')):
            continue
        seals.append((number, parse_seal(line, f"{name}:{number}")))
    if not seals:
        raise InvalidArgument(f"{name} holds no seal (`tasktrail seal STORE` prints one)")
    return seals


def export_seal(path: str | os.PathLike[str]) -> Seal | None:
    """The seal an export recorded (its last), or ``None`` (an earlier release's)."""
    found: Seal | None = None
    name = os.fspath(path)
    refuse_store_input(path, "an export")
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if raw.startswith(b'{"seal"'):
                    found = parse_seal(raw, f"{name}:{number}")
    except OSError as error:
        raise StoreError(f"cannot read {name}: {error.strerror or error}") from None
    return found


def export_keying(path: str | os.PathLike[str]) -> tuple[str, int, str | None] | None:
    """A keyed export's key id, ``keyed_after`` and ``keyed_mac`` (its seal's), for an
    import to carry."""
    sealed = export_seal(path)
    if sealed is None or sealed.key_id is None or sealed.keyed_after is None:
        return None
    return sealed.key_id, sealed.keyed_after, sealed.keyed_mac


@dataclass
class SealCheck:
    """Fed the log's rows in order (:meth:`add`), then :meth:`finish`; :attr:`problems`
    says where the log stops agreeing with each seal."""

    seals: list[tuple[int, Seal]]
    key: bytes | None = None
    labels: dict[int, str] = field(default_factory=dict)
    """How a seal is named in a finding, by its line (default: its line in the file):
    a snapshot's recorded seal (:func:`snapshot_seals`) has a line of its own."""
    problems: list[SealProblem] = field(default_factory=list)
    macs_unchecked: int = 0
    tree: LogTree = field(default_factory=LogTree)
    unproven: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Seals (by line) with a peak that ends inside events now archived (their first
    and last positions): proven only with ``--archive``."""

    def __post_init__(self) -> None:
        # count -> (seal, peak) whose range ends there; and whose range starts there.
        self._ends: dict[int, list[tuple[int, int]]] = {}
        self._starts: dict[int, list[tuple[int, int]]] = {}
        self._first: dict[tuple[int, int], int] = {}
        self._failed: set[int] = set()
        for index, (line, seal) in enumerate(self.seals):
            self._check_mac(line, seal)
            start = 0
            for peak, size in enumerate(seal.peak_sizes()):
                self._starts.setdefault(start + 1, []).append((index, peak))
                self._ends.setdefault(start + size, []).append((index, peak))
                start += size

    def _check_mac(self, line: int, seal: Seal) -> None:
        if seal.mac is None:
            return
        if self.key is None:
            self.macs_unchecked += 1
        elif not hmac.compare_digest(seal.mac, seal.expected_mac(self.key)):
            self.problems.append(
                SealProblem(
                    line,
                    None,
                    "its MAC does not match under the key given: the seal was edited, or "
                    "taken of another store",
                )
            )

    def add(self, position: int, stream_id: str, version: int, topic: str, state: bytes) -> None:
        """Hash the log's next row into the tree; check the peaks that end with it."""
        tree = self.tree
        tree.add(position, stream_id, version, topic, state)
        for started in self._starts.pop(tree.count, ()):
            self._first[started] = position
        self._closed()

    def add_block(self, gap: Gap) -> None:
        """Add the block of events an archive or prune act took (:mod:`~tasktrail.domain.
        store.gaps`): a sealed peak that ends inside it is proven only read across the
        archive (:attr:`unproven`), one that ends with it or holds it is checked as usual."""
        tree, start = self.tree, self.tree.count
        try:
            tree.add_block(gap.size, gap.hash, gap.first, gap.last)
        except ValueError as error:
            self.problems.append(SealProblem(0, gap.first, f"the log does not line up: {error}"))
            return
        for count in [k for k in self._starts if start < k <= tree.count]:
            for started in self._starts.pop(count):
                self._first[started] = gap.first
        for count in [k for k in self._ends if start < k < tree.count]:
            for index, _ in self._ends.pop(count):
                line = self.seals[index][0]
                self.unproven.setdefault(line, (gap.first, gap.last))
                self._failed.add(index)  # not failed: not checked further without the archive
        self._closed()

    def _closed(self) -> None:
        tree = self.tree
        for index, peak in self._ends.pop(tree.count, ()):
            if index in self._failed:
                continue
            line, seal = self.seals[index]
            closed = tree.last_peak()
            if closed.hash.hex() != seal.peaks[peak]:
                self._failed.add(index)
                first, last, size = closed.first, closed.last, closed.size
                self.problems.append(
                    SealProblem(
                        line,
                        first,
                        f"the log stops agreeing with the seal ({_sealed(seal)}) at or after "
                        f"position {first}: events {tree.count - size + 1}-{tree.count} "
                        f"(positions {first}-{last} now) differ from those sealed: one was "
                        "edited, removed, reordered or forged",
                    )
                )

    def finish(self, store: Store | None) -> None:
        """After the last row: the seals the log is too short for; a store's marker and
        snapshots against each seal's."""
        tree = self.tree
        for index, (line, seal) in enumerate(self.seals):
            if seal.count > tree.count and index not in self._failed:
                self._short(index, line, seal)
            if store is not None:
                self._marker(line, seal, store)
        if store is not None:
            self._snapshots(store)

    def _short(self, index: int, line: int, seal: Seal) -> None:
        tree = self.tree
        proven, peak = 0, 0
        for peak, size in enumerate(seal.peak_sizes()):  # noqa: B007 (read after the loop)
            if proven + size > tree.count:
                break
            proven += size
        # The first event past what the peaks prove, as the log holds it now (if it does).
        position = self._first.get((index, peak), tree.position + 1)
        end = f"ends at position {tree.position}" if tree.count else "is empty"
        self.problems.append(
            SealProblem(
                line,
                position,
                f"the log {end} after {tree.count} events, the seal ({_sealed(seal)}) counts "
                f"{seal.count}: events were cut from the log (a stream's or the log's last "
                f"ones) or the store was rolled back to an older copy; the first {proven} "
                f"events agree with it, the log stops agreeing at or after position {position}",
            )
        )

    def _marker(self, line: int, seal: Seal, store: Store) -> None:
        where = _sealed(seal)
        moved = (store.key_id, store.keyed_after) != (seal.key_id, seal.keyed_after)
        if seal.key_id is not None and moved:
            now = f"key id {store.key_id}" if store.key_id else "no key"
            now += f" after position {store.keyed_after}" if store.key_id else ""
            self.problems.append(
                SealProblem(
                    line,
                    (seal.keyed_after or 0) + 1,
                    f"the seal ({where}) was taken of a store keyed (key id {seal.key_id}) after "
                    f"position {seal.keyed_after}; the store's marker now records {now}: "
                    "downgraded, or replaced",
                )
            )
        lowered = store.format < seal.format or (
            seal.chained_after is not None
            and (store.chained_after is None or store.chained_after > seal.chained_after)
        )
        if lowered:
            self.problems.append(
                SealProblem(
                    line,
                    (seal.chained_after or 0) + 1,
                    f"the seal ({where}) was taken of a store of format {seal.format} chained "
                    f"after position {seal.chained_after}; its marker now says format "
                    f"{store.format}, chained after {store.chained_after}: the marker was "
                    "lowered (digests stripped), or the store replaced",
                )
            )

    def _snapshots(self, store: Store) -> None:
        sealed = [(line, s) for line, s in self.seals if s.snapshot is not None]
        if not sealed:
            return
        held = SnapshotTable(store).positions()
        for line, seal in sealed:
            assert seal.snapshot is not None
            if not any(position >= seal.snapshot for position in held):
                self.problems.append(
                    SealProblem(
                        line,
                        seal.snapshot,
                        f"the seal ({_sealed(seal)}) saw a snapshot at position "
                        f"{seal.snapshot}; the store holds none at or after it: snapshot "
                        "rows were deleted",
                    )
                )


def snapshot_seals(store: Store) -> tuple[list[tuple[int, Seal]], dict[int, str]]:
    """The seals a store's snapshots recorded (issue 30: a snapshot records the seal of
    its position, :mod:`tasktrail.domain.history.sealed`), each under a negative line
    with its label; a snapshot that records none, or fails its digest, gives none
    (``verify``'s snapshot check reports it)."""
    from tasktrail.domain.history import FORMAT
    from tasktrail.domain.history.envelope import body_key, keyed_snapshot
    from tasktrail.domain.history.sealed import recorded_seal

    table = SnapshotTable(store)
    seals: list[tuple[int, Seal]] = []
    labels: dict[int, str] = {}
    for position in table.positions():
        stored = table.at(position)
        if stored is None or stored.format != FORMAT:
            continue
        if keyed_snapshot(store, position) and store.chain_key is None:
            continue  # a keyed snapshot opens only under the key
        seal = recorded_seal(stored.body, body_key(store, position))
        if seal is not None:
            line = -len(seals) - 1
            seals.append((line, seal))
            labels[line] = f"the seal the snapshot at position {position} recorded"
    return seals, labels


def seal_check_for(
    source: str | os.PathLike[str] | Store | object,
    seals: str | os.PathLike[str] | None,
    chain_key: bytes | str | None,
) -> SealCheck | None:
    """The seals the log must still extend: a file's (``--seals``), and those a store's
    snapshots recorded; ``None`` when there are none."""
    kept = read_seals(seals) if seals is not None else []
    recorded: list[tuple[int, Seal]] = []
    labels: dict[int, str] = {}
    if isinstance(source, Store):
        recorded, labels = snapshot_seals(source)
    elif isinstance(source, str | os.PathLike) and not is_jsonl(source):
        with open_store(source, read_only=True, chain_key=chain_key) as store:
            recorded, labels = snapshot_seals(store)
    if not kept and not recorded:
        return None
    return SealCheck([*kept, *recorded], resolve_key(chain_key), labels)


def _sealed(seal: Seal) -> str:
    return f"{seal.count} events to position {seal.position}, at {seal.at}"


__all__ = [
    "SealCheck",
    "SealProblem",
    "export_keying",
    "export_seal",
    "read_seals",
    "seal_check_for",
    "snapshot_seals",
]
