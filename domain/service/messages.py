"""Messages into a waiting task (the Service API issue, item 3): ``send`` puts one into
a task's mailbox, ``wait_message`` is the decision a phase takes through
``Invocation.wait_message``. The rules are :mod:`..tasks.messages`' (20, 21, 22); this
is the scheduler's side, mixed into :class:`~..app.scheduler.Scheduler` as
:class:`MessageCommands`.

A message can end a wait, so a ``send`` tells this process's news listeners once it is
recorded (:meth:`MessageCommands.listen_for_news`): a :class:`~..app.worker.Worker`
listens, and its idle loop ticks at once instead of at its next look at the store (a
worker in another process sees the message at that look, ``poll_ms`` at most).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConflictError
from ..tasks import decide
from ..tasks.deciding import DECISION_ATTEMPTS

if TYPE_CHECKING:
    from ..tasks.state import TaskState

T = TypeVar("T")
log = logging.getLogger("tasktrail.worker")

NewsListener = Callable[[], None]
"""Called with no arguments when the scheduler recorded news; quick, from any thread."""


class MessageCommands:
    """``send`` and ``wait_message``, mixed into :class:`~..app.scheduler.Scheduler`."""

    _news_listeners: tuple[NewsListener, ...] = ()

    if TYPE_CHECKING:

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

        async def _decide_grouped_async(
            self, fn: Callable[..., T], *args: Any, **kwargs: Any
        ) -> T: ...

        def _invocation_decision(
            self, task_id: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
        ) -> None: ...

        def task(self, task_id: str) -> TaskState: ...

    def send(
        self,
        task_id: str,
        topic: str,
        value: Any,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> int:
        """Put a message on ``topic`` with ``value`` (any JSON value but null, at most
        64 KiB as JSON, as a memo) into the task's mailbox, recording who sent it
        (``actor``) and why (``reason``); returns its number in the mailbox (1 for the
        task's first). A task waiting for a message on ``topic`` may then run again
        (rule 21); one that is not reads it when a phase asks for it.

        A send that loses a race with another writer of the task (its phase's decision
        in another process) is decided again on the fresh state, as a phase's is.
        Refused for a task holding or past its outcome (rule 20,
        :class:`~..errors.RuleViolation`), appending nothing. An abort-marked task is
        sent it, and it stays unread: the mark beats it (rule 22).
        """
        for attempt in range(DECISION_ATTEMPTS):
            try:
                seq: int = self._decide(decide.send, task_id, topic, value, actor=actor, why=reason)
                break
            except ConflictError:  # the task's own invocation (elsewhere) appended first
                if attempt == DECISION_ATTEMPTS - 1:
                    raise
        self._news()
        return seq

    async def send_async(
        self,
        task_id: str,
        topic: str,
        value: Any,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> int:
        """:meth:`send` from a coroutine: the decision is queued for the group commit
        and awaited (:mod:`..invoking.loop_commit`), the event loop goes on meanwhile."""
        for attempt in range(DECISION_ATTEMPTS):
            try:
                seq: int = await self._decide_grouped_async(
                    decide.send, task_id, topic, value, actor=actor, why=reason
                )
                break
            except ConflictError:
                if attempt == DECISION_ATTEMPTS - 1:
                    raise
        self._news()
        return seq

    def wait_message(
        self,
        task_id: str,
        topic: str,
        phase: str | None = None,
        timeout_s: float | None = None,
        attempt: int | None = None,
    ) -> None:
        """The running task waits for a message on ``topic`` (rule 21), resuming at the
        checkpoint ``phase`` (default: its current one) and ``attempt`` once one is
        unread, or after ``timeout_s`` seconds (the deadline, on the scheduler clock, is
        recorded on the event) without one."""
        self._invocation_decision(task_id, decide.wait_message, topic, phase, timeout_s, attempt)

    def listen_for_news(self, listener: NewsListener) -> None:
        """Call ``listener()`` each time this scheduler records news a waiting task may
        run on (today: a message sent). The one hook for waking in-process waiters:
        store-wide news (another process's append) is for it to drive as well."""
        self._news_listeners = (*self._news_listeners, listener)

    def _news(self) -> None:
        for listener in self._news_listeners:
            try:
                listener()
            except Exception:  # a listener's failure is its own; the send is recorded
                log.exception("a news listener failed")
