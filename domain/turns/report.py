"""What one controller pass did, task by task in scope order
(:class:`ControllerPassReport`): each task's outcome (``done``, ``blocked``,
``deferred``, ``failed`` or ``skipped``), why tasks were blocked or failed and when
they are retried, what the wakeup step did, and which Turns the pass ended; and what
a round of due runtime-cleanup attempts outside a pass did (:class:`CleanupReport`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeVar

V = TypeVar("V")

TaskOutcome = Literal["done", "blocked", "deferred", "failed", "skipped"]


@dataclass
class ControllerPassReport:
    """What one controller pass did, task by task, in scope order."""

    pass_id: str
    scope: str
    keys: tuple[str, ...]
    tasks: list[str] = field(default_factory=list)
    outcomes: dict[str, TaskOutcome] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    """Why each blocked or failed task was."""
    deferred: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Deferred tasks and their projects under maintenance."""
    retries: dict[str, float | None] = field(default_factory=dict)
    """Blocked or failed tasks: when their retry is due (``None``: none armed: the
    limit was reached, the task decided its outcome, or a full pass is requested)."""
    retried: list[str] = field(default_factory=list)
    """Tasks a due task-pass retry brought into this pass."""
    wakeups: dict[str, str] = field(default_factory=dict)
    """What the wakeup step did per task (``dispatched``, ``steered``, ``dropped``, ``busy``,
    ``fenced``, ``held`` by a failed Leader cleanup...)."""
    diagnosed: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """Turns given a stall diagnostic, task -> role -> what the runtime said."""
    turns: dict[str, dict[str, str]] = field(default_factory=dict)
    """Turns the pass ended, task -> role -> ``completed``/``exited``/``stalled``/``failed``."""

    def put_in_scope_order(self) -> None:
        """Order every per-task map as :attr:`tasks` (yui merges a pass's per-task
        results by scope index): concurrent per-task passes fill them as they finish."""
        rank = {task_id: index for index, task_id in enumerate(self.tasks)}

        def ordered(mapping: dict[str, V]) -> dict[str, V]:
            return dict(sorted(mapping.items(), key=lambda item: rank.get(item[0], len(rank))))

        self.outcomes = ordered(self.outcomes)
        self.errors = ordered(self.errors)
        self.deferred = ordered(self.deferred)
        self.retries = ordered(self.retries)
        self.wakeups = ordered(self.wakeups)
        self.diagnosed = ordered(self.diagnosed)
        self.turns = ordered(self.turns)

    def having(self, outcome: TaskOutcome) -> list[str]:
        """The tasks with that outcome, in scope order."""
        return [t for t in self.tasks if self.outcomes.get(t) == outcome]

    @property
    def done(self) -> list[str]:
        """Tasks whose per-task pass ran through."""
        return self.having("done")

    @property
    def blocked(self) -> list[str]:
        """Tasks blocked for the pass: their runtime events failed."""
        return self.having("blocked")

    @property
    def failed(self) -> list[str]:
        """Tasks whose per-task pass raised."""
        return self.having("failed")


@dataclass
class CleanupReport:
    """What one round of due runtime-cleanup attempts outside a pass did
    (:func:`~.engine.run_cleanups`)."""

    cleanups: dict[str, dict[str, str]] = field(default_factory=dict)
    """Task -> role -> ``settled``, ``failed`` (recorded; still open), ``open`` (not
    done yet; nothing recorded) or ``held`` (another live worker claimed it: its
    runtime was not asked here; nothing recorded)."""
    errors: dict[str, str] = field(default_factory=dict)
    """Why each failed cleanup failed (``task/role``), and each task whose attempts
    could not be recorded (``task``)."""
    deferred: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Tasks whose cleanups wait for their projects' maintenance to end."""
