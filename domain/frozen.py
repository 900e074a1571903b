"""Read-only containers for the fields of frozen states.

A state is a frozen dataclass, but a ``dict`` or ``list`` it holds could still be
changed in place by whoever reads it: a change no event recorded, that a replay and
a restarted process would not see, and, for a value many states share (the one empty
memos of every task without memos), a change to all of them. The fold builds these
instead. :class:`FrozenDict` and :class:`FrozenList` are ``dict`` and ``list``
subclasses whose every mutating method raises :class:`TypeError`: reading,
comparing (equal to a plain ``dict``/``list`` of the same items), ``isinstance``,
``json``, ``orjson`` (which writes ``dict``/``list`` subclasses as such) and
``copy``/``pickle`` behave as for the plain types, and the bytes written are the same.
(``types.MappingProxyType`` was the other choice: orjson, ``json`` and ``copy`` refuse
it, and it is no ``dict`` to code that asks.) As with a frozen dataclass, only a
caller that calls the base class's methods on it directly gets past the refusal.

:func:`frozen` makes a JSON value (a memo, a run's payload, an error's detail)
read-only all the way down; :func:`thawed` is a plain copy of one, to change freely.
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


def _refuse(self: object, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        f"a {type(self).__name__} of a tasktrail state is read-only: a change must be "
        "recorded as an event (copy it with dict()/list() to change a copy)"
    )


class FrozenDict(dict[K, V]):
    """A ``dict`` that refuses every change (see the module)."""

    __slots__ = ()

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        # dict's own reduce refills the new object item by item, which it refuses.
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenDict[K, V]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict[K, V]:
        return self  # nothing in it changes (its values are states or frozen JSON)


class FrozenList(list[T]):
    """A ``list`` that refuses every change (see the module)."""

    __slots__ = ()

    __setitem__ = _refuse
    __delitem__ = _refuse
    __iadd__ = _refuse
    __imul__ = _refuse
    append = _refuse
    extend = _refuse
    insert = _refuse
    pop = _refuse
    remove = _refuse
    clear = _refuse
    sort = _refuse
    reverse = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (list(self),))

    def __copy__(self) -> FrozenList[T]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList[T]:
        return self


EMPTY: FrozenDict[Any, Any] = FrozenDict()
"""The one empty mapping states share (memos, roles, obligations of none)."""


def frozen(value: Any) -> Any:
    """A JSON value made read-only all the way down: each ``dict`` a
    :class:`FrozenDict`, each ``list`` a :class:`FrozenList` (scalars as they are; a
    value frozen already is returned as it is)."""
    kind = value.__class__
    # A fold freezes each memo it folds: scalars, most of a value, skip the call.
    if kind is dict:
        return FrozenDict({k: frozen(v) if v.__class__ in _NESTED else v for k, v in value.items()})
    if kind is list:
        return FrozenList([frozen(v) if v.__class__ in _NESTED else v for v in value])
    return value


_NESTED = frozenset({dict, list})


def thawed(value: Any) -> Any:
    """A plain copy of a (frozen) JSON value, to change freely: ``dict`` and ``list``."""
    if isinstance(value, dict):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thawed(v) for v in value]
    return value
