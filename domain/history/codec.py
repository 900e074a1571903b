"""A world to bytes and back: the body of a snapshot.

A world holds frozen dataclasses (task, turn, run states...), tuples, sets,
dicts keyed by tuples and the read-only dicts and lists of states
(:mod:`..frozen`), none of which JSON keeps apart. Each value is written as
JSON with a one-letter tag where JSON would lose its type, and read back
through an allowlist of tasktrail's own state classes: a snapshot names no
code to run, and one that names a class tasktrail does not know is refused as
corrupt (:class:`SnapshotUnreadable`), never half-read.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import orjson

from ..frozen import FrozenDict, FrozenList
from ..world import World


class SnapshotUnreadable(ValueError):
    """A snapshot's body that cannot be read back into a world (corrupt, or of
    classes this tasktrail does not have)."""


_CLASSES: dict[str, type[Any]] = {}


def _known_classes() -> dict[str, type[Any]]:
    """Every state class a world may hold, by ``module:qualname`` (found once)."""
    if not _CLASSES:
        from ..runs import ledger
        from ..runs import settings as run_settings
        from ..runs import state as run_state
        from ..tasks import state as task_state
        from ..turns import settings as turn_settings
        from ..turns import state as turn_state

        for module in (task_state, turn_state, turn_settings, run_state, run_settings, ledger):
            for value in vars(module).values():
                if dataclasses.is_dataclass(value) and isinstance(value, type):
                    _CLASSES[_name(value)] = value
    return _CLASSES


def _name(cls: type[Any]) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class _Encoder:
    """Values to JSON-ready data; each dataclass as its class's number in a table
    written once (``[name, [field, ...]]``) and its values in that field order."""

    def __init__(self) -> None:
        self.table: list[list[Any]] = []
        self._numbers: dict[type[Any], tuple[int, tuple[str, ...]]] = {}

    def __call__(self, value: Any) -> Any:
        kind = type(value)
        if value is None or kind is str or kind is bool or kind is int:
            return value
        if kind is float:
            return value if math.isfinite(value) else {"n": repr(value)}
        if kind is list:
            return [self(v) for v in value]
        if kind is tuple:
            return {"t": [self(v) for v in value]}
        if kind is dict or kind is FrozenDict:
            tag = "d" if kind is dict else "m"
            return {tag: [[self(k), self(v)] for k, v in value.items()]}
        if kind is FrozenList:
            return {"l": [self(v) for v in value]}
        if kind is set or kind is frozenset:
            return {"s" if kind is set else "f": sorted((self(v) for v in value), key=repr)}
        if dataclasses.is_dataclass(value):
            known = self._numbers.get(kind)
            if known is None:
                names = tuple(f.name for f in dataclasses.fields(value))
                known = self._numbers[kind] = (len(self.table), names)
                self.table.append([_name(kind), list(names)])
            number, names = known
            return {"c": number, "v": [self(getattr(value, name)) for name in names]}
        raise TypeError(f"a world holds a {kind.__name__}, which a snapshot cannot keep")


class _Decoder:
    """:class:`_Encoder`'s data back to values, classes read through the allowlist; a
    field the class has and the snapshot lacks takes the class's default."""

    def __init__(self, table: Any) -> None:
        if not isinstance(table, list):
            raise SnapshotUnreadable("its class table is not a list")
        self.classes: list[tuple[type[Any], list[str], dict[str, Any]]] = []
        known = _known_classes()
        for entry in table:
            name, names = entry
            cls = known.get(name)
            if cls is None:
                raise SnapshotUnreadable(f"it holds a {name!r}, a class tasktrail does not have")
            fields = {f.name: f for f in dataclasses.fields(cls)}
            if not set(names) <= set(fields):
                raise SnapshotUnreadable(f"its {cls.__name__} has fields {sorted(names)}")
            defaults = {}
            for missing in fields.keys() - set(names):
                field = fields[missing]
                if field.default is not dataclasses.MISSING:
                    defaults[missing] = field.default
                elif field.default_factory is not dataclasses.MISSING:
                    defaults[missing] = field.default_factory()
                else:
                    raise SnapshotUnreadable(f"its {cls.__name__} lacks field {missing!r}")
            self.classes.append((cls, list(names), defaults))

    def __call__(self, value: Any) -> Any:
        if type(value) is list:
            return [self(v) for v in value]
        if type(value) is not dict:
            return value
        if "c" in value:
            cls, names, defaults = self.classes[value["c"]]
            values = value["v"]
            if len(values) != len(names):
                raise SnapshotUnreadable(f"its {cls.__name__} has {len(values)} values")
            made = object.__new__(cls)
            for name, field_value in zip(names, values, strict=True):
                object.__setattr__(made, name, self(field_value))
            for name, default in defaults.items():
                object.__setattr__(made, name, default)
            return made
        if "t" in value:
            return tuple(self(v) for v in value["t"])
        if "d" in value:
            return {self(k): self(v) for k, v in value["d"]}
        if "m" in value:  # read back read-only, as the fold made it
            return FrozenDict({self(k): self(v) for k, v in value["m"]})
        if "l" in value:
            return FrozenList([self(v) for v in value["l"]])
        if "s" in value:
            return {self(v) for v in value["s"]}
        if "f" in value:
            return frozenset(self(v) for v in value["f"])
        if "n" in value:
            return float(value["n"])
        raise SnapshotUnreadable(f"it holds an object tagged {sorted(value)}")


WORLD_PARTS = (
    "tasks",
    "live_children",
    "waiters",
    "sleeping",
    "live",
    "streams",
    "stream_versions",
    "indexes",
    "counts",
    "folded",
)
"""What of a :class:`World` a snapshot keeps: all of its state, none of its wiring."""


def encode_world(world: World) -> bytes:
    """The world's state as bytes (JSON); :func:`decode_world` reads it back equal."""
    encode = _Encoder()
    parts = {part: encode(getattr(world, part)) for part in WORLD_PARTS}
    return orjson.dumps({"classes": encode.table, "parts": parts})


def decode_world(body: bytes) -> World:
    """A world from :func:`encode_world`'s bytes; :class:`SnapshotUnreadable` if they
    are not such bytes."""
    try:
        whole = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise SnapshotUnreadable(f"its body is not JSON ({error})") from None
    if not isinstance(whole, dict) or set(whole) != {"classes", "parts"}:
        raise SnapshotUnreadable("its body is not a world's parts")
    parts = whole["parts"]
    if not isinstance(parts, dict) or set(parts) != set(WORLD_PARTS):
        raise SnapshotUnreadable("its body is not a world's parts")
    world = World()
    try:
        decode = _Decoder(whole["classes"])
        for part in WORLD_PARTS:
            decoded = decode(parts[part])
            if type(decoded) is not type(getattr(world, part)):
                raise SnapshotUnreadable(f"its {part} is a {type(decoded).__name__}")
            setattr(world, part, decoded)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        if isinstance(error, SnapshotUnreadable):
            raise
        raise SnapshotUnreadable(f"its body does not decode ({error})") from None
    return world
