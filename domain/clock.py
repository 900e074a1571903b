"""The scheduler clock: milliseconds since the epoch, injected, never read in a decision."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

Clock = Callable[[], float]
"""A function that returns the scheduler's time in ms since the epoch."""


def system_clock() -> float:
    """The wall clock in ms since the epoch: the default outside tests and replays."""
    return time.time() * 1000.0


class ManualClock:
    """A clock that moves only when told to: for tests, demos and replays.

    >>> clock = ManualClock(1_000)
    >>> clock.advance(250)
    1250
    """

    def __init__(self, start: float = 0) -> None:
        self.now = self._checked(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> float:
        """Move forward by ``ms`` (>= 0) and return the new time."""
        if self._checked(ms) < 0:
            raise ValueError(f"a clock cannot go back: advance({ms!r})")
        self.now += ms
        return self.now

    def set(self, now: float) -> float:
        """Jump to ``now``, which may not be earlier than the current time."""
        if self._checked(now) < self.now:
            raise ValueError(f"a clock cannot go back from {self.now} to {now}")
        self.now = now
        return self.now

    @staticmethod
    def _checked(value: float) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValueError(f"clock times are finite numbers of ms, not {value!r}")
        return value
