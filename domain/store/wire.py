"""Stored bytes straight into typed events, in C: a msgspec ``Struct`` mirroring each
event class's stored fields decodes and type-checks a row's JSON in one step, and a
builder generated once per class copies the fields into the (unchanged, public)
event class, each slot set once.

It is the fast path of :func:`.transcoder.decode_event` only: it answers ``None``
wherever it is not sure to build what the checked path builds (any error, a payload an
earlier class version recorded, a class it cannot build), and the checked path then
decodes the row again, upcasts it or says what is wrong with it. Measured on the
benchmark's mixed log (issue 15): rows to events about 5x the checked path's rate,
about the rate of ``orjson.loads`` alone.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Union

import msgspec

from ..tasks.events import EVENT_TYPES, MAX_TIME_MS, TaskEvent

FastDecode = Callable[[str, Any], TaskEvent | None]
"""``decode(stream_id, state)``: the event, or ``None`` (decode it the checked way)."""

_FAILED = (msgspec.ValidationError, msgspec.DecodeError, TypeError)
_TIME = msgspec.Meta(ge=-MAX_TIME_MS, le=MAX_TIME_MS)


def _wire_type(annotation: Any) -> Any:
    """The annotation msgspec decodes a field with. A ``float`` field takes ``int |
    float``: msgspec would turn a stored ``1`` into ``1.0``, and the event's bytes (an
    export, a chain's digest) would change."""
    if annotation is float:
        return int | float
    if typing.get_origin(annotation) in (Union, types.UnionType):
        options = [_wire_type(a) for a in typing.get_args(annotation)]
        union = options[0]
        for option in options[1:]:
            union = union | option
        return union
    return annotation


def _buildable(cls: type[TaskEvent]) -> bool:
    """Whether setting each slot once makes what ``__init__`` makes."""
    return not hasattr(cls, "__post_init__") and all(
        isinstance(getattr(cls, f.name, None), types.MemberDescriptorType)
        and f.default_factory is dataclasses.MISSING
        and f.init
        for f in dataclasses.fields(cls)
    )


def fast_decoder(cls: type[TaskEvent]) -> FastDecode | None:
    """The fast decoder of ``cls``'s stored rows, or ``None`` if it has none."""
    if not _buildable(cls):
        return None
    hints = typing.get_type_hints(cls)
    required: list[tuple[str, Any]] = []
    optional: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):
        if f.name == "task_id" and cls.task_stream:
            continue  # the stream's id
        wire = _wire_type(hints[f.name])
        if f.name == "at":  # as .fields.field_check: within year 9999 of the epoch
            wire = Annotated[int, _TIME] | Annotated[float, _TIME]
        if f.default is dataclasses.MISSING:
            required.append((f.name, wire))
        else:
            optional.append((f.name, wire, f.default))
    # What every stored payload also holds; the checked path pops them unchecked.
    optional += [("timestamp", Any, None), ("class_version", Any, 1), ("digest", Any, None)]
    struct = msgspec.defstruct(
        f"{cls.__name__}Stored",
        [*required, *optional],
        forbid_unknown_fields=True,  # an unknown field is an error the checked path names
        gc=False,
    )
    namespace: dict[str, Any] = {
        "new_object": object.__new__,
        "cls": cls,
        "version": cls.class_version,
        "decode": msgspec.json.Decoder(struct).decode,
        "failed": _FAILED,
    }
    lines = [
        "def fast(stream_id, state):",
        "    try:",
        "        stored = decode(state)",
        "    except failed:",
        "        return None",
        "    if stored.class_version != version:",
        "        return None",  # recorded by another class version: upcast (or refused)
        "    new = new_object(cls)",
    ]
    for f in dataclasses.fields(cls):
        namespace[f"set_{f.name}"] = getattr(cls, f.name).__set__
        source = "stream_id" if f.name == "task_id" and cls.task_stream else f"stored.{f.name}"
        lines.append(f"    set_{f.name}(new, {source})")
    lines.append("    return new")
    exec("\n".join(lines), namespace)
    fast: FastDecode = namespace["fast"]
    return fast


_FAST: dict[str, FastDecode | None] = {}


def fast_decode(topic: str, stream_id: str, state: Any) -> TaskEvent | None:
    """The event of a stored row the fast way, or ``None`` (see the module)."""
    try:
        fast = _FAST[topic]
    except KeyError:  # made on first use: turns and runs register their classes late
        cls = EVENT_TYPES.get(topic)
        if cls is None:
            return None  # not ours: the checked path says so (and nothing is kept)
        fast = _FAST[topic] = fast_decoder(cls)
    return fast(stream_id, state) if fast is not None else None
