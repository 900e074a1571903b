"""Stored bytes and events: how a tasktrail event becomes a stored row and a row an
event again. The orjson transcoder, the mapper that stores each event under its own
stable topic, :func:`encode_event` (an event's fields, recording time and class
version as compact JSON) and :func:`decode_event` / :func:`decode_payload` (a stored
row back into its event, upcasting one an earlier version recorded, with errors that
name the row's position); nothing here touches a database.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from keyword import iskeyword
from typing import Any

import orjson
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder

from ..errors import CorruptEvent, NewerEventVersion, UnknownEventTopic
from ..tasks.events import (
    _PAYLOAD_FIELDS,
    EVENT_TYPES,
    TaskEvent,
    event_from_payload,
    event_payload,
)
from .aggregate import envelope
from .recorded import Recorded
from .wire import fast_decode

Row = tuple[int, str, int, str, bytes]
"""A stored row: position, originator id, originator version, topic, state."""
_STATE_TYPES = (bytes, bytearray, memoryview, str)
"""What a stored state may be read back as (a tuple: an ``X | Y`` is built on each use)."""


class OrjsonTranscoder(Transcoder):
    """JSON with orjson: compact, fast, and stable bytes for the same data."""

    def encode(self, obj: Any) -> bytes:
        return orjson.dumps(obj)

    def decode(self, data: bytes) -> Any:
        return orjson.loads(data)


def row_problem(originator_id: Any, version: Any, topic: Any, state: Any) -> str | None:
    """What makes a stored row unreadable before its payload is looked at (a column of
    the wrong type: the table was edited by hand), or ``None``."""
    if not isinstance(originator_id, str):
        return f"its stream id is {originator_id!r}, not text"
    if type(version) is not int or version < 1:
        return f"its version in stream {originator_id} is {version!r}, not a number from 1"
    if not isinstance(topic, str):
        return f"a row of stream {originator_id} has no topic ({topic!r})"
    if not isinstance(state, _STATE_TYPES):
        return f"{topic} of stream {originator_id}: its stored state is {state!r}"
    return None


def encodable(text: str) -> bool:
    """Whether ``text`` is valid UTF-8 (no lone surrogate): what a store can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_id(task_id: object) -> str | None:
    """A task id as text an error message can show (``None`` for one that is not text)."""
    if not isinstance(task_id, str):
        return None
    return task_id.encode("utf-8", "backslashreplace").decode("utf-8")


def decode_event(
    topic: str, originator_id: str, state: bytes, position: int | None = None
) -> TaskEvent:
    """Rebuild the tasktrail event of one stored row; errors name the position."""
    # The columns' types are checked only where a row fails (a log is read an event at
    # a time): a topic not among ours, a state orjson cannot take, an id not text.
    if originator_id.__class__ is str:
        event = fast_decode(topic, originator_id, state)
        if event is not None:
            return event
    return decode_checked(topic, originator_id, state, position)


def decode_checked(
    topic: str, originator_id: str, state: bytes, position: int | None = None
) -> TaskEvent:
    """:func:`decode_event` without its fast path: what the fast readers fall back to."""
    # The checked path: an unknown topic, a column or field of the wrong type, an event
    # an earlier version recorded (upcast here), or a class with no fast decoder.
    if topic not in EVENT_TYPES or originator_id.__class__ is not str:
        problem = row_problem(originator_id, 1, topic, state)
        if problem is not None:
            raise CorruptEvent(position, problem)
        raise UnknownEventTopic(position, topic)
    try:
        payload = orjson.loads(state)
    except orjson.JSONDecodeError as error:
        raise CorruptEvent(
            position, f"{topic} of task {originator_id}: not JSON ({error})"
        ) from None
    except TypeError:
        raise CorruptEvent(
            position, f"{topic} of task {originator_id}: stored state {state!r}"
        ) from None
    return decode_payload(topic, originator_id, payload, position)


def record_checked(
    position: int, originator_id: str, version: int, topic: str, state: bytes
) -> Recorded:
    """A store's row as its record, the checked way (see :func:`decode_checked`)."""
    if type(version) is not int or version < 1:
        problem = row_problem(originator_id, version, topic, state)
        raise CorruptEvent(position, problem or f"version {version!r}")
    return Recorded(position, decode_checked(topic, originator_id, state, position), version)


def decode_payload(
    topic: str, originator_id: str, payload: Any, position: int | None = None
) -> TaskEvent:
    """Rebuild an event from its decoded stored fields, upcasting an event an earlier
    version recorded (``upcast_vN_vM``)."""
    cls = EVENT_TYPES.get(topic)
    if cls is None:
        raise UnknownEventTopic(position, topic)
    if not isinstance(payload, dict):
        raise CorruptEvent(position, f"{topic} of task {originator_id}: payload is not an object")
    payload.pop("timestamp", None)
    payload.pop("digest", None)  # the chain's (.chain.DIGEST_KEY), checked by verify
    payload.pop("erased", None)  # an erased row's leaf (.erased), checked by verify
    from_version = payload.pop("class_version", 1)
    if isinstance(from_version, bool) or not isinstance(from_version, int) or from_version < 1:
        raise CorruptEvent(
            position, f"{topic} of task {originator_id}: class_version {from_version!r}"
        )
    if from_version > cls.class_version:
        raise NewerEventVersion(position, topic, from_version, cls.class_version)
    try:
        while from_version < cls.class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(payload)
            from_version += 1
        return event_from_payload(cls, originator_id, payload)
    except (TypeError, KeyError, ValueError) as error:
        raise CorruptEvent(position, f"{topic} of task {originator_id}: {error}") from None


def encode_event(event: TaskEvent, timestamp: datetime) -> bytes:
    """The stored bytes of one event: its fields, the recording time, its class version."""
    cls = event.__class__
    made = _ENCODERS.get(cls)
    if made is None or made[0] is not _PAYLOAD_FIELDS.get(cls):
        made = _ENCODERS[cls] = (_PAYLOAD_FIELDS.get(cls), _encoder(cls))
    return made[1](event, timestamp)


def _checked_encode(event: TaskEvent, timestamp: datetime) -> bytes:
    payload = event_payload(event)
    payload["timestamp"] = timestamp
    if type(event).class_version > 1:
        payload["class_version"] = type(event).class_version
    return orjson.dumps(payload)


_ENCODERS: dict[type, tuple[Any, Callable[[TaskEvent, datetime], bytes]]] = {}
"""Each event class's encoder, with the field list it was generated from."""


def _encoder(cls: type) -> Callable[[TaskEvent, datetime], bytes]:
    """:func:`_checked_encode` for one class, generated: the same dict, key for key in
    the same order (so the same bytes), built as one literal. A class that is not
    registered, or whose field names are not plain names, keeps the general one."""
    fields = _PAYLOAD_FIELDS.get(cls)
    if fields is None or not all(n.isidentifier() and not iskeyword(n) for n in fields):
        return _checked_encode
    items = "".join(f"{name!r}: event.{name}, " for name in fields)
    source = (
        "def encode(event, timestamp):\n"
        f"    payload = {{{items}'timestamp': timestamp}}\n"
        "    version = cls.class_version\n"  # read each time: a class may be given another
        "    if version > 1:\n"
        "        payload['class_version'] = version\n"
        "    return dumps(payload)\n"
    )
    namespace: dict[str, Any] = {"cls": cls, "dumps": orjson.dumps}
    exec(source, namespace)
    encode: Callable[[TaskEvent, datetime], bytes] = namespace["encode"]
    return encode


class TaskMapper(Mapper[str]):
    """Stores each tasktrail event under its own topic, in orjson."""

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        fact: TaskEvent = domain_event.fact
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=type(fact).topic,
            state=encode_event(fact, domain_event.timestamp),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        originator_id = str(stored_event.originator_id)
        fact = decode_event(stored_event.topic, originator_id, stored_event.state)
        timestamp = datetime.fromisoformat(orjson.loads(stored_event.state)["timestamp"])
        return envelope(fact, stored_event.originator_version, timestamp)
