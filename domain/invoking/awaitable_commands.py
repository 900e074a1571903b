"""The awaitable forms of an invocation's decisions (issue 43), mixed into
:class:`~..app.scheduler.Scheduler` as :class:`AwaitableCommands`.

``checkpoint_async``, ``memo_async``, ``wait_async``, ``sleep_async``,
``finish_async`` and ``wait_message_async`` (and ``submit_owned_async``, which is
:mod:`..commands.submitting`'s) decide what their
plain forms decide, under the same rules and with the same refusals, but queue the
decision for the group commit and await it (:mod:`.loop_commit`): the event loop goes
on while it waits for the lock and the store. A phase reaches them through its
:class:`~..tasks.invocation.Invocation` (``await inv.checkpoint_async("next")``).

The plain forms still work from an ``async`` phase: each holds the loop (and every
coroutine on it) for the time of one command, its wait for the lock included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..commands.task_commands import _error_fields, _marked_read
from ..errors import RuleViolation
from ..tasks import decide
from ..tasks.events import OutcomeStatus, Policy
from ..tasks.invocation import _MISSING, Invocation
from ..tasks.stream_buffer import recording_streams_async
from ..world import World

T = TypeVar("T")


class AwaitableCommands:
    """The awaitable forms of a running task's commands (see the module docstring)."""

    world: World

    if TYPE_CHECKING:

        async def _decide_grouped_async(
            self, fn: Callable[..., T], *args: Any, **kwargs: Any
        ) -> T: ...

        def _not_timed_out(self, task_id: str) -> None: ...
        def _invocation_call(
            self, task_id: str, fn: Callable[..., Any]
        ) -> tuple[Callable[..., Any], list[int], Invocation | None]: ...
        def _refused_invocation(self, task_id: str, refusal: RuleViolation) -> None: ...
        def _ended_unless_running(self, task_id: str) -> None: ...
        def memo(self, task_id: str, name: str, value: Any = _MISSING) -> Any: ...

    async def checkpoint_async(self, task_id: str, phase: str, attempt: int | None = None) -> None:
        """:meth:`~.task_commands.TaskCommands.checkpoint`, awaited."""
        await self._invocation_decision_async(task_id, decide.checkpoint, phase, attempt)

    async def memo_async(self, task_id: str, name: str, value: Any = _MISSING) -> Any:
        """:meth:`~.task_commands.TaskCommands.memo`: a record awaited (a read, without
        ``value``, is the plain one's: a moment under the lock)."""
        if value is _MISSING:
            return self.memo(task_id, name)
        await self._invocation_decision_async(task_id, decide.memo, name, value)
        return value

    async def wait_async(
        self,
        task_id: str,
        on: Sequence[str],
        policy: Policy = "all",
        phase: str | None = None,
        attempt: int | None = None,
    ) -> None:
        """:meth:`~.task_commands.TaskCommands.wait`, awaited."""
        await self._invocation_decision_async(task_id, decide.wait, on, policy, phase, attempt)

    async def sleep_async(
        self, task_id: str, until: float, phase: str | None = None, attempt: int | None = None
    ) -> None:
        """:meth:`~.task_commands.TaskCommands.sleep`, awaited."""
        await self._invocation_decision_async(task_id, decide.sleep, until, phase, attempt)

    async def finish_async(
        self,
        task_id: str,
        status: OutcomeStatus = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None:
        """:meth:`~.task_commands.TaskCommands.finish`, awaited."""
        message, detail = _error_fields(error)
        await self._invocation_decision_async(
            task_id,
            decide.finish,
            status,
            message=message,
            detail=detail,
            reason=reason,
            result=result,
        )

    async def wait_message_async(
        self,
        task_id: str,
        topic: str,
        phase: str | None = None,
        timeout_s: float | None = None,
        attempt: int | None = None,
    ) -> None:
        """:meth:`~..service.messages.MessageCommands.wait_message`, awaited."""
        await self._invocation_decision_async(
            task_id, decide.wait_message, topic, phase, timeout_s, attempt
        )

    async def _invocation_decision_async(
        self, task_id: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> None:
        """:meth:`~.task_commands.TaskCommands._invocation_decision`, its decision
        queued for the group commit and awaited."""
        self._not_timed_out(task_id)
        try:
            decided, reads, invocation = self._invocation_call(task_id, fn)
            # 29. What it emitted is recorded first, in the same append (tasks/streams.py).
            async with recording_streams_async(invocation, decided) as decided:
                await self._decide_grouped_async(decided, task_id, *args, **kwargs)
            _marked_read(invocation, reads)
        except RuleViolation as refusal:
            self._refused_invocation(task_id, refusal)
            raise
        self._ended_unless_running(task_id)
