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
import gc
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from ..frozen import FrozenDict, FrozenList
from ..world import World
from .typecheck import FieldsCheck, fields_check

MAX_DEPTH = 256
"""How deep a snapshot's values may nest: no deeper than orjson writes (255 levels),
so deeper is no snapshot tasktrail wrote, and reading on would exhaust Python's stack
(``RecursionError``)."""


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
        from ..schedules import state as schedule_state
        from ..tasks import state as task_state
        from ..turns import settings as turn_settings
        from ..turns import state as turn_state

        modules = (task_state, turn_state, turn_settings, run_state, run_settings, ledger)
        for module in (*modules, schedule_state):
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
        self.classes: list[tuple[type[Any], list[str], dict[str, Any], FieldsCheck]] = []
        known = _known_classes()
        for entry in table:
            name, names = entry
            if name.__class__ is not str or not isinstance(names, list):
                raise SnapshotUnreadable("its class table is not of names and fields")
            cls = known.get(name)
            if cls is None:
                raise SnapshotUnreadable(f"it holds a {name!r}, a class tasktrail does not have")
            fields = {f.name: f for f in dataclasses.fields(cls)}
            if not all(n.__class__ is str for n in names) or not set(names) <= set(fields):
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
            check = fields_check(cls, tuple(names))
            self.classes.append((cls, list(names), defaults, check))

    def __call__(self, value: Any, depth: int = 0) -> Any:
        kind = value.__class__
        if kind is not list and kind is not dict:
            return value  # JSON's own: a string, a number (never NaN), true, false, null
        if depth > MAX_DEPTH:
            raise SnapshotUnreadable(f"its values nest deeper than {MAX_DEPTH} levels")
        inner = depth + 1
        if kind is list:
            return [self(v, inner) for v in value]
        if len(value) != 1 and set(value) != {"c", "v"}:
            raise SnapshotUnreadable(f"it holds an object tagged {sorted(value)}")
        if "c" in value:
            return self._made(value["c"], value["v"], inner)
        ((tag, items),) = value.items()
        if tag == "n":
            number = float(items)  # a non-finite float ("nan", "inf"): the only other type
            if math.isfinite(number):
                raise SnapshotUnreadable(f"it tags a finite number {items!r}")
            return number
        if items.__class__ is not list:
            raise SnapshotUnreadable(f"its {tag!r} holds no list")
        if tag == "t":
            return tuple(self(v, inner) for v in items)
        if tag == "d":
            return {self(k, inner): self(v, inner) for k, v in items}
        if tag == "m":  # read back read-only, as the fold made it
            return FrozenDict({self(k, inner): self(v, inner) for k, v in items})
        if tag == "l":
            return FrozenList([self(v, inner) for v in items])
        if tag == "s":
            return {self(v, inner) for v in items}
        if tag == "f":
            return frozenset(self(v, inner) for v in items)
        raise SnapshotUnreadable(f"it holds an object tagged {tag!r}")

    def _made(self, number: Any, values: Any, depth: int) -> Any:
        """An object of the class numbered ``number`` in the table, each field read back
        into its declared type (:mod:`.typecheck`)."""
        if number.__class__ is not int or not 0 <= number < len(self.classes):
            raise SnapshotUnreadable(f"it names class number {number!r}, not in its table")
        cls, names, defaults, check = self.classes[number]
        if values.__class__ is not list or len(values) != len(names):
            raise SnapshotUnreadable(f"its {cls.__name__} has {len(values)} values")
        decoded = [
            self(v, depth) if v.__class__ is list or v.__class__ is dict else v for v in values
        ]
        wrong = check(decoded)
        if wrong >= 0:
            raise SnapshotUnreadable(
                f"its {cls.__name__}.{names[wrong]} holds {_shown(decoded[wrong])}, "
                "not its declared type"
            )
        made = object.__new__(cls)
        for name, field_value in zip(names, decoded, strict=True):
            object.__setattr__(made, name, field_value)
        for name, default in defaults.items():
            object.__setattr__(made, name, default)
        return made


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
    return world_from(whole)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a snapshot is read: it makes many objects and
    no cycles, and each collector pass would walk them all again."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def world_from(whole: Any) -> World:
    """A world from :func:`encode_world`'s bytes as parsed JSON, every value read back
    into its declared type and the whole one a fold could have made
    (:mod:`.coherence`); :class:`SnapshotUnreadable` if it is not."""
    from .coherence import world_problem

    if not isinstance(whole, dict) or set(whole) != {"classes", "parts"}:
        raise SnapshotUnreadable("its body is not a world's parts")
    parts = whole["parts"]
    if not isinstance(parts, dict) or set(parts) != set(WORLD_PARTS):
        raise SnapshotUnreadable("its body is not a world's parts")
    world = World()
    try:
        with collector_paused():
            decode = _Decoder(whole["classes"])
            for part in WORLD_PARTS:
                decoded = decode(parts[part])
                if type(decoded) is not type(getattr(world, part)):
                    raise SnapshotUnreadable(f"its {part} is a {type(decoded).__name__}")
                setattr(world, part, decoded)
            problem = world_problem(world)
    except SnapshotUnreadable:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError) as error:
        raise SnapshotUnreadable(f"its body does not decode ({error})") from None
    if problem is not None:
        raise SnapshotUnreadable(problem)
    return world
