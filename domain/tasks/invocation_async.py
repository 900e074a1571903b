"""The awaitable forms of an invocation's decisions (issue 43), mixed into
:class:`~.invocation.Invocation`: the same decisions, queued for the group commit and
awaited, while the event loop runs the other phases."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .deciding import _MISSING, deciding_async
from .events import OutcomeStatus, Policy


class AwaitableDecider(Protocol):
    """The awaitable decisions an invocation takes of its scheduler (issue 43): the same
    decisions as the plain ones, the event loop free meanwhile."""

    async def checkpoint_async(
        self, task_id: str, phase: str, attempt: int | None = None
    ) -> None: ...

    def memo(self, task_id: str, name: str, value: Any = _MISSING) -> Any: ...

    async def memo_async(self, task_id: str, name: str, value: Any = _MISSING) -> Any: ...

    async def wait_async(
        self,
        task_id: str,
        on: Sequence[str],
        policy: Policy = "all",
        phase: str | None = None,
        attempt: int | None = None,
    ) -> None: ...

    async def sleep_async(
        self, task_id: str, until: float, phase: str | None = None, attempt: int | None = None
    ) -> None: ...

    async def finish_async(
        self,
        task_id: str,
        status: OutcomeStatus = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None: ...

    async def submit_owned_async(self, owner: str, kind: str, **options: Any) -> str: ...

    async def wait_message_async(
        self,
        task_id: str,
        topic: str,
        phase: str | None = None,
        timeout_s: float | None = None,
        attempt: int | None = None,
    ) -> None: ...


class AwaitableInvocation:
    """``checkpoint_async``, ``memo_async``, ``wait_async``, ``sleep_async``,
    ``finish_async``, ``wait_message_async`` and ``submit_async`` of an invocation."""

    scheduler: AwaitableDecider
    task_id: str

    async def checkpoint_async(self, phase: str, attempt: int | None = None) -> None:
        """:meth:`checkpoint`, awaited."""
        await deciding_async(lambda: self.scheduler.checkpoint_async(self.task_id, phase, attempt))

    async def memo_async(self, name: str, value: Any = _MISSING) -> Any:
        """:meth:`memo`: recording ``value`` is awaited (a read is the plain one)."""
        if value is _MISSING:
            return self.scheduler.memo(self.task_id, name)
        return await deciding_async(lambda: self.scheduler.memo_async(self.task_id, name, value))

    async def wait_async(
        self,
        on: Sequence[str],
        policy: Policy = "all",
        then: str | None = None,
        attempt: int | None = None,
    ) -> None:
        """:meth:`wait`, awaited."""
        await deciding_async(
            lambda: self.scheduler.wait_async(
                self.task_id, on, policy=policy, phase=then, attempt=attempt
            )
        )

    async def sleep_async(
        self, until: float, then: str | None = None, attempt: int | None = None
    ) -> None:
        """:meth:`sleep`, awaited."""
        await deciding_async(
            lambda: self.scheduler.sleep_async(self.task_id, until, phase=then, attempt=attempt)
        )

    async def finish_async(
        self,
        status: str = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None:
        """:meth:`finish`, awaited."""
        await deciding_async(
            lambda: self.scheduler.finish_async(
                self.task_id,
                status,  # type: ignore[arg-type]
                error=error,
                reason=reason,
                result=result,
            )
        )

    async def wait_message_async(
        self, topic: str, phase: str | None = None, timeout_s: float | None = None
    ) -> None:
        """:meth:`wait_message`, awaited."""
        await deciding_async(
            lambda: self.scheduler.wait_message_async(
                self.task_id, topic, phase=phase, timeout_s=timeout_s
            )
        )

    async def submit_async(self, kind: str, **options: Any) -> str:
        """:meth:`submit`, awaited."""
        return await deciding_async(
            lambda: self.scheduler.submit_owned_async(self.task_id, kind, **options)
        )
