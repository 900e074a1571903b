"""Flow control's reads (rules 33 and 34): why a task that could run is held back, and
when a rate's next token falls due. Mixed into :class:`~..app.scheduler.Scheduler` as
:class:`FlowCommands`; the rules themselves are :mod:`..tasks.limits`' (reservations)
and :mod:`..tasks.debounce`'s (submissions)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..tasks.definitions import Registry
from ..tasks.limits import HeldBack, admitted, bucket_of, held_back, keys_of, next_token_at
from ..tasks.state import TaskState
from ..world import Draft, World

if TYPE_CHECKING:
    from ..tasks import decide


class FlowCommands:
    """:meth:`held_back`, and :meth:`runnable` narrowed to what limits and rates let
    start, mixed into :class:`~..app.scheduler.Scheduler` before the phase commands."""

    registry: Registry

    if TYPE_CHECKING:
        world: World
        _lock: Any

        def task(self, task_id: str) -> TaskState: ...
        def _context(self) -> decide.Context: ...
        def _readiness(self, draft: Draft, ctx: decide.Context, task: TaskState) -> str: ...

    def _admitted(
        self, world: World, ctx: decide.Context, ready: Iterator[str], limit: int | None
    ) -> list[str]:
        """The phase commands' first ``limit`` of ``ready`` (the tasks that can run now,
        in the order this worker starts them), without those a limit key's free slots or
        a rate key's whole tokens cannot take now (rules 33, 34): each key's room goes to
        its first candidates, so a worker sends no reservation the rules would refuse.
        Asked in order until ``limit`` are let through: as if all had been, then cut."""
        return admitted(world, ctx.now, ready, self.registry, limit)

    def held_back(self, task_id: str) -> HeldBack | None:
        """Why the task, which could run now otherwise, waits: ``limited`` (rule 33:
        ``max_running`` tasks of its kind with its limit key run a phase) or
        ``rate_limited`` (rule 34: its rate key's bucket holds no token until
        ``next_at``), with the key; ``None`` when neither holds it back (it may still
        wait for something else: :meth:`wake`, ``blocked_reason``). Computed, never
        stored, from the log as it stands (other writers' events folded in first)."""
        task = self.task(task_id)  # folds what other writers appended
        with self._lock:
            ctx = self._context()
            draft = Draft(self.world)
            if self._readiness(draft, ctx, task) not in ("limited", "rate_limited"):
                return None
            return held_back(draft, task, keys_of(task, self.registry), ctx.now)

    def _next_token(self, draft: Draft, task: TaskState) -> float | None:
        """When the rate bucket that holds ``task`` back has a token again (rule 34)."""
        flow = keys_of(task, self.registry)
        if flow is None or flow.rate_key is None:
            return None
        return next_token_at(bucket_of(draft, task.kind, flow.rate_key), flow)
