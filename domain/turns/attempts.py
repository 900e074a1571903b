"""When a runtime-cleanup obligation is next due for an attempt (:class:`CleanupAttempts`,
:func:`waiting_cleanups`, :func:`due_cleanups`, :func:`next_cleanup_at`).

yui tries a role's runtime cleanup at once and puts one that did not get done on the
delivery retry timer (identity ``runtime-cleanup:``), which is never terminalized at
the retry limit. tasktrail records what settles or fails an obligation, but an attempt
that only answered "not done yet" (``Runtime.cleanup`` returning ``False``) changes no
state, so it is not an event: the process keeps, in memory, how often and when it tried
each obligation, and the obligation is due again after the delivery backoff for that
count, capped and never given up. The memory is process-local, like the pass queue: a
new process (a restart) knows of no attempt, so it tries every open obligation at once.
No fold reads it; a claim (:mod:`.claims`) is told whether this process made the
obligation's claim (a claim under this worker's name that it did not make is an
earlier process's).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..world import World
from .cleanup import cleanup_owed, cleanup_state, roles_owing_cleanup
from .settings import retry_delay_ms


@dataclass(frozen=True, slots=True)
class WaitingCleanup:
    """A role's runtime cleanup still to be done: its open obligation, or, for a
    completed task's role that owes one not recorded yet (``required`` false), the
    obligation a pass would record for it now."""

    task_id: str
    role: str
    number: int
    """The obligation's :attr:`~.state.Obligation.number` (its identity for the role)."""
    required: bool = True


@dataclass(frozen=True, slots=True)
class _Tried:
    number: int
    tries: int
    last_at: float
    due_at: float


class CleanupAttempts:
    """The cleanup attempts this process made that left their obligation open, by
    (task, role): each obligation (told apart by its number, so a new one starts
    fresh) is due again ``min(2000, base * 2**min(n - 1, 3))`` ms after its ``n``-th;
    and the obligations this process claimed (:mod:`.claims`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the per-task passes of a pass note from threads
        self._tried: dict[tuple[str, str], _Tried] = {}
        self._held: dict[tuple[str, str], int] = {}
        """(task, role) -> the number of the obligation this process claimed."""

    def due_at(self, task_id: str, role: str, number: int) -> float | None:
        """When obligation ``number`` of the role is next due; ``None``: this process
        never tried it, so it is due at once."""
        with self._lock:
            tried = self._tried.get((task_id, role))
        return tried.due_at if tried is not None and tried.number == number else None

    def tries(self, task_id: str, role: str, number: int) -> int:
        """How often this process tried obligation ``number`` of the role."""
        with self._lock:
            tried = self._tried.get((task_id, role))
        return tried.tries if tried is not None and tried.number == number else 0

    def note(self, task_id: str, role: str, number: int, now: float, base_ms: float) -> float:
        """An attempt at ``now`` that left the obligation open (not done, raised, or
        fenced); returns when it is due again."""
        with self._lock:
            tried = self._tried.get((task_id, role))
            tries = tried.tries + 1 if tried is not None and tried.number == number else 1
            due_at = now + retry_delay_ms(base_ms, tries - 1)
            self._tried[(task_id, role)] = _Tried(number, tries, now, due_at)
        return due_at

    def holds(self, task_id: str, role: str, number: int) -> bool:
        """Whether this process claimed obligation ``number`` of the role."""
        with self._lock:
            return self._held.get((task_id, role)) == number

    def hold(self, task_id: str, role: str, number: int) -> None:
        """This process claimed obligation ``number`` of the role (or found its claim)."""
        with self._lock:
            self._held[(task_id, role)] = number

    def release(self, task_id: str, role: str) -> None:
        """The role's obligation is another worker's, or gone: this process holds no
        claim on it."""
        with self._lock:
            self._held.pop((task_id, role), None)

    def forget(self, task_id: str, role: str) -> None:
        """The role's obligation was settled: nothing to remember of it."""
        with self._lock:
            self._tried.pop((task_id, role), None)
            self._held.pop((task_id, role), None)

    def empty(self) -> bool:
        """Whether this process remembers no attempt and no claim."""
        with self._lock:
            return not self._tried and not self._held

    def keep_only(self, waiting: list[WaitingCleanup]) -> None:
        """Forget the attempts at, and claims of, obligations no longer waiting
        (settled elsewhere)."""
        keep = {(w.task_id, w.role) for w in waiting}
        with self._lock:
            for key in [key for key in self._tried if key not in keep]:
                del self._tried[key]
            for key in [key for key in self._held if key not in keep]:
                del self._held[key]


def waiting_cleanups(world: World) -> list[WaitingCleanup]:
    """Every open obligation, then every role of a completed task that owes one not
    recorded yet, from the world's indexes (never every task)."""
    waiting: list[WaitingCleanup] = []
    for task_id, roles in sorted(world.indexes.get("open_cleanups", {}).items()):
        state = cleanup_state(world, task_id)
        if state is None:
            continue
        for role in roles:
            obligation = state.obligations.get(role)
            if obligation is not None and obligation.open:
                waiting.append(WaitingCleanup(task_id, role, obligation.number))
    for task_id in sorted(cleanup_owed(world)):
        task = world.get(task_id)
        if task is None:
            continue
        state = cleanup_state(world, task_id)
        known = state.obligations if state is not None else {}
        for role in roles_owing_cleanup(task, state):
            last = known.get(role)
            number = last.number + 1 if last is not None else 1
            waiting.append(WaitingCleanup(task_id, role, number, required=False))
    return waiting


def due_cleanups(world: World, attempts: CleanupAttempts, now: float) -> list[WaitingCleanup]:
    """The waiting cleanups due for an attempt at ``now``; forgets the attempts at
    obligations no longer waiting."""
    waiting = waiting_cleanups(world)
    attempts.keep_only(waiting)
    due = []
    for cleanup in waiting:
        at = attempts.due_at(cleanup.task_id, cleanup.role, cleanup.number)
        if at is None or at <= now:
            due.append(cleanup)
    return due


def next_cleanup_at(world: World, attempts: CleanupAttempts, now: float) -> float | None:
    """The earliest time a waiting cleanup is due for an attempt (``now`` for one this
    process never tried), or ``None`` when none waits."""
    times = []
    for cleanup in waiting_cleanups(world):
        at = attempts.due_at(cleanup.task_id, cleanup.role, cleanup.number)
        times.append(now if at is None else at)
    return min(times) if times else None
