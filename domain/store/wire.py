"""Stored bytes straight into typed events, in C: a msgspec ``Struct`` mirroring each
event class's stored fields decodes and type-checks a row's JSON in one step, and code
generated once per class copies the fields into the (unchanged, public) event class,
each slot set once.

Three readers share that code: :func:`fast_decode` (a row's state to its event, for
:func:`.transcoder.decode_event`), :data:`ROW_READERS` (a store's row to its
:class:`.recorded.Recorded`, for ``Store.read``) and :func:`line_decoder` (a JSONL
export's line to its record: one msgspec call decodes the envelope and the payload,
the line's ``topic`` choosing the payload's type, a tagged union).

They are fast paths only: each answers ``None`` wherever it is not sure to build what
the checked path builds (any error, a payload an earlier class version recorded, a
class it cannot build), and the checked path then reads the row again, upcasts it or
says what is wrong with it. So the mirrors are never more lenient than the checked
path: no unknown field is skipped (msgspec skips one without checking its text), an
integer stays within the 64 bits orjson reads as an integer, and a field that takes
any JSON value is read by orjson itself (beyond 64 bits orjson reads a float where
msgspec keeps the integer).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Union

import msgspec
import orjson

from ..drafts import draft_of, set_class
from ..tasks.events import EVENT_TYPES, MAX_TIME_MS, TaskEvent
from .recorded import Recorded

FastDecode = Callable[[str, Any], TaskEvent | None]
"""``decode(stream_id, state)``: the event, or ``None`` (decode it the checked way)."""
RowReader = Callable[[int, Any, Any, Any], Recorded | None]
"""``read(position, stream_id, version, state)``: the record, or ``None``."""
LineReader = Callable[[bytes], Recorded | None]
"""``read(line)``: the record of a JSONL export's event line, or ``None``."""

# orjson.JSONDecodeError is a ValueError: a value read by orjson that is not JSON.
DECODE_ERRORS = (msgspec.ValidationError, msgspec.DecodeError, TypeError, ValueError)
"""What a fast reader's decoding raises where it leaves a row or line to the checked path."""
_TIME = msgspec.Meta(ge=-MAX_TIME_MS, le=MAX_TIME_MS)
_INT = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
"""An integer orjson reads as one (it reads up to 2**64 - 1, then floats; msgspec bounds
only within 64 signed bits: a larger one takes the checked path)."""
_POSITION = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]
_NULL = msgspec.Raw(b"null")


class _NoMirror(Exception):
    """A field type the mirror does not take (a value of any JSON type inside another)."""


def _wire_type(annotation: Any) -> Any:
    """The annotation msgspec decodes a field with. A ``float`` field takes ``int |
    float``: msgspec would turn a stored ``1`` into ``1.0``, and the event's bytes (an
    export, a chain's digest) would change."""
    if annotation is Any:
        raise _NoMirror(annotation)
    if annotation is int:
        return _INT
    if annotation is float:
        return _INT | float
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = [_wire_type(a) for a in args]
        union = options[0]
        for option in options[1:]:
            union = union | option
        return union
    if origin in (tuple, list, dict):
        return origin[tuple(a if a is Ellipsis else _wire_type(a) for a in args)]
    return annotation


def _buildable(cls: type[TaskEvent]) -> bool:
    """Whether setting each slot once makes what ``__init__`` makes."""
    return not hasattr(cls, "__post_init__") and all(
        isinstance(getattr(cls, f.name, None), types.MemberDescriptorType)
        and f.default_factory is dataclasses.MISSING
        and f.init
        for f in dataclasses.fields(cls)
    )


_RECORDED_DRAFT = draft_of(Recorded)


@dataclasses.dataclass(frozen=True)
class _Mirror:
    """The fast readers of one event class."""

    event: FastDecode
    row: RowReader
    line_type: type[msgspec.Struct]


def _mirror(cls: type[TaskEvent]) -> _Mirror | None:
    """The fast readers of ``cls``'s stored rows and lines, or ``None`` if it has none."""
    if not _buildable(cls):
        return None
    hints = typing.get_type_hints(cls)
    stored: list[tuple[str, Any, Any] | tuple[str, Any]] = []
    loaded: list[str] = []  # the fields of any JSON value: read by orjson, from msgspec.Raw
    try:
        for f in dataclasses.fields(cls):
            if f.name == "task_id" and cls.task_stream:
                continue  # the stream's id
            if hints[f.name] is Any:
                wire: Any = msgspec.Raw
                loaded.append(f.name)
            elif f.name == "at":  # as .fields.field_check: within year 9999 of the epoch
                wire = Annotated[int, _TIME] | Annotated[float, _TIME]
            else:
                wire = _wire_type(hints[f.name])
            no_default = f.default is dataclasses.MISSING
            # A field of any JSON value absent from an older event reads as its None.
            default = _NULL if wire is msgspec.Raw and f.default is None else f.default
            stored.append((f.name, wire) if no_default else (f.name, wire, default))
    except _NoMirror:
        return None
    # What every stored payload also holds; the checked path pops the others unchecked.
    stored += [("timestamp", Any, None), ("class_version", int, 1), ("digest", Any, None)]
    # Keyword-only: the fields in the order they are stored, which msgspec reads fastest.
    struct = msgspec.defstruct(
        f"{cls.__name__}Stored", stored, kw_only=True, forbid_unknown_fields=True, gc=False
    )
    envelope = [("position", _POSITION), ("originator_id", str)]
    envelope += [("originator_version", _POSITION), ("at", Any), ("payload", struct)]
    draft = draft_of(cls)
    if draft is None or _RECORDED_DRAFT is None:
        return None
    namespace: dict[str, Any] = {
        "new_object": object.__new__,
        "cls": cls,
        "draft": draft,
        "set_class": set_class,
        "class_version": cls.class_version,
        "decode": msgspec.json.Decoder(struct).decode,
        "failed": DECODE_ERRORS,
        "loads": orjson.loads,
        "null": _NULL,
        "Recorded": Recorded,
        "recorded_draft": _RECORDED_DRAFT,
    }
    build = ["    if s.class_version != class_version:", "        return None"]
    build.append("    new = new_object(draft)")  # recorded by another class version: upcast
    for f in dataclasses.fields(cls):
        source = "stream_id" if f.name == "task_id" and cls.task_stream else f"s.{f.name}"
        build.append(f"    new.{f.name} = {f'any_{f.name}' if f.name in loaded else source}")
    build.append("    set_class(new, cls)")
    load = [
        f"        any_{n} = None if s.{n} == null else loads(memoryview(s.{n}))" for n in loaded
    ]
    record = ["    r = new_object(recorded_draft)", "    r.position = position"]
    record += ["    r.event = new", "    r.originator_version = version"]
    record += ["    set_class(r, Recorded)", "    return r"]
    lines = [
        "def event(stream_id, state):",
        *("    try:", "        s = decode(state)", *load),
        *("    except failed:", "        return None", *build, "    return new"),
        "def row(position, stream_id, version, state):",
        "    if stream_id.__class__ is not str or version.__class__ is not int or version < 1:",
        "        return None",  # the checked path says what is wrong
        *("    try:", "        s = decode(state)", *load),
        *("    except failed:", "        return None", *build, *record),
        "def line(read):",
        "    s = read.payload",
        "    stream_id, version = read.originator_id, read.originator_version",
        "    position = read.position",
        *(("    try:", *load, "    except failed:", "        return None") if load else ()),
        *build,
        *record,
    ]
    exec("\n".join(lines), namespace)
    line_type = msgspec.defstruct(
        f"{cls.__name__}Line",
        envelope,
        namespace={"record": namespace["line"]},  # a decoded line's record: line.record()
        tag_field="topic",
        tag=cls.topic,
        forbid_unknown_fields=True,
        gc=False,
    )
    return _Mirror(namespace["event"], namespace["row"], line_type)


_MIRRORS: dict[str, _Mirror | None] = {}


def _mirror_of(topic: str) -> _Mirror | None:
    try:
        return _MIRRORS[topic]
    except KeyError:  # made on first use: turns and runs register their classes late
        cls = EVENT_TYPES.get(topic)
        if cls is None:
            return None  # not ours: the checked path says so (and nothing is kept)
        mirror = _MIRRORS[topic] = _mirror(cls)
        return mirror


def fast_decode(topic: str, stream_id: str, state: Any) -> TaskEvent | None:
    """The event of a stored row the fast way, or ``None`` (see the module)."""
    mirror = _mirror_of(topic)
    return mirror.event(stream_id, state) if mirror is not None else None


class _RowReaders(dict[Any, RowReader | None]):
    """Each topic's :data:`RowReader` (``None``: read its rows the checked way), made on
    first use; a topic not ours is looked up again each time, and not kept."""

    def __missing__(self, topic: Any) -> RowReader | None:
        mirror = _mirror_of(topic) if topic.__class__ is str else None
        reader = mirror.row if mirror is not None else None
        if topic in _MIRRORS:
            self[topic] = reader
        return reader


ROW_READERS: dict[Any, RowReader | None] = _RowReaders()
"""``ROW_READERS[topic](position, stream_id, version, state)``: a stored row's record,
or ``None`` (read it the checked way); a ``None`` reader: the same for every row."""

_LINE_DECODERS: dict[int, Callable[[bytes], Any]] = {}


def line_decoder() -> Callable[[bytes], Any]:
    """msgspec's decoder of a JSONL export's event lines, for the event classes known
    now: ``decode(line).record()`` is the line's record, or ``None`` for a line it is
    not sure to read as the checked path reads it (an older event); ``decode`` raises
    one of :data:`DECODE_ERRORS` for any other (a heads line, an unknown event, extra
    keys, a field of the wrong type, not JSON)."""
    known = len(EVENT_TYPES)
    decode = _LINE_DECODERS.get(known)
    if decode is None:
        mirrors = [m for m in map(_mirror_of, list(EVENT_TYPES)) if m is not None]
        lines: Any = Union[tuple(m.line_type for m in mirrors)]  # noqa: UP007
        decode = msgspec.json.Decoder(lines).decode
        _LINE_DECODERS.clear()
        _LINE_DECODERS[known] = decode
    return decode


def line_reader() -> LineReader:
    """The fast reader of a JSONL export's event lines (see :func:`line_decoder`)."""
    decode = line_decoder()

    def read(raw: bytes) -> Recorded | None:
        try:
            recorded: Recorded | None = decode(raw).record()
        except DECODE_ERRORS:
            return None
        return recorded

    return read
