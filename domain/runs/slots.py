"""The process's dispatch slots: one reserved manual slot, ``per_tick`` background ones.

Slots are process-local, never events: the application takes one before it
mints a run and gives it back after the submit, and the admission rules are
told whether one was free (``dispatch_slots_busy`` otherwise).
"""

from __future__ import annotations

import threading
from typing import Literal


class DispatchSlots:
    """The process's dispatch slots: one reserved manual slot, ``per_tick`` background ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.manual = 0
        self.background = 0

    def try_acquire(self, kind: Literal["manual", "background"], limit: int) -> bool:
        """Take a slot of ``kind`` if fewer than ``limit`` are in use."""
        with self._lock:
            if kind == "manual":
                if self.manual >= limit:
                    return False
                self.manual += 1
            else:
                if self.background >= limit:
                    return False
                self.background += 1
            return True

    def free(self, kind: Literal["manual", "background"], limit: int) -> bool:
        """Whether :meth:`try_acquire` would take a slot of ``kind`` now (taking none)."""
        with self._lock:
            return (self.manual if kind == "manual" else self.background) < limit

    def release(self, kind: Literal["manual", "background"]) -> None:
        """Give a slot of ``kind`` back (never below zero)."""
        with self._lock:
            if kind == "manual":
                self.manual = max(0, self.manual - 1)
            else:
                self.background = max(0, self.background - 1)


def slot_of(trigger: str, per_tick: int) -> tuple[Literal["manual", "background"], int]:
    """The slot a run of ``trigger`` takes, and how many of that kind there are: the one
    reserved manual slot, or the ``per_tick`` background ones."""
    return ("manual", 1) if trigger == "manual" else ("background", per_tick)
