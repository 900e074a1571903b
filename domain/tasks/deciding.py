"""How an invocation takes a decision: again on fresh state when another writer's
append came first, a few times (a phase is not faulted for another worker's timing)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..errors import ConflictError

T = TypeVar("T")

_MISSING: Any = object()
"""A memo read: no value given."""

DECISION_ATTEMPTS = 5
"""How often an invocation's decision is taken again after losing a race with another
writer (each refused append wrote nothing, and left the scheduler refreshed)."""


def deciding(decide: Callable[[], T]) -> T:
    """Take a phase's decision, again on fresh state each time another writer's append
    came first (:class:`~..errors.ConflictError`): a phase is not faulted for another
    worker's timing. A rule that refuses it on fresh state raises as it would have."""
    for attempt in range(DECISION_ATTEMPTS):
        try:
            return decide()
        except ConflictError:
            if attempt == DECISION_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


async def deciding_async(decide: Callable[[], Awaitable[T]]) -> T:
    """:func:`deciding` for an awaitable decision."""
    for attempt in range(DECISION_ATTEMPTS):
        try:
            return await decide()
        except ConflictError:
            if attempt == DECISION_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
