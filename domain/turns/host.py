"""What a controller pass uses of the scheduler it runs for (:class:`PassHost`): the
world, clock and Turn settings, whether it is closing, its decision cycle, the lock
that serializes decisions and the per-task locks, its memory of the cleanup attempts
that settled nothing, and which workers' leases are current. The application's Turn
commands are one (:class:`~..commands.turn_commands.TurnCommands` passes ``self``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from ..clock import Clock
from ..world import World
from .attempts import CleanupAttempts
from .queue import PassQueue
from .settings import TurnSettings

T = TypeVar("T")


class PassHost(Protocol):
    """What a controller pass uses of the scheduler it runs for (its Turn commands):
    the world, clock and Turn settings, whether it is closing, its decision cycle,
    the lock that serializes decisions and the per-task locks, the cleanup attempts,
    the live workers."""

    @property
    def world(self) -> World:
        """The scheduler's world, which the pass plans from and reads."""
        ...

    @property
    def clock(self) -> Clock:
        """The scheduler clock."""
        ...

    @property
    def closing(self) -> bool:
        """Whether the scheduler is closing: no more per-task passes start."""
        ...

    @property
    def turn_settings(self) -> TurnSettings:
        """The windows and limits in force."""
        ...

    @property
    def _lock(self) -> AbstractContextManager[Any]:
        """The lock decisions are serialized under."""
        ...

    def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one decision through the scheduler's decision cycle."""
        ...

    def refresh(self) -> int:
        """Fold in what other writers appended since the last read; returns how many."""
        ...

    def _catch_up(self) -> None:
        """:meth:`refresh` unless a batch is open (a pass inside one plans on the world
        as it stands: other writers' events would fold under the batch's own) or the
        scheduler is closed."""
        ...

    @property
    def pass_queue(self) -> PassQueue:
        """The passes requested and not run yet (a dirty pass yields to a full one)."""
        ...

    @property
    def cleanup_attempts(self) -> CleanupAttempts:
        """The cleanup attempts this process made that left their obligation open."""
        ...

    def live_workers(self) -> frozenset[str]:
        """The workers whose lease is current now (read from the store's lease table):
        a cleanup another of them claimed is not asked of this process's runtime."""
        ...

    def _task_lock(self, task_id: str) -> AbstractContextManager[Any]:
        """The lock that serializes the per-task passes of one task."""
        ...
