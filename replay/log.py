"""Logs to replay: a store (SQLite or PostgreSQL) or a JSONL export, read in order.

A JSONL export holds one event a line::

    {"position":1,"topic":"tasktrail.TaskSubmitted","originator_id":"t-1",
     "originator_version":1,"at":1000,"payload":{...the stored fields...}}

``export`` then ``import_log`` then ``export`` gives the same bytes: the
payload is the stored state exactly (recording timestamp included), and keys
are written in one fixed order. A line that cannot be read is reported with
its line number and what was expected; ``skip_invalid=True`` skips such lines
instead and reports each one in :attr:`LogReader.skipped`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from eventsourcing.persistence import StoredEvent

from tasktrail.domain import CorruptEvent, Store, StoreError, TasktrailError, open_store
from tasktrail.domain.store.event_view import ensure_event_view
from tasktrail.domain.store.store import Recorded
from tasktrail.domain.store.transcoder import decode_payload

LINE_KEYS = ("position", "topic", "originator_id", "originator_version", "at", "payload")
IMPORT_BATCH = 1_000
_LINE_KEY_SET = frozenset(LINE_KEYS)


class LogError(TasktrailError):
    """A JSONL log cannot be read at some line; ``line`` is 1-based."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path = path
        self.line = line
        super().__init__(f"{path}:{line}: {message}")


@dataclass(frozen=True)
class Skipped:
    """A line ``skip_invalid`` left out, and why."""

    line: int
    reason: str


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

    def __iter__(self) -> Iterator[Recorded]:
        for recorded, _, _ in self.rows(states=False):
            yield recorded

    def rows(self, *, states: bool = True) -> Iterator[tuple[Recorded, bytes, int]]:
        """Each good line: the event, its stored state bytes (``b""`` unless ``states``:
        only an import needs them), its line number."""
        name = str(self.path)
        try:
            handle = self.path.open("rb")
        except OSError as error:
            raise StoreError(f"cannot read {name}: {error.strerror or error}") from None
        last_position = 0
        with handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.endswith(b"\n"):
                    self._invalid(number, "truncated: the last line has no newline")
                    continue
                if not raw.strip():
                    self._invalid(number, "empty line; expected one JSON object")
                    continue
                try:
                    recorded, state = _parse_line(raw, number, name, states)
                except LogError as error:
                    self._invalid(number, str(error).split(": ", 1)[1])
                    continue
                except CorruptEvent as error:
                    self._invalid(number, str(error))
                    continue
                if recorded.position <= last_position:
                    self._invalid(
                        number,
                        f"position {recorded.position} out of order: expected more than "
                        f"{last_position}",
                    )
                    continue
                last_position = recorded.position
                yield recorded, state, number

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


def read_log(
    source: str | os.PathLike[str] | Store, *, skip_invalid: bool = False
) -> tuple[Iterator[Recorded], LogReader | None, Store | None]:
    """Open any log: the events, the JSONL reader (for its skipped lines) if one, and
    the store opened here (the caller closes it) if one."""
    if isinstance(source, Store):
        return source.read(), None, None
    if is_jsonl(source):
        reader = LogReader(Path(source), skip_invalid=skip_invalid)
        return iter(reader), reader, None
    text = os.fspath(source)
    if "://" not in text and not Path(text).exists():
        raise StoreError(f"no store at {text} (give an existing SQLite file, URL or .jsonl)")
    store = open_store(text)
    return store.read(), None, store


def export(store: Store | str | os.PathLike[str], path: str | os.PathLike[str]) -> int:
    """Write a store's whole log to a JSONL file; returns how many events."""
    opened = store if isinstance(store, Store) else open_store(_existing(store))
    count = 0
    try:
        with Path(path).open("wb") as out:
            for notification in _notifications(opened):
                out.write(_line(notification))
                count += 1
    finally:
        if opened is not store:
            opened.close()
    return count


def _existing(location: str | os.PathLike[str]) -> str:
    text = os.fspath(location)
    if "://" not in text and not Path(text).exists():
        raise StoreError(f"no store at {text}")
    return text


def _notifications(store: Store) -> Iterator[Any]:
    start = 1
    while True:
        page = store.app.recorder.select_notifications(start=start, limit=IMPORT_BATCH)
        yield from page
        if len(page) < IMPORT_BATCH:
            return
        start = page[-1].id + 1


def _line(notification: Any) -> bytes:
    try:
        payload = orjson.loads(notification.state)
    except orjson.JSONDecodeError:
        raise CorruptEvent(notification.id, "stored state is not JSON") from None
    row = {
        "position": notification.id,
        "topic": notification.topic,
        "originator_id": str(notification.originator_id),
        "originator_version": notification.originator_version,
        "at": payload.get("at") if isinstance(payload, dict) else None,
        "payload": payload,
    }
    return orjson.dumps(row) + b"\n"


def import_log(
    path: str | os.PathLike[str],
    store: Store | str | os.PathLike[str],
    *,
    skip_invalid: bool = False,
) -> int:
    """Append a JSONL export's events to an empty store, unchanged; returns how many.

    Every line is checked (JSON, known topic, positions in order, each stream's
    versions contiguous) before anything is written; a bad line raises
    :class:`LogError` and the store stays empty.
    """
    opened = store if isinstance(store, Store) else open_store(store)
    try:
        if opened.head() != 0:
            raise StoreError(f"{opened.location} is not empty: import only into a new store")
        reader = LogReader(Path(path), skip_invalid=skip_invalid)
        versions: dict[str, int] = {}
        rows: list[StoredEvent] = []
        for recorded, state, line in reader.rows():
            stream_id = recorded.event.stream_id()
            expected = versions.get(stream_id, 0) + 1
            if recorded.originator_version != expected:
                raise LogError(
                    str(path),
                    line,
                    f"stream {stream_id} version {recorded.originator_version}, "
                    f"expected {expected}",
                )
            versions[stream_id] = expected
            rows.append(
                StoredEvent(
                    originator_id=stream_id,
                    originator_version=recorded.originator_version,
                    topic=type(recorded.event).topic,
                    state=state,
                )
            )
        for start in range(0, len(rows), IMPORT_BATCH):
            opened.app.recorder.insert_events(rows[start : start + IMPORT_BATCH])
        ensure_event_view(opened)
        return len(rows)
    finally:
        if opened is not store:
            opened.close()
