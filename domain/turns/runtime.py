"""What a controller pass asks of the agent runtime (:class:`Runtime`): drain a
task's pending runtime events, deliver a Turn, steer a forced wakeup's reasons into
the busy Leader Turn, whether the Leader wake fence is up, clean up a role's runtime;
by default it does nothing.
"""

from __future__ import annotations

from typing import Any

from .delivery import DeliveryOutcome


class Runtime:
    """What a controller pass asks of the agent runtime. Override what yours does;
    the defaults do nothing (a pass then only applies the rules to recorded events).

    Hooks run in the pass's worker threads, inside the task's lock: a hook may
    call the scheduler's commands for its own task.
    """

    def drain(self, scheduler: Any, task_id: str) -> None:
        """Apply the task's pending runtime events (exits, completions, progress)
        through the scheduler's commands. Raise if they cannot be applied: the
        task is then blocked for this pass."""

    def deliver(
        self, task_id: str, role: str, turn_id: str, attempt: int
    ) -> DeliveryOutcome | None:
        """Hand a Turn to its runtime and say how that went (``None``: this
        runtime does not deliver; the Turn is left as it is). A runtime that ends
        the Turn while delivering it (``fail_turn`` for a terminal delivery failure,
        or ``complete_turn``) has settled it: its answer is then not recorded."""
        return None

    def steer(self, task_id: str, turn_id: str, reasons: tuple[str, ...]) -> None:
        """Inject a forced wakeup's reasons into the busy Leader Turn ``turn_id``."""

    def diagnose_stall(self, task_id: str, role: str, turn_id: str) -> str | None:
        """Say what is known of a Turn that shows no progress (its process, its last
        output): recorded as its stall diagnostic before it may be declared stalled.
        ``None``: nothing to say (the diagnostic is recorded all the same)."""
        return None

    def leader_wake_fenced(self) -> bool:
        """Whether the host's Leader wake fence is up: while it is, a pass dispatches
        no Leader wakeup (they stay pending). Asked at each task's wakeup step."""
        return False

    def cleanup(self, task_id: str, role: str) -> bool:
        """Clean up a completed task's role runtime: ``True`` once done (the
        obligation is settled), ``False`` to leave it open; raise on failure."""
        return False


def cleans_up(runtime: Runtime) -> bool:
    """Whether ``runtime`` implements :meth:`Runtime.cleanup`: ``Runtime``'s own answers
    "not done" for good and does nothing, so there is nothing to settle, nor to claim."""
    return type(runtime).cleanup is not Runtime.cleanup
