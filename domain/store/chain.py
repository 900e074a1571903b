"""Tamper evidence: each event carries a digest chained to the previous event of its
stream, so an edited, removed, reordered or forged event shows.

The digest of version ``v`` of stream ``s`` is the SHA-256 of the previous event's
digest (empty for a stream's first event, or after one recorded before the chain),
the stream id, the version, the topic and the event's stored payload, the bytes
exactly as the transcoder wrote them. It is computed when the event is appended
and stored as the last key of that payload, ``"digest"`` (:func:`seal`): the row
stays a plain eventsourcing row (no column of our own in eventsourcing's table),
the payload stays one JSON object that any reader of the table can read, and an
export carries the digest inside the payload it copies byte for byte.

:class:`ChainCheck` reads rows in log order and reports, with positions, every
event whose digest does not match (edited, or copied under another stream or
version), every stream whose versions jump or repeat (an event removed, reordered
or copied), and every event without a digest where one belongs. Events recorded
before the chain existed read as *unchained*, not as errors. Its :attr:`heads`
(each stream's last version and digest) are what an export records, so a later
check can tell whether a stream was rewritten since.

Unkeyed, this is evidence, not a signature: someone who can write the store and
knows the scheme can recompute a stream's digests from the edit on. A keyed store
(:mod:`.keys`) computes each digest after its marker's ``keyed_after`` as an
HMAC-SHA256 under the chain key instead, which nobody without the key can recompute;
seals kept elsewhere (:mod:`.seals`) and heads recorded in an export catch the rest.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from eventsourcing.persistence import StoredEvent

from ..tasks.events import TaskEvent
from .erased import ErasureMatch, erased_leaf
from .keys import keyed_mac
from .transcoder import encode_event

DIGEST_KEY = "digest"
ERASED_TOPIC = "tasktrail.HistoryErased"
"""The erasure act's topic (the retention room's ``HistoryErased``)."""
HEAD_CACHE = 50_000
"""Streams whose last digest an appending store remembers (a miss reads one row)."""
Head = tuple[int, str | None, float]
"""A stream's latest event as a store remembers it: version, digest, ``at``."""
_HEAD = b',"digest":"'
_HEX = 64
_SUFFIX = len(_HEAD) + _HEX + 2
_HEX_DIGITS = frozenset(b"0123456789abcdef")


def digest(
    previous: str,
    stream_id: str,
    version: int,
    topic: str,
    payload: bytes,
    key: bytes | None = None,
) -> str:
    """The digest of one event, chained to ``previous`` (its stream's previous digest):
    SHA-256, or HMAC-SHA256 under ``key`` (a keyed store's)."""
    return Digester(key)(previous, stream_id, version, topic, payload)


class Digester:
    """Computes digests, plain or keyed; the keyed one copies an HMAC primed with the
    key rather than keying one per event."""

    def __init__(self, key: bytes | None = None) -> None:
        self.keyed = key is not None
        self._primed = hmac.new(key, digestmod=hashlib.sha256) if key is not None else None

    def __call__(
        self, previous: str, stream_id: str, version: int, topic: str, payload: bytes
    ) -> str:
        """The digest of one event, chained to ``previous``."""
        head = f"{previous}\n{stream_id}\n{version}\n{topic}\n".encode("utf-8", "surrogatepass")
        if self._primed is None:
            hashed = hashlib.sha256(head)
            hashed.update(payload)
            return hashed.hexdigest()
        keyed = self._primed.copy()
        keyed.update(head)
        keyed.update(payload)
        return keyed.hexdigest()


def seal(payload: bytes, value: str) -> bytes:
    """The stored state: the payload (a JSON object) with its digest as the last key."""
    return payload[:-1] + _HEAD + value.encode("ascii") + b'"}'


def as_bytes(state: bytes | bytearray | memoryview | str) -> bytes:
    """A stored state as bytes (a hand-edited table may hold it as text)."""
    return state.encode("utf-8", "surrogateescape") if isinstance(state, str) else bytes(state)


def unseal(state: bytes) -> tuple[bytes, str | None]:
    """The payload a digest covers, and the digest; ``(state, None)`` when the event
    carries none where :func:`seal` puts it."""
    if (
        len(state) > _SUFFIX
        and state.endswith(b'"}')
        and state[-_SUFFIX : -_HEX - 2] == _HEAD
        and _HEX_DIGITS.issuperset(state[-_HEX - 2 : -2])
    ):
        return state[:-_SUFFIX] + b"}", state[-_HEX - 2 : -2].decode("ascii")
    return state, None


class Sealer:
    """The append side: seals each event of an append with its digest, chained to the
    previous version of its stream, which it remembers for the streams it appended
    to or a scheduler folded (bounded, :attr:`heads`) and otherwise reads back with
    ``read_row(stream_id, version)``.

    Reading the previous row outside the append's transaction is safe: if another
    writer holds that version with another digest, it appended first, and this
    append conflicts on the version anyway.
    """

    def __init__(self, read_row: Callable[[str, int], bytes | None]) -> None:
        self._read_row = read_row
        self.digest = Digester()
        """Plain until the store turns out keyed (:class:`~.store.Store` sets it at open)."""
        self.heads: dict[str, Head] = {}
        """Each stream's latest event this store appended or folded, as far as it
        remembers (bounded): its version, digest (``None``: unchained) and ``at``,
        what the time guard would read back of it (:func:`.guards.unknown_stamps`)."""
        self._last: dict[str, Head] = {}

    def seal(
        self, events: Sequence[TaskEvent], versions: Sequence[int], timestamp: datetime
    ) -> list[StoredEvent]:
        """The rows to store: each event's payload sealed with its chained digest."""
        rows = []
        sealed: dict[str, Head] = {}
        for event, version in zip(events, versions, strict=True):
            stream_id = event.stream_id()
            topic = type(event).topic
            payload = encode_event(event, timestamp)
            head = sealed.get(stream_id)
            previous = (head[1] or "") if head is not None else self._previous(stream_id, version)
            value = self.digest(previous, stream_id, version, topic, payload)
            sealed[stream_id] = (version, value, event.at)
            rows.append(StoredEvent(stream_id, version, topic, seal(payload, value)))
        self._last = sealed
        return rows

    def saw(self, stream_id: str, version: int, state: bytes, at: float) -> None:
        """Remember a row another writer appended, stamped ``at``, as a scheduler folds
        it: its next append to that stream then reads no row back, for its chain nor
        for its time guard."""
        head = self.heads.get(stream_id)
        if head is not None and head[0] >= version:
            return
        self._remember({stream_id: (version, unseal(as_bytes(state))[1], at)})

    def appended(self) -> None:
        """Remember the digests of the rows just sealed: the store took them."""
        self._remember(self._last)

    def _remember(self, heads: dict[str, Head]) -> None:
        if len(self.heads) > HEAD_CACHE:
            self.heads.clear()  # bounded: a miss costs one indexed read
        self.heads.update(heads)

    def _previous(self, stream_id: str, version: int) -> str:
        """The digest of version ``version - 1`` ("" for a stream's first event, or after
        one recorded before the chain)."""
        if version <= 1:
            return ""
        cached = self.heads.get(stream_id)
        if cached is not None and cached[0] == version - 1:
            return cached[1] or ""
        state = self._read_row(stream_id, version - 1)
        return (unseal(state)[1] or "") if state is not None else ""


@dataclass(frozen=True)
class ChainProblem:
    """An event the chain does not vouch for."""

    position: int | None
    stream_id: str
    message: str

    def __str__(self) -> str:
        where = f"event at position {self.position}" if self.position is not None else "log"
        return f"{where}, stream {self.stream_id}: {self.message}"


@dataclass
class ChainCheck:
    """Checks rows, in log order, against the digest chain of their streams.

    ``chained_after`` is the position after which every event must carry a digest
    (the store's marker; ``None`` when unknown). ``contiguous`` says the positions
    have no legitimate gaps (SQLite's), so a gap is rows removed. Every event after
    ``keyed_after`` (a keyed store's marker) carries a keyed digest: checked under
    ``key`` when given, else only counted in :attr:`unverified`. ``expected`` are
    heads recorded earlier (an export's): each must still be in the log, with the
    same digest, or the stream was rewritten since (:meth:`finish` reports those
    never seen).
    """

    chained_after: int | None = None
    contiguous: bool = False
    keyed_after: int | None = None
    key: bytes | None = None
    keyed_mac: str | None = None
    """The marker's ``keyed_mac``: checked under ``key`` against the event at
    ``keyed_after`` (:func:`.keys.keyed_mac`)."""
    expected: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    heads: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    """Each stream's last version and its digest (``None``: unchained)."""
    problems: list[ChainProblem] = field(default_factory=list)
    chained: int = 0
    unchained: int = 0
    last_position: int = 0
    unverified: int = 0
    """Keyed events whose digest could not be checked: no key was given."""
    erasures: dict[int, tuple[int, list[Any]]] = field(default_factory=dict)
    """The erased rows the log's erasure acts name (:mod:`.erased`), by position: the
    act's position and its entry; given before the rows (a store's, read first) or
    gathered as the acts come (an export's)."""

    def __post_init__(self) -> None:
        self._erasure = ErasureMatch(self.erasures, self._problem)
        self._plain = Digester()
        self._keyed = Digester(self.key)
        self._vouched = self.key is None or self.keyed_after is None
        if not self._vouched and self.keyed_after == 0:
            self._vouch(None, "", 0)  # keyed empty: no event left unkeyed

    def add(self, position: int, stream_id: str, version: int, topic: str, state: bytes) -> None:
        """Check one row (its stored state exactly as the store holds it)."""
        if self.contiguous and position > self.last_position + 1:
            first, last = self.last_position + 1, position - 1
            span = f"position {first} is" if first == last else f"positions {first}-{last} are"
            self._problem(position, stream_id, f"{span} missing: rows removed from the store")
        self.last_position = max(self.last_position, position)
        if position == self.keyed_after and not self._vouched:
            self._vouch(position, stream_id, version)
        have, previous = self.heads.get(stream_id, (0, None))
        payload, found = unseal(state)
        self.heads[stream_id] = (version, found)
        recorded = self.expected.get(stream_id)
        if recorded is not None and recorded[0] == version:
            del self.expected[stream_id]
            if recorded[1] != found:
                self._problem(
                    position,
                    stream_id,
                    f"version {version} has another digest than the head recorded earlier: "
                    "the stream was rewritten since",
                )
        if version != have + 1:
            if version <= have:
                what = f"version {version} comes after version {have}: reordered or copied"
            else:
                missing = (
                    f"version {have + 1}"
                    if version == have + 2
                    else (f"versions {have + 1}-{version - 1}")
                )
                what = f"the stream jumps from version {have} to {version}: {missing} removed"
            self._problem(position, stream_id, what)
            return
        if found is None:
            if f'"{DIGEST_KEY}"'.encode() in state:
                self._problem(position, stream_id, "its digest is not where it belongs: edited")
            elif previous is not None:
                self._problem(
                    position,
                    stream_id,
                    "carries no digest after chained events of its stream: its digest was "
                    "removed, or the event was forged",
                )
            elif self.chained_after is not None and position > self.chained_after:
                self._problem(
                    position,
                    stream_id,
                    f"carries no digest, though every event after position {self.chained_after}"
                    " is chained: its digest was removed, or the event was forged",
                )
            else:
                self.unchained += 1
            return
        if topic == ERASED_TOPIC:
            self._erasure.act(position, payload)
        leaf = erased_leaf(state)
        if leaf is not None or position in self.erasures:  # held to its erasure act
            self._erasure.row(position, stream_id, found, leaf, state)
            return
        keyed = self.keyed_after is not None and position > self.keyed_after
        if keyed and self.key is None:
            self.unverified += 1  # its place in the stream is checked, its digest cannot be
            return
        computed = (self._keyed if keyed else self._plain)(
            previous or "", stream_id, version, topic, payload
        )
        if computed != found:
            what = "its keyed digest (recomputed without the key?)" if keyed else "its digest"
            self._problem(
                position,
                stream_id,
                f"version {version} ({topic}) does not match {what}: edited, forged, or "
                "copied from another stream or version",
            )
            return
        self.chained += 1

    def _vouch(self, position: int | None, stream_id: str, version: int) -> None:
        """The marker's ``keyed_mac`` must vouch, under the key, for the event at
        ``keyed_after``: else the marker was moved, and events before it escape the key."""
        assert self.key is not None
        self._vouched = True
        if self.keyed_mac is None or not hmac.compare_digest(
            self.keyed_mac, keyed_mac(self.key, stream_id, version)
        ):
            self._problem(
                position,
                stream_id or "*",
                f"the marker's keyed_after ({self.keyed_after}) is not the one the key "
                "vouched for: the marker was moved or edited, and the events before it "
                "escape the key",
            )

    def finish(self) -> None:
        """Report the recorded heads the log never reached: their events are gone; and
        the rows marked erased that no erasure act names."""
        self._erasure.finish()
        self.chained += self._erasure.vouched
        self._erasure.vouched = 0
        if not self._vouched:
            self._problem(
                None,
                "*",
                f"the marker's keyed_after names position {self.keyed_after}, which the log "
                "no longer holds: the marker was moved, or events removed",
            )
            self._vouched = True
        for stream_id, (version, _) in sorted(self.expected.items()):
            self._problem(
                None,
                stream_id,
                f"the head recorded earlier is version {version}, which the log no longer "
                "holds: events removed",
            )
        self.expected.clear()

    def _problem(self, position: int | None, stream_id: str, message: str) -> None:
        self.problems.append(ChainProblem(position, stream_id, message))

    @property
    def erased(self) -> list[str]:
        """What each erasure act took, in words (who, when, why, how many events)."""
        return self._erasure.notes

    def head_list(self) -> dict[str, list[object]]:
        """The heads as JSON: stream -> [version, digest or null]."""
        return {stream: [version, value] for stream, (version, value) in self.heads.items()}
