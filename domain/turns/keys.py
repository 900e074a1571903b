"""The dirty keys that scope a controller pass: ``operator`` (scheduler-wide work),
``task:<id>`` (every role of a task) and ``role:<id>/<role>`` (one role), their parts
URI-encoded (:func:`task_key`, :func:`role_key`). :func:`parse_key` refuses a
malformed key with an ``InvalidArgument`` naming it, and :func:`natural_key` is the
numeric-aware order passes sort ids and keys by.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote

from ..errors import InvalidArgument

OPERATOR_KEY = "operator"

_URI_SAFE = "-_.!~*'()"  # what encodeURIComponent leaves alone


def _encode(part: str) -> str:
    return quote(part, safe=_URI_SAFE)


def task_key(task_id: str) -> str:
    """The dirty key of every role of a task: ``task:<URI-encoded id>``."""
    return f"task:{_encode(task_id)}"


def role_key(task_id: str, role: str) -> str:
    """The dirty key of one role of a task: ``role:<URI-encoded id>/<URI-encoded role>``."""
    return f"role:{_encode(task_id)}/{_encode(role)}"


@dataclass(frozen=True, slots=True)
class DirtyKey:
    """A parsed dirty key: ``operator``, a task, or one role of a task."""

    text: str
    kind: Literal["operator", "task", "role"]
    task_id: str | None = None
    role: str | None = None


def _bad_key(key: object, why: str) -> InvalidArgument:
    return InvalidArgument(
        f"controller key is invalid: {key!r} ({why}); expected 'operator', 'task:<id>' or "
        "'role:<id>/<role>' with URI-encoded parts (see task_key and role_key)"
    )


def _decode_part(key: str, part: str, what: str) -> str:
    if not part:
        raise _bad_key(key, f"the {what} is empty")
    try:
        decoded = unquote(part, errors="strict")
    except UnicodeDecodeError:
        raise _bad_key(key, f"the {what} is not valid percent-encoded UTF-8") from None
    if not decoded.strip():
        raise _bad_key(key, f"the {what} is blank")
    if decoded != decoded.strip():
        raise _bad_key(key, f"the {what} has surrounding whitespace")
    if "\x00" in decoded:
        raise _bad_key(key, f"the {what} contains NUL")
    if _encode(decoded) != part:
        raise _bad_key(key, f"the {what} is not canonically encoded; use {_encode(decoded)!r}")
    return decoded


def parse_key(key: object) -> DirtyKey:
    """Parse one dirty key, or raise :class:`~.errors.InvalidArgument` naming it."""
    if not isinstance(key, str):
        raise _bad_key(key, "a key is a string")
    if key == OPERATOR_KEY:
        return DirtyKey(key, "operator")
    kind, sep, rest = key.partition(":")
    if not sep or kind not in ("task", "role"):
        raise _bad_key(key, "unknown kind")
    if kind == "task":
        return DirtyKey(key, "task", _decode_part(key, rest, "task id"))
    parts = rest.split("/")
    if len(parts) != 2:
        raise _bad_key(key, "a role key holds exactly one '/' between task id and role")
    return DirtyKey(
        key, "role", _decode_part(key, parts[0], "task id"), _decode_part(key, parts[1], "role")
    )


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Numeric-aware ordering (``t2`` before ``t10``), as yui sorts ids."""
    return tuple(
        (0, int(piece)) if piece.isdigit() else (1, piece)
        for piece in re.split(r"(\d+)", text)
        if piece
    )
