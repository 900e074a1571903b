"""What a snapshot's values must be: each field of a state class read back into its
declared type, and each part of a world into the type the world declares for it.

A snapshot is read from a table anyone with write access to the store can edit, so
a value of the wrong type (a number turned into text, a status no task has) must be
refused where it is read, never met later by a rule (``'>=' not supported between
'str' and 'int'``). :func:`checker` turns an annotation (``str``, ``int``, ``float``,
``bool``, ``None``, ``Literal``, unions, ``tuple[X, ...]``, ``list``, ``set``,
``dict``/``Mapping``, a state class, ``Any``) into a function that says whether a
decoded value fits it; an annotation it does not know raises :class:`TypeError`
when the checker is made, so a state class with a new kind of field is caught by
the tests, not by a snapshot.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

from ..tasks.fields import INT_MAX, INT_MIN

Check = Callable[[Any], bool]
_CONTAINERS = {list: "list", set: "set", frozenset: "frozenset"}


class _Expressions:
    """An annotation as a Python expression over a variable, true when a value fits;
    the names the expressions use (allowed literals, state classes) in :attr:`names`."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {"int_min": INT_MIN, "int_max": INT_MAX}
        self._loops = 0

    def name(self, value: Any) -> str:
        key = f"n{len(self.names)}"
        self.names[key] = value
        return key

    def of(self, annotation: Any, v: str) -> str:
        if annotation is Any or annotation is object:
            return "True"
        integer = f"({v}.__class__ is int and int_min <= {v} <= int_max)"
        simple = {
            str: f"{v}.__class__ is str",
            int: integer,
            float: f"({v}.__class__ is float or {integer})",
            bool: f"{v}.__class__ is bool",
            type(None): f"{v} is None",
            None: f"{v} is None",
        }
        if annotation in simple:
            return simple[annotation]
        origin = typing.get_origin(annotation)
        arguments = typing.get_args(annotation)
        if origin in (Union, types.UnionType):
            return "(" + " or ".join(f"({self.of(a, v)})" for a in arguments) + ")"
        if origin is Literal:
            allowed = self.name(frozenset(arguments))
            return f"({v}.__class__ in (str, int, bool) and {v} in {allowed})"
        self._loops += 1
        x, k = f"x{self._loops}", f"k{self._loops}"
        if origin is tuple:
            if len(arguments) == 2 and arguments[1] is Ellipsis:
                return (
                    f"({v}.__class__ is tuple and all({self.of(arguments[0], x)} for {x} in {v}))"
                )
            fixed = " and ".join(self.of(a, f"{v}[{i}]") for i, a in enumerate(arguments))
            return (
                f"({v}.__class__ is tuple and len({v}) == {len(arguments)} and {fixed or 'True'})"
            )
        if origin in _CONTAINERS:
            each = self.of(arguments[0], x) if arguments else "True"
            return f"(isinstance({v}, {_CONTAINERS[origin]}) and all({each} for {x} in {v}))"
        if origin in (dict, Mapping):
            key = self.of(arguments[0], k) if arguments else "True"
            value = self.of(arguments[1], x) if arguments else "True"
            return f"(isinstance({v}, dict) and all({key} and {value} for {k}, {x} in {v}.items()))"
        if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
            return f"isinstance({v}, {self.name(annotation)})"
        raise TypeError(f"a snapshot cannot check a value of type {annotation!r}")


def checker(annotation: Any) -> Check:
    """A function telling whether a decoded value fits ``annotation``."""
    expressions = _Expressions()
    body = expressions.of(annotation, "v")
    fits: Check = eval(f"lambda v: {body}", dict(expressions.names))
    return fits


FieldsCheck = Callable[[list[Any]], int]
"""Given a class's decoded values in its field order, the index of the first that does
not fit its declared type (-1: all fit)."""

_FIELDS: dict[tuple[type[Any], tuple[str, ...]], FieldsCheck] = {}


def fields_check(cls: type[Any], names: tuple[str, ...]) -> FieldsCheck:
    """The check of a state class's values given in the order ``names`` (one compiled
    function per class and order: a snapshot holds many objects of few classes)."""
    known = _FIELDS.get((cls, names))
    if known is None:
        hints = typing.get_type_hints(cls)
        expressions = _Expressions()
        lines = ["def check(values):"]
        for index, name in enumerate(names):
            test = expressions.of(hints[name], f"values[{index}]")
            if test != "True":
                lines.append(f"    if not ({test}): return {index}")
        lines.append("    return -1")
        scope = dict(expressions.names)
        exec("\n".join(lines), scope)  # our own annotations, compiled once
        known = _FIELDS[(cls, names)] = scope["check"]
    return known


def field_checks(cls: type[Any]) -> dict[str, Check]:
    """The check of each field of a state class, by name."""
    hints = typing.get_type_hints(cls)
    return {field.name: checker(hints[field.name]) for field in dataclasses.fields(cls)}
