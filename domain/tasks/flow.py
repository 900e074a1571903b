"""Flow control's policies: a definition's :class:`Limit` and :class:`Rate`, a
submission's :class:`Debounce` (rules 33 to 36), and a task's keys computed from them.

A policy that cannot be kept is refused when it is made (rule 36, as rule 25 refuses a
retry policy): :class:`~..errors.InvalidFlowPolicy` names the argument. A key function
is asked once per task, with the memos it is submitted with (a plain copy: ``{}`` for
none), and answers a key (a non-empty string, at most 256 bytes) or ``None`` (the policy
does not hold this task back); what it answered is recorded (``FlowKeysRecorded``,
:mod:`.flow_events`) with the policy's numbers, so the rules, a replay, ``tasks`` and
``explain`` read the keys from the log and never ask the registry again. An answer that
names no key (it raised, or is not a string) refuses the submission under rule 36.

Durations here are seconds, as :class:`~.retry.Retry`'s are; times on the scheduler
clock stay milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import InvalidFlowPolicy
from ..frozen import thawed
from .fields import MAX_NAME_BYTES, MAX_STREAM_BYTES, text_problem
from .state import Flow
from .validation import shown

KeyFunction = Callable[[dict[str, Any]], "str | None"]
"""A limit's or a rate's key: ``fn(memos)`` -> a key (the tenant, the model), or ``None``."""

MAX_WAIT_S = 366 * 24 * 3600.0
"""The longest debounce window: a year (a window far longer is a mistake, not a policy)."""

LIMIT_PREFIX, RATE_PREFIX, DEBOUNCE_PREFIX = "limit:", "rate:", "debounce:"


def flow_stream_id(prefix: str, kind: str, key: str) -> str:
    """The stream of a limit's, rate's or debounce's key of ``kind``: the prefix and the
    JSON pair ``[kind, key]`` (one stream per pair, whatever characters they hold)."""
    return prefix + orjson.dumps([kind, key]).decode()


def _whole(value: object, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidFlowPolicy(f"{name} must be an int >= {least}, not {shown(value)}")
    return value


def _seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidFlowPolicy(f"{name} must be a finite number of seconds, not {shown(value)}")
    return float(value)


def _key_function(value: object, name: str) -> None:
    if not callable(value):
        raise InvalidFlowPolicy(f"{name} must be a function of the memos, not {shown(value)}")


@dataclass(frozen=True)
class Limit:
    """At most ``max_running`` tasks of the definition's kind with the same key
    (``key(memos)``: the tenant, say) run a phase at once, across every worker on the
    store (rule 33). Refused when made, naming rule 36, if it cannot be kept."""

    key: KeyFunction
    max_running: int

    def __post_init__(self) -> None:
        _key_function(self.key, "Limit.key")
        _whole(self.max_running, "Limit.max_running", 1)


@dataclass(frozen=True)
class Rate:
    """Phase starts of the definition's kind with the same key (``key(memos)``: the
    model, say) within a token bucket on the scheduler clock (rule 34): it starts full
    with ``burst`` tokens, each invocation of a phase takes one, and it fills again at
    ``per_s`` tokens a second. Refused when made, naming rule 36, if it cannot be kept."""

    key: KeyFunction
    per_s: float
    burst: int = 1

    def __post_init__(self) -> None:
        _key_function(self.key, "Rate.key")
        if _seconds(self.per_s, "Rate.per_s") <= 0:
            raise InvalidFlowPolicy(f"Rate.per_s must be > 0 tokens a second, not {self.per_s!r}")
        _whole(self.burst, "Rate.burst", 1)


@dataclass(frozen=True)
class Debounce:
    """Submits of one kind with ``key`` within ``wait_s`` seconds of each other collapse
    into one task, ready ``wait_s`` after the last of them, with its memos (rule 35).
    Refused when made, naming rule 36, if it cannot be kept."""

    key: str
    wait_s: float

    def __post_init__(self) -> None:
        checked_key(self.key, "Debounce.key", None)
        wait = _seconds(self.wait_s, "Debounce.wait_s")
        if not 0 < wait <= MAX_WAIT_S:
            raise InvalidFlowPolicy(
                f"Debounce.wait_s must be > 0 and at most {MAX_WAIT_S:g} seconds (a year), "
                f"not {self.wait_s!r}"
            )


def checked_key(value: object, what: str, task_id: str | None) -> str:
    """A key as the log keeps it: a non-empty string of at most 256 bytes (no NUL, valid
    Unicode); refused under rule 36 otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidFlowPolicy(
            f"{what} must be a non-empty string, not {shown(value)}", task_id=task_id
        )
    problem = text_problem(what, value, MAX_NAME_BYTES)
    if problem is not None:
        raise InvalidFlowPolicy(problem, task_id=task_id)
    return value


def check_flow_policies(kind: str, limit: object, rate: object) -> None:
    """A definition's flow policies, checked (rule 36): each a :class:`Limit` /
    :class:`Rate` or ``None``."""
    if limit is not None and not isinstance(limit, Limit):
        raise InvalidFlowPolicy(
            f"TaskDefinition {kind}: limit must be a Limit or None, not {shown(limit)}"
        )
    if rate is not None and not isinstance(rate, Rate):
        raise InvalidFlowPolicy(
            f"TaskDefinition {kind}: rate must be a Rate or None, not {shown(rate)}"
        )


def _answer(fn: KeyFunction, memos: Mapping[str, Any], what: str, task_id: str | None) -> Any:
    try:
        return fn(dict(thawed(memos)))
    except Exception as error:
        raise InvalidFlowPolicy(
            f"{what} raised {type(error).__name__}: {error}", task_id=task_id
        ) from None


def flow_for(
    kind: str,
    limit: Limit | None,
    rate: Rate | None,
    memos: Mapping[str, Any] | None,
    task_id: str | None = None,
) -> Flow | None:
    """The keys ``limit`` and ``rate`` give a task of ``kind`` submitted with ``memos``,
    with their numbers, as recorded (``None`` when the definition has neither). A key
    function that raises, or answers something other than a key or ``None``, is refused
    under rule 36."""
    if limit is None and rate is None:
        return None
    given = memos or {}
    limit_key = rate_key = None
    if limit is not None:
        answer = _answer(limit.key, given, f"the limit key of {kind}", task_id)
        if answer is not None:
            limit_key = _keyed(kind, answer, LIMIT_PREFIX, "limit", task_id)
    if rate is not None:
        answer = _answer(rate.key, given, f"the rate key of {kind}", task_id)
        if answer is not None:
            rate_key = _keyed(kind, answer, RATE_PREFIX, "rate", task_id)
    return Flow(
        limit_key=limit_key,
        max_running=limit.max_running if limit_key is not None and limit else None,
        rate_key=rate_key,
        per_s=float(rate.per_s) if rate_key is not None and rate else None,
        burst=rate.burst if rate_key is not None and rate else None,
    )


def _keyed(kind: str, answer: object, prefix: str, what: str, task_id: str | None) -> str:
    key = checked_key(answer, f"the {what} key of {kind}", task_id)
    problem = text_problem("stream id", flow_stream_id(prefix, kind, key), MAX_STREAM_BYTES)
    if problem is not None:  # a kind and a key too long together to name their stream
        raise InvalidFlowPolicy(f"the {what} key of {kind}: {problem}", task_id=task_id)
    return key
