"""Passes requested and not run yet (:class:`PassQueue`), coalesced the way yui's
controller coalesces them: a requested full pass takes over every dirty key queued
before it (and those requested while it waits), and dirty keys requested together run
as one dirty pass; one pump at a time runs them. The queue is process-local, never
events: what a pass does is recorded by the pass.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ..errors import InvalidArgument
from .keys import parse_key

Scope = str | list[str]


class PassQueue:
    """The passes a scheduler was asked to run: a full one, or dirty keys."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.full = False
        """A full pass is requested (it takes over every dirty key)."""
        self.keys: dict[str, None] = {}
        """Dirty keys requested, in request order, while no full pass is."""
        self.pumping = False
        """A pump is running the queued passes (passes.one_pump)."""

    def request(self, scope: object) -> None:
        """Queue a pass of ``scope`` (``"full"`` or dirty keys); a malformed key is
        refused (:class:`~..errors.InvalidArgument`) and nothing is queued."""
        if scope == "full":
            with self._lock:
                # passes.full_takes_over (yui): a full pass does the queued dirty work.
                self.full = True
                self.keys.clear()
            return
        if isinstance(scope, str) or not isinstance(scope, Iterable):
            raise InvalidArgument(f"a pass scope is 'full' or a list of dirty keys, not {scope!r}")
        keys = [parse_key(key).text for key in scope]
        with self._lock:
            if not self.full:
                self.keys.update(dict.fromkeys(keys))

    def start_pumping(self) -> bool:
        """Claim the one pump of this queue; ``False`` while another pump runs (it runs
        what is queued: yui runs one coalescing loop, so no pass starts beside it)."""
        with self._lock:
            if self.pumping:
                return False
            self.pumping = True
            return True

    def stop_pumping(self) -> bool:
        """Release the pump; ``True`` when passes are still queued (a request that came
        after the pump's last look): the caller claims it again to run them."""
        with self._lock:
            self.pumping = False
            return self.full or bool(self.keys)

    def take(self) -> Scope | None:
        """The next pass to run (and dequeue it), or ``None`` when none is requested."""
        with self._lock:
            if self.full:
                self.full = False
                return "full"
            if self.keys:
                keys = list(self.keys)
                self.keys.clear()
                return keys
            return None

    def __bool__(self) -> bool:
        return self.full or bool(self.keys)
