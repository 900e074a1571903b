"""What a stored field may hold: its type, checked as an event is read back, and its
limits, checked before an event is written.

Reading: :func:`field_check` turns a field's annotation (``str``, ``int``,
``float``, ``bool``, a ``Literal``, ``tuple[str, ...]``, ``dict[str, str]``, any of
them ``| None``, or ``Any``) into a Python expression the event builders of
:mod:`.events` run on each stored value, so a field of the wrong JSON type
(``"on": 42``, ``"until": "soon"``) is refused where it is read, with its position,
instead of failing later in a fold.

Writing: :func:`text_problem` holds every store to the same limits (SQLite would
take a 1 MiB id that PostgreSQL refuses, and a NUL that PostgreSQL's text cannot
hold): no NUL, no lone surrogate (not UTF-8), and at most :data:`MAX_NAME_BYTES`
for names (ids, kinds, phases, memo names, roles, workers, an act's actor),
:data:`MAX_TEXT_BYTES` for free text (messages, reasons, summaries, errors) and
:data:`MAX_OTHER_BYTES` for any other string, as UTF-8.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union

MAX_TIME_MS = 253_402_300_799_999
"""The latest time (ms) a command takes and an event's ``at`` may hold:
9999-12-31T23:59:59.999Z; beyond it a time cannot be shown as a date, and it is no
deadline anyone means."""
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""The integers a stored number field may hold: SQLite's, and so every read model's."""
MAX_NAME_BYTES = 256
MAX_TEXT_BYTES = 64 * 1024
MAX_OTHER_BYTES = 4096
MAX_STREAM_BYTES = 1024
NAME_FIELDS = frozenset(
    {
        "task_id",
        "kind",
        "phase",
        "owner_id",
        "conversation_id",
        "project_ids",
        "name",
        "on",
        "by",
        "role",
        "turn_id",
        "active_turn_id",
        "worker",
        "pass_id",
        "actor",
        "source_id",
    }
)
TEXT_FIELDS = frozenset({"message", "reason", "reasons", "summary", "error", "why"})


def limit_of(field: str) -> int:
    """The most UTF-8 bytes a string in ``field`` may take."""
    if field in NAME_FIELDS:
        return MAX_NAME_BYTES
    if field in TEXT_FIELDS:
        return MAX_TEXT_BYTES
    return MAX_OTHER_BYTES


def text_problem(field: str, value: str, limit: int | None = None) -> str | None:
    """What makes a string unfit for the log, or ``None``."""
    most = limit if limit is not None else limit_of(field)
    if value.isascii() and len(value) <= most and "\x00" not in value:
        return None  # the usual case, without encoding it
    if "\x00" in value:
        return f"{field} holds a NUL character, which a store cannot keep the same way"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return f"{field} holds a lone surrogate: it is not valid Unicode text (UTF-8)"
    if size > most:
        return f"{field} is {size} bytes as UTF-8; the limit is {most}"
    return None


_PLAIN = frozenset({int, float, bool})


def finite_number(value: object) -> float | None:
    """``value`` if it is a finite number (an int or a float, not a flag), else ``None``:
    what a time or a span of ms must be before anything is decided or recorded with it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def number_problem(field: str, value: Any, *, integer: bool, optional: bool) -> str | None:
    """What makes a number field's value unfit for the log, or ``None``: what the
    readers would not take back (:func:`field_check`). JSON has no NaN nor infinity
    (orjson writes ``null``); an integer field takes no float, a number no flag."""
    kind = "an integer" if integer else "a number"
    if value is None:
        return None if optional else f"{field} must be {kind}, not None"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{field} must be {kind}, not {value!r}"
    if isinstance(value, float) and (integer or not math.isfinite(value)):
        return f"{field} must be {'an integer' if integer else 'a finite number'}, not {value!r}"
    if isinstance(value, int) and not INT_MIN <= value <= INT_MAX:
        return f"{field} must be an integer within 64 signed bits, not {value!r}"
    return None


def value_problem(field: str, value: Any) -> str | None:
    """What makes a field's value unfit for the log (its strings, at the top level and in
    tuples and string maps), or ``None``; JSON values are checked as JSON elsewhere."""
    if value is None or value.__class__ in _PLAIN:
        return None
    if isinstance(value, str):
        return text_problem(field, value)
    if isinstance(value, tuple):
        for item in value:
            if isinstance(item, str):
                problem = text_problem(field, item)
                if problem is not None:
                    return problem
    elif isinstance(value, dict) and field == "trace":
        for key, item in value.items():
            for text in (key, item):
                if isinstance(text, str):
                    problem = text_problem(field, text)
                    if problem is not None:
                        return problem
    return None


def field_check(annotation: Any, name: str = "") -> tuple[str | None, str, dict[str, Any]]:
    """``(expression, description, names)``: a Python expression over ``v`` that is true
    when a stored value fits the annotation (``None``: anything fits), what it
    expects in words, and the names the expression uses. ``at``, every event's
    decision time, must also lie within year 9999 either side of the epoch."""
    names: dict[str, Any] = {}
    if name == "at":
        names["max_time"] = MAX_TIME_MS
        return (
            "(v.__class__ is float or v.__class__ is int) and -max_time <= v <= max_time",
            "a time in ms within year 9999",
            names,
        )
    expression, description = _check(annotation, names)
    return expression, description, names


def _check(annotation: Any, names: dict[str, Any]) -> tuple[str | None, str]:
    if annotation is Any:
        return None, "any JSON value"
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        inner = [_check(a, names) for a in options]
        if any(expression is None for expression, _ in inner):
            return None, "any JSON value"
        expression = " or ".join(f"({e})" for e, _ in inner)
        words = " or ".join(d for _, d in inner)
        return f"v is None or {expression}", f"{words} or null"
    if origin is Literal:
        allowed = frozenset(typing.get_args(annotation))
        key = f"allowed_{len(names)}"
        names[key] = allowed
        listed = ", ".join(repr(a) for a in sorted(allowed, key=str))
        return f"v.__class__ is str and v in {key}", f"one of {listed}"
    if origin is tuple:
        return "v.__class__ is tuple and all(x.__class__ is str for x in v)", "a list of strings"
    if origin is dict:
        return (
            "v.__class__ is dict and all(k.__class__ is str and x.__class__ is str "
            "for k, x in v.items())",
            "an object of strings",
        )
    # An integer beyond 64 signed bits is no stored value: SQLite (a read model's
    # column) cannot hold one, and our writer refuses one (number_problem).
    names["int_min"], names["int_max"] = INT_MIN, INT_MAX
    bounded = "(v.__class__ is int and int_min <= v <= int_max)"
    simple = {
        str: ("v.__class__ is str", "a string"),
        int: (bounded, "an integer within 64 signed bits"),
        float: (
            f"v.__class__ is float or {bounded}",
            "a number (an integer within 64 signed bits)",
        ),
        bool: ("v.__class__ is bool", "true or false"),
    }
    if annotation in simple:
        return simple[annotation]
    return None, "any JSON value"


_FITS: dict[type, Callable[[Any], bool]] = {}
"""Each event class's :func:`fitting` check (its fields are fixed once it is registered)."""


def limits_problem(
    event: Any, text_fields: tuple[str, ...], number_fields: tuple[tuple[str, bool, bool], ...]
) -> str | None:
    """:func:`~.events.event_problem` of an event whose class's fields that may hold a
    string are ``text_fields`` and whose number fields are ``number_fields``, as
    ``(name, integer, optional)``."""
    cls = type(event)
    fits = _FITS.get(cls)
    if fits is None:
        fits = _FITS[cls] = fitting(text_fields, number_fields)
    if fits(event):
        return None  # the usual event: no call a field
    stream_id = event.stream_id()
    if not isinstance(stream_id, str):
        return f"{cls.__name__}: the stream id must be a string, not {stream_id!r}"
    problem = text_problem("stream id", stream_id, MAX_STREAM_BYTES)
    if problem is None and isinstance(event.task_id, str):
        problem = text_problem("task_id", event.task_id)
    for name in text_fields:
        if problem is not None:
            break
        problem = value_problem(name, getattr(event, name))
    for name, integer, optional in number_fields:
        if problem is not None:
            break
        value = getattr(event, name)
        # The usual case, a small integer, without a call.
        if value.__class__ is not int or not INT_MIN <= value <= INT_MAX:
            problem = number_problem(name, value, integer=integer, optional=optional)
    return f"{cls.__name__}: {problem}" if problem is not None else None


def fitting(
    text_fields: tuple[str, ...], number_fields: tuple[tuple[str, bool, bool], ...]
) -> Callable[[Any], bool]:
    """For one event class (its fields that may hold a string, and its number fields as
    ``(name, integer, optional)``), a generated ``fits(event)``: ``True`` only when the
    event is within every limit :func:`~.events.event_problem` holds it to, checked
    without a call for the usual values (short ASCII strings, small integers, finite
    floats, ``None``); ``False`` when it is not, or to be asked the long way (a non-ASCII
    string, a subclass, a trace): an append checks every event it writes."""
    task_id_short = _short("v", limit_of("task_id"))
    lines = [
        "def fits(event):",
        "    v = event.stream_id()",
        f"    if v.__class__ is not str or not {_short('v', MAX_STREAM_BYTES)}:",
        "        return False",
        "    v = event.task_id",
        f"    if isinstance(v, str) and not (v.__class__ is str and {task_id_short}):",
        "        return False",
    ]
    exact_x = "x.__class__ is str"
    for name in text_fields:
        most = limit_of(name)
        lines += [
            f"    v = event.{name}",
            "    if v.__class__ is str:",
            f"        if not {_short('v', most)}:",
            "            return False",
            "    elif v is not None and v.__class__ not in plain:",
            "        if v.__class__ is tuple:",
            "            for x in v:",
            f"                if isinstance(x, str) and not ({exact_x} and {_short('x', most)}):",
            "                    return False",
            f"        elif value_problem({name!r}, v) is not None:",
            "            return False",
        ]
    for name, integer, optional in number_fields:
        allowed = ["(v.__class__ is int and int_min <= v <= int_max)"]
        if not integer:
            allowed.append("(v.__class__ is float and v - v == 0.0)")  # inf, nan: not 0
        if optional:
            allowed.append("v is None")
        lines += [
            f"    v = event.{name}",
            f"    if not ({' or '.join(allowed)}):",
            "        return False",
        ]
    lines.append("    return True")
    namespace: dict[str, Any] = {
        "plain": _PLAIN,
        "int_min": INT_MIN,
        "int_max": INT_MAX,
        "value_problem": value_problem,
    }
    exec("\n".join(lines), namespace)
    fits: Callable[[Any], bool] = namespace["fits"]
    return fits


def _short(name: str, most: int) -> str:
    """An expression: the string ``name`` is ASCII, at most ``most`` long, without NUL
    (what :func:`text_problem` lets by without encoding it)."""
    return f'({name}.isascii() and len({name}) <= {most} and "\\x00" not in {name})'
