"""Scheduler commands for runtime cleanups (SPEC.md section 2, yui's role runtime
cleanups): stop idle roles, settle an obligation, read them, and say when the next one
is due for an attempt.

When an obligation is due for an attempt is process memory
(:class:`~..turns.attempts.CleanupAttempts`), never an event: at once the first time,
then after the delivery backoff of the attempts that left it open. A
:class:`~.worker.Worker` sleeps until :meth:`CleanupCommands.next_cleanup_attempt`,
then runs the due ones (:meth:`~.turn_commands.TurnCommands.run_cleanups`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..clock import Clock
from ..turns import cleanup
from ..turns.attempts import CleanupAttempts, next_cleanup_at
from ..turns.state import CleanupState
from ..world import World

if TYPE_CHECKING:
    from ..tasks.state import TaskState

T = TypeVar("T")


class CleanupCommands:
    """Runtime-cleanup commands, mixed into :class:`~.turn_commands.TurnCommands`."""

    world: World
    clock: Clock
    _lock: Any

    if TYPE_CHECKING:

        def _decide_turn(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

        def task(self, task_id: str) -> TaskState: ...

        def live_workers(self) -> frozenset[str]: ...

    def settle_cleanup(self, task_id: str, role: str, *, error: str | None = None) -> str:
        """Settle the runtime-cleanup obligation of a completed task's role
        (``settled``), or record a failed attempt, ``error``, that leaves it open
        (``failed``). Refused (``cleanup.no_obligation``) without an open one."""
        status: str = self._decide_turn(cleanup.settle_cleanup, task_id, role, error=error)
        return status

    def stop_roles(self, task_id: str, roles: Sequence[str]) -> list[str]:
        """Stop idle roles of a live task: each gets a runtime-cleanup obligation, which
        the next pass over the task (or :meth:`run_cleanups`) settles through
        ``Runtime.cleanup``. A role's due Turn completion is folded first; refused
        (``cleanup.role_active``), appending nothing, while one of them still has an
        active Turn. Returns the roles that got an obligation now."""
        stopped: list[str] = self._decide_turn(
            cleanup.stop_roles, task_id, list(roles) if not isinstance(roles, str) else roles
        )
        return stopped

    def cleanup_obligations(self, task_id: str) -> CleanupState | None:
        """The cleanup obligations of the task's roles (``None`` if none were required)."""
        with self._lock:
            self.task(task_id)
            return cleanup.cleanup_state(self.world, task_id)

    @property
    def cleanup_attempts(self) -> CleanupAttempts:
        """The cleanup attempts this process made that left their obligation open
        (process memory: a new process tries every open obligation at once)."""
        with self._lock:
            attempts: CleanupAttempts | None = getattr(self, "_cleanup_attempts", None)
            if attempts is None:
                attempts = self._cleanup_attempts = CleanupAttempts()
            return attempts

    def next_cleanup_attempt(self) -> float | None:
        """The earliest time a runtime cleanup is due for an attempt (a past time: due
        now): an open obligation, or a completed task's role that owes one, at once if
        this process never tried it, else after the delivery backoff of its attempts
        (capped, never given up). ``None`` when no cleanup waits. Not a Turn deadline:
        it reads this process's memory of its attempts."""
        with self._lock:
            return next_cleanup_at(self.world, self.cleanup_attempts, self.clock())
