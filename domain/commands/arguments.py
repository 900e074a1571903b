"""What :meth:`Scheduler.open <.scheduler.Scheduler.open>` checks of its arguments
before it touches the store: each wrong one is named in an :class:`InvalidArgument`."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument
from ..tasks.definitions import Registry
from ..tasks.fields import MAX_TIME_MS, finite_number
from ..tasks.restart_limit import check_restart_limit


def check_open_arguments(
    clock: Any, registry: Any, restart_limit: Any, snapshot_every: Any
) -> None:
    """Refuse a ``restart_limit`` that is neither ``None`` nor an int >= 1, a ``clock`` that is not
    callable, a ``registry`` that is not a :class:`Registry`, or a ``snapshot_every``
    that is neither ``None`` nor an int >= 1."""
    if restart_limit is not None:
        check_restart_limit(restart_limit)
    if not callable(clock):
        raise InvalidArgument(f"clock must be a function returning ms, not {clock!r}")
    if registry is not None and not isinstance(registry, Registry):
        raise InvalidArgument(f"registry must be a Registry, not {registry!r}")
    if snapshot_every is not None and (
        isinstance(snapshot_every, bool)
        or not isinstance(snapshot_every, int)
        or snapshot_every < 1
    ):
        raise InvalidArgument(f"snapshot_every must be an int >= 1 or None, not {snapshot_every!r}")


def checked_reading(now: Any) -> float:
    """A clock's reading, checked: a finite time in ms, no later than year 9999."""
    # Every event carries this time: one that is not a finite number would
    # be recorded as null and read back differently.
    if (now.__class__ is float or now.__class__ is int) and abs(now) <= MAX_TIME_MS:
        return now  # the usual reading (inf and nan fail the comparison)
    if finite_number(now) is None:
        raise InvalidArgument(f"the clock returned {now!r}, not a finite time in ms")
    if abs(now) > MAX_TIME_MS:
        raise InvalidArgument(f"the clock returned {now!r}, past year 9999 in ms")
    return float(now) if isinstance(now, float) else now
