"""Logs to replay: a store (SQLite or PostgreSQL) or a JSONL export, read in order.

A JSONL export holds one event a line::

    {"position":1,"topic":"tasktrail.TaskSubmitted","originator_id":"t-1",
     "originator_version":1,"at":1000,"payload":{...the stored fields...}}

The last line records the stream heads (each stream's last version and its
digest, see :mod:`tasktrail.domain.store.chain`), how many events precede it and
the position after which the source chains every event::

    {"heads":{"t-1":[4,"9f…"],...},"events":1200,"chained_after":0}

so that ``verify`` can tell, later, whether a stream was rewritten since (an
export without it, from an earlier release, still reads). After it comes the seal
of the export's position, ``{"seal":1,...}`` (:mod:`.seal_check` reads it; every
reader of events passes over it).

``export`` then ``import_log`` (:mod:`.importing`) then ``export`` gives the same bytes: the
payload is the stored state exactly (recording timestamp and digest included),
and keys are written in one fixed order. ``export`` writes a temporary file
beside its target and renames it into place: a failure (a full disk) leaves
the target as it was. A line that cannot be read is reported with its line
number and what was expected; ``skip_invalid=True`` skips such lines instead and
reports each one in :attr:`LogReader.skipped` (a store's unreadable events likewise, by
position, through :class:`StoreReader`). Stores are read read-only
(:func:`~tasktrail.domain.open_store` with ``read_only=True``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import orjson

from tasktrail.domain import CorruptEvent, Store, StoreError, TasktrailError, open_store
from tasktrail.domain.store.files import refuse_store_input
from tasktrail.domain.store.store import Recorded
from tasktrail.domain.store.transcoder import decode_payload
from tasktrail.domain.store.wire import DECODE_ERRORS, line_decoder

LINE_KEYS = ("position", "topic", "originator_id", "originator_version", "at", "payload")
HEADS_KEYS = ("heads", "events", "chained_after")
_LINE_KEY_SET = frozenset(LINE_KEYS)


@dataclass(frozen=True)
class Heads:
    """An export's last line: each stream's last version and digest, the number of
    events before it, and the position after which the source chained every event."""

    heads: dict[str, tuple[int, str | None]]
    events: int
    chained_after: int | None
    line: int = 0


class LogError(TasktrailError):
    """A JSONL log cannot be read at some line; ``line`` is 1-based."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path = path
        self.line = line
        super().__init__(f"{path}:{line}: {message}")


@dataclass(frozen=True)
class Skipped:
    """A line of an export, or a row of a store, that ``skip_invalid`` left out, and why."""

    line: int | None
    """The export's line (1-based); ``None`` for a store's row."""
    reason: str
    position: int | None = None
    """The store row's position (``None`` for an export's line: ``reason`` may say)."""


def is_jsonl(location: str | os.PathLike[str]) -> bool:
    """Whether a location names a JSONL export (by its suffix)."""
    text = os.fspath(location)
    return "://" not in text and text.endswith((".jsonl", ".ndjson"))


@dataclass
class LogReader:
    """Reads the events of a JSONL export, in order, checking every line."""

    path: Path
    skip_invalid: bool = False
    skipped: list[Skipped] = field(default_factory=list)
    heads: Heads | None = None
    """The export's last heads line, once read (``None``: it had none). Events may
    follow a heads line (a log extended after its export): it holds for those before."""
    read: int = 0
    """Event lines read so far."""
    on_heads: Callable[[Heads, int], None] | None = None
    """Called with each heads line and the number of events read before it."""

    def __iter__(self) -> Iterator[Recorded]:
        # Each event line read fast (msgspec, :func:`line_decoder`) when it can: a line it
        # is not sure of (any other line, an older event, out of order) is read checked.
        decode = line_decoder()
        last_position = 0
        with self._open() as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    recorded = decode(raw).record()
                except DECODE_ERRORS:
                    recorded = None
                if recorded is None or recorded.position <= last_position or raw[-1:] != b"\n":
                    checked = self._checked(raw, number, last_position, states=False)
                    if checked is None:
                        continue
                    recorded = checked[0]
                last_position = recorded.position
                self.read += 1
                yield recorded

    def rows(self, *, states: bool = True) -> Iterator[tuple[Recorded, bytes, int]]:
        """Each good line: the event, its stored state bytes (``b""`` unless ``states``:
        only an import needs them), its line number."""
        last_position = 0
        with self._open() as handle:
            for number, raw in enumerate(handle, start=1):
                checked = self._checked(raw, number, last_position, states)
                if checked is not None:
                    last_position = checked[0].position
                    self.read += 1
                    yield checked[0], checked[1], number

    def _open(self) -> BinaryIO:
        refuse_store_input(self.path, "an export")
        try:
            return self.path.open("rb")
        except OSError as error:
            raise StoreError(f"cannot read {self.path}: {error.strerror or error}") from None

    def _checked(
        self, raw: bytes, number: int, last_position: int, states: bool
    ) -> tuple[Recorded, bytes] | None:
        """One line read the checked way: its event and state, or ``None`` (a heads line,
        or a line ``skip_invalid`` leaves out)."""
        name = str(self.path)
        if not raw.endswith(b"\n"):
            self._invalid(number, "truncated: the last line has no newline")
            return None
        if not raw.strip():
            self._invalid(number, "empty line; expected one JSON object")
            return None
        if raw.startswith(b'{"seal"'):
            return None  # the export's seal: verify --seals reads it
        if raw.startswith(b'{"heads"'):
            try:
                self.heads = _parse_heads(raw, number, name)
            except LogError as error:
                self._invalid(number, str(error).split(": ", 1)[1])
                return None
            if self.on_heads is not None:
                self.on_heads(self.heads, self.read)
            return None
        try:
            recorded, state = _parse_line(raw, number, name, states)
        except LogError as error:
            self._invalid(number, str(error).split(": ", 1)[1])
            return None
        except CorruptEvent as error:
            self._invalid(number, str(error))
            return None
        if recorded.position <= last_position:
            self._invalid(
                number,
                f"position {recorded.position} out of order: expected more than {last_position}",
            )
            return None
        return recorded, state

    def _invalid(self, line: int, reason: str) -> None:
        if not self.skip_invalid:
            raise LogError(str(self.path), line, reason)
        self.skipped.append(Skipped(line, reason))


def _parse_line(raw: bytes, number: int, name: str, states: bool = True) -> tuple[Recorded, bytes]:
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise LogError(name, number, f"not JSON ({error})") from None
    if not isinstance(row, dict):
        raise LogError(name, number, "expected a JSON object")
    if not row.keys() >= _LINE_KEY_SET:
        missing = [key for key in LINE_KEYS if key not in row]
        raise LogError(name, number, f"missing {', '.join(missing)}")
    position, version = row["position"], row["originator_version"]
    # type() is int: not a bool (an int subclass), as orjson reads integers.
    if type(position) is not int or position < 1 or type(version) is not int or version < 1:
        for key, value in (("position", position), ("originator_version", version)):
            if type(value) is not int or value < 1:
                raise LogError(name, number, f"{key} must be an integer >= 1, not {value!r}")
    if not isinstance(row["topic"], str) or not isinstance(row["originator_id"], str):
        raise LogError(name, number, "topic and originator_id must be strings")
    state = orjson.dumps(row["payload"]) if states else b""
    event = decode_payload(row["topic"], row["originator_id"], row["payload"], position)
    return Recorded(position, event, version), state


def _parse_heads(raw: bytes, number: int, name: str) -> Heads:
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise LogError(name, number, f"not JSON ({error})") from None
    if not isinstance(row, dict) or list(row) != list(HEADS_KEYS):
        raise LogError(name, number, f"a heads line holds exactly {', '.join(HEADS_KEYS)}")
    heads, events, chained_after = row["heads"], row["events"], row["chained_after"]
    if not isinstance(heads, dict) or type(events) is not int or events < 0:
        raise LogError(name, number, "heads must be an object and events a count")
    if chained_after is not None and (type(chained_after) is not int or chained_after < 0):
        raise LogError(name, number, f"chained_after must be a position, not {chained_after!r}")
    parsed: dict[str, tuple[int, str | None]] = {}
    for stream_id, head in heads.items():
        if (
            not isinstance(head, list)
            or len(head) != 2
            or type(head[0]) is not int
            or head[0] < 1
            or not (head[1] is None or isinstance(head[1], str))
        ):
            raise LogError(
                name, number, f"the head of stream {stream_id!r} is not [version, digest]"
            )
        parsed[stream_id] = (head[0], head[1])
    return Heads(parsed, events, chained_after, number)


@dataclass
class StoreReader:
    """Reads a store's events in order, leaving out each row that cannot be read (a
    corrupt or unknown event) and noting it, with its position, in :attr:`skipped`:
    ``skip_invalid`` for a store. A store that cannot be read at all still raises."""

    store: Store
    skipped: list[Skipped] = field(default_factory=list)

    def __iter__(self) -> Iterator[Recorded]:
        def skip(error: CorruptEvent) -> None:
            self.skipped.append(Skipped(None, str(error), error.position))

        return self.store.read(skip=skip)


def read_log(
    source: str | os.PathLike[str] | Store, *, skip_invalid: bool = False
) -> tuple[Iterator[Recorded], LogReader | StoreReader | None, Store | None]:
    """Open any log: the events, the reader that notes what ``skip_invalid`` skipped
    (an export's or a store's) if one, and the store opened here (the caller closes
    it) if one."""
    if not isinstance(source, Store) and is_jsonl(source):
        reader = LogReader(Path(source), skip_invalid=skip_invalid)
        return iter(reader), reader, None
    store = source if isinstance(source, Store) else open_store(source, read_only=True)
    opened = store if store is not source else None
    if skip_invalid:
        lenient = StoreReader(store)
        return iter(lenient), lenient, opened
    return store.read(), None, opened
