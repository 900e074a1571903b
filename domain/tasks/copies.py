"""Cheap copies of frozen states: ``replace`` as ``dataclasses.replace`` does it, at a
fraction of its cost.

Every fold makes a new frozen state per event (a task's, a Turn's, a run's), so the
copy is much of what a fold costs. ``dataclasses.replace`` reads every field into a
dict and calls the generated ``__init__``, which sets each through
``object.__setattr__``. :func:`copier` generates, once per class, a function whose
keyword-only parameters are the class's fields (Python binds the changes, no dict is
built). It fills a *twin*: a plain class with the same ``__slots__``, whose slots
plain attribute stores set (the frozen class refuses them), and then makes the new
object the frozen class's own (``__class__`` assignment, which Python allows between
classes of the same slot layout). Only classes for which that is the same as
``__init__`` get one: frozen, slotted dataclasses with no ``__post_init__`` (which
would validate), no ``InitVar`` and no ``init=False`` field; any other class is copied
by ``dataclasses.replace``. A class whose slots are not exactly its fields (a base
with slots of its own, say) is filled through its slot descriptors instead.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any, TypeVar

from ..drafts import draft_of

T = TypeVar("T")

_UNCHANGED: Any = type("Unchanged", (), {"__repr__": lambda self: "<unchanged>"})()
"""The default of every parameter of a generated copy: the field keeps its value."""


def copyable(cls: type) -> bool:
    """Whether :func:`copier` can copy ``cls`` the fast way."""
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        return False
    if hasattr(cls, "__post_init__"):
        return False
    every = getattr(cls, "__dataclass_fields__", {})
    if any(f._field_type is not dataclasses._FIELD for f in every.values()):  # type: ignore[attr-defined]
        return False  # an InitVar or a ClassVar pseudo-field: __init__ does more
    return all(
        f.init and isinstance(getattr(cls, f.name, None), types.MemberDescriptorType)
        for f in dataclasses.fields(cls)
    )


def copier(
    cls: type[T], *, stamped: bool = False, changing: tuple[str, ...] | None = None
) -> Callable[..., T]:
    """``copy(state, /, **changes)``: a copy of a ``cls`` with ``changes``, as
    ``dataclasses.replace(state, **changes)`` makes it (an unknown field is a
    :class:`TypeError`); ``dataclasses.replace`` itself for a class :func:`copyable`
    refuses. ``stamped``: ``copy(state, event, /, **changes)``, the copy an event
    makes of a state that counts its events, with ``updated_at=event.at`` and
    ``events=state.events + 1`` unless ``changes`` set them (one call, one copy).
    ``changing``: the fields every call changes, and only those, all required (a
    fold's hottest copies: no field is asked whether it changed)."""
    if not copyable(cls):
        if stamped:
            return lambda state, event, /, **changes: dataclasses.replace(
                state, **{"updated_at": event.at, "events": state.events + 1, **changes}
            )
        return dataclasses.replace
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if changing is not None and not set(changing) <= set(names):
        raise TypeError(f"{cls.__name__} has no field {sorted(set(changing) - set(names))}")
    namespace: dict[str, Any] = {"new_object": object.__new__, "cls": cls, "_": _UNCHANGED}
    unchanged = {name: f"state.{name}" for name in names}
    if stamped:
        unchanged.update(updated_at="event.at", events="state.events + 1")
    if changing is None:
        params = ", ".join(f"{name}=_" for name in names)
        value = {name: f"{unchanged[name]} if {name} is _ else {name}" for name in names}
    else:
        params = ", ".join(changing)
        value = {name: name if name in changing else unchanged[name] for name in names}
    head = f"def replace(state, {'event, ' if stamped else ''}/, *, {params}):"
    twin = _twin(cls, names)
    if twin is not None:
        namespace["twin"] = twin
        lines = [head, "    new = new_object(twin)"]
        lines += [f"    new.{name} = {value[name]}" for name in names]
        lines.append("    new.__class__ = cls")
    else:
        lines = [head, "    new = new_object(cls)"]
        for name in names:
            namespace[f"set_{name}"] = getattr(cls, name).__set__  # the slot, maybe a base's
            lines.append(f"    set_{name}(new, {value[name]})")
    lines.append("    return new")
    exec("\n".join(lines), namespace)
    copy: Callable[..., T] = namespace["replace"]
    copy.__doc__ = f"A copy of a {cls.__name__} with ``changes``."
    copy.__qualname__ = f"copier({cls.__name__})"
    return copy


def maker(cls: type[T]) -> Callable[..., T]:
    """A function that makes a ``cls`` as ``cls(...)`` does, with the same parameters
    and defaults, without the frozen ``__init__``'s ``object.__setattr__`` per field
    (several times the cost); ``cls`` itself for a class :func:`copyable` refuses."""
    every = dataclasses.fields(cls) if copyable(cls) else ()  # type: ignore[arg-type]
    twin = _twin(cls, [f.name for f in every]) if every else None
    if twin is None:
        return cls
    namespace: dict[str, Any] = {"new_object": object.__new__, "cls": cls, "twin": twin}
    namespace["_"] = _UNCHANGED  # marks a field left to its default_factory
    positional: list[str] = []
    keywords: list[str] = []
    lines = ["    new = new_object(twin)"]
    for f in every:
        value = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"default_{f.name}"] = f.default
            param = f"{f.name}=default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"factory_{f.name}"] = f.default_factory
            param, value = f"{f.name}=_", f"factory_{f.name}() if {f.name} is _ else {f.name}"
        else:
            param = f.name
        (keywords if f.kw_only else positional).append(param)
        lines.append(f"    new.{f.name} = {value}")
    params = ", ".join(positional + (["*", *keywords] if keywords else []))
    lines = [f"def make({params}):", *lines, "    new.__class__ = cls", "    return new"]
    exec("\n".join(lines), namespace)
    make: Callable[..., T] = namespace["make"]
    make.__doc__ = f"A new {cls.__name__}, as ``{cls.__name__}(...)`` makes it."
    make.__qualname__ = f"maker({cls.__name__})"
    return make


def _twin(cls: type, names: list[str]) -> type | None:
    """:func:`~..drafts.draft_of` ``cls``, when its own slots are the fields ``names``
    and it has no base to hold others (a copy sets every slot it has)."""
    if cls.__bases__ != (object,) or tuple(cls.__dict__["__slots__"]) != tuple(names):
        return None
    return draft_of(cls)


_COPIERS: dict[type, Callable[..., Any]] = {}


def replace(state: T, /, **changes: Any) -> T:
    """``dataclasses.replace``, through the class's :func:`copier` (made on first use)."""
    try:
        copy = _COPIERS[state.__class__]
    except KeyError:
        copy = _COPIERS[state.__class__] = copier(state.__class__)
    result: T = copy(state, **changes)
    return result
