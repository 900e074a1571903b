"""Argument checks shared by the decisions: task ids, phase names and JSON values.

A bad argument is refused with :class:`~..errors.InvalidArgument` (an unknown
task with :class:`~..errors.UnknownTask`) before any rule is looked at, and
appends nothing. :func:`json_value` also returns a value as the log will read
it back, so the live state is the state a replay folds.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any, TypedDict

import orjson

from ..errors import InvalidArgument, UnknownTask
from ..world import Draft
from .fields import MAX_NAME_BYTES, MAX_TIME_MS, finite_number, text_problem
from .state import TaskState

MAX_VALUE_BYTES = 64 * 1024
"""The largest memo value, error message or error detail a task may record, as
JSON (64 KiB): the log keeps every value forever, so large data belongs in a
blob store."""


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 3, 80, 80, 80


def shown(value: object) -> str:
    """``value`` as a refusal quotes it: its repr, cut short where it is long or deep (a
    5,000-deep list is shown, never recursed into)."""
    try:
        return _SHOWN.repr(value)
    except Exception:  # a repr that fails (or recurses) on its own: name the type
        return f"a {type(value).__name__}"


def require_task(draft: Draft, task_id: str) -> TaskState:
    """The task named ``task_id``; refused if the id is not a non-empty string or no task's."""
    if not isinstance(task_id, str) or not task_id:
        raise InvalidArgument(f"a task id must be a non-empty string, not {shown(task_id)}")
    state = draft.get(task_id)
    if state is None:
        raise UnknownTask(task_id)
    return state


def phase_name(value: object, what: str, task_id: str | None) -> str:
    """Check that ``value`` (a phase, a kind, a name) is a non-empty string the log can
    keep (no NUL, valid Unicode, at most MAX_NAME_BYTES as UTF-8); returns it."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(
            f"{what} must be a non-empty string, not {shown(value)}", task_id=task_id
        )
    problem = text_problem(what, value, MAX_NAME_BYTES)
    if problem is not None:
        raise InvalidArgument(problem, task_id=task_id)
    return value


class Act(TypedDict):
    """An operator's act as its events record it: who, and why."""

    actor: str | None
    why: str | None


def act_fields(actor: object, why: object, task_id: str | None) -> Act:
    """Check an operator's ``actor`` (a name, at most MAX_NAME_BYTES) and ``why`` (free
    text): each a non-empty string the log can keep, or ``None``. Returns them as the
    act's event fields (``actor``, ``why``)."""
    checked: list[str | None] = []
    for name, value, field in (("actor", actor, "actor"), ("reason", why, "why")):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidArgument(
                f"{name} must be a non-empty string or None, not {shown(value)}", task_id=task_id
            )
        problem = None if value is None else text_problem(field, value)
        if problem is not None:
            raise InvalidArgument(problem.replace(field, name, 1), task_id=task_id)
        checked.append(value)
    return Act(actor=checked[0], why=checked[1])


def time_ms(value: object, what: str, task_id: str | None) -> float:
    """Check that ``value`` is a finite time >= 0 in ms, no later than MAX_TIME_MS."""
    usable = finite_number(value)
    if usable is None or usable < 0 or usable > MAX_TIME_MS:
        raise InvalidArgument(
            f"{what} must be a time in ms from 0 to {MAX_TIME_MS} (year 9999), not {shown(value)}",
            task_id=task_id,
        )
    return usable


def json_value(value: Any, what: str, task_id: str | None) -> Any:
    """Check that ``value`` is JSON the log can keep: encodable, finite, at most
    MAX_VALUE_BYTES. Returns it as the log will read it back (a tuple as a list, a
    date as its ISO text), so the live state is the state a replay folds."""
    try:
        encoded = orjson.dumps(value)
    except TypeError as error:
        raise InvalidArgument(f"{what} must be JSON data: {error}", task_id=task_id) from None
    if len(encoded) > MAX_VALUE_BYTES:
        raise InvalidArgument(
            f"{what} is {len(encoded)} bytes as JSON; the limit is {MAX_VALUE_BYTES}",
            task_id=task_id,
        )
    if not _finite(value):  # orjson would write NaN and infinities as null
        raise InvalidArgument(
            f"{what} must be JSON data: NaN and infinities are not JSON", task_id=task_id
        )
    return orjson.loads(encoded)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(item) for item in value)
    return True
