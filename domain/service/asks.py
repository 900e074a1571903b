"""The approval inbox (issue 44, item 2): a phase asks (``ask``, through
``Invocation.ask``), people list what waits on them (``inbox``) and answer
(``answer``). The rules are :mod:`..tasks.asks`' (30, 31, 32); the inbox's index is
:mod:`..tasks.ask_inbox`'s. Mixed into :class:`~..app.scheduler.Scheduler` as
:class:`AskCommands`.

An answer can end a wait, so it tells this process's news listeners once recorded, as
a ``send`` does (:meth:`~.messages.MessageCommands.listen_for_news`): an idle
:class:`~..app.worker.Worker` here resumes the task at once. ``answer_async`` and
``inbox_async`` are the same for an asyncio host: each runs in the loop's default
executor, briefly (a decision, a read of the index), as ``result_async``'s looks do.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConflictError
from ..tasks import decide
from ..tasks.ask_inbox import Ask, inbox
from ..tasks.deciding import DECISION_ATTEMPTS

if TYPE_CHECKING:
    from ..world import World

T = TypeVar("T")


class AskCommands:
    """``ask``, ``answer``, ``inbox`` and their async forms, mixed into the Scheduler."""

    if TYPE_CHECKING:
        _lock: threading.RLock
        world: World

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

        def _invocation_decision(
            self, task_id: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
        ) -> None: ...

        def _catch_up(self) -> None: ...

        def _news(self) -> None: ...

        def now(self) -> float: ...

    def ask(
        self,
        task_id: str,
        topic: str,
        request: Any = None,
        phase: str | None = None,
        timeout_s: float | None = None,
        assignees: Sequence[str] | None = None,
        attempt: int | None = None,
    ) -> None:
        """The running task asks ``request`` (any JSON, at most 64 KiB as a memo) on
        ``topic`` of ``assignees`` (``None``: anyone) and waits for the first answer, a
        wait of rule 21's kind: it resumes at the checkpoint ``phase`` (default: its
        current one) and ``attempt`` once answered, or after ``timeout_s`` seconds (the
        deadline, on the scheduler clock, recorded on the event) without an answer."""
        self._invocation_decision(
            task_id, decide.ask, topic, request, phase, timeout_s, assignees, attempt
        )

    def answer(
        self,
        task_id: str,
        topic: str,
        value: Any,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Answer the task's open ask on ``topic`` with ``value`` (any JSON but null, at
        most 64 KiB), recording who answered (``actor``) and why (``reason``); the task
        then resumes at the phase it named, and ``inv.answer(topic)`` reads ``value``.

        Refused, appending nothing (:class:`~..errors.RuleViolation`): no such ask is
        open (rule 30: none asked, closed by an abort mark, or past its deadline), the
        actor is not among its assignees (rule 31), or it was answered already (rule
        32, naming who answered and when: the first answer wins). An answer that lost a
        race with another writer of the task is decided again on the fresh state: a
        second answerer's then meets rule 32.
        """
        for attempt in range(DECISION_ATTEMPTS):
            try:
                self._decide(decide.answer, task_id, topic, value, actor=actor, why=reason)
                break
            except ConflictError:  # another writer of the task appended first
                if attempt == DECISION_ATTEMPTS - 1:
                    raise
        self._news()

    async def answer_async(
        self,
        task_id: str,
        topic: str,
        value: Any,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        """:meth:`answer` for an asyncio host: the event loop goes on meanwhile."""
        await asyncio.to_thread(self.answer, task_id, topic, value, actor=actor, reason=reason)

    def inbox(
        self,
        topic: str | None = None,
        assignee: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after: Ask | None = None,
    ) -> list[Ask]:
        """The open asks of the store, oldest first, as :class:`Ask` records (task id,
        topic, request, ``asked_at`` and ``deadline`` in the clock's ms, assignees and
        the asking task's kind): on ``topic``, answerable by ``assignee`` (an ask
        without assignees is anyone's, so listed under every assignee), of tasks of
        ``kind``; at most ``limit``, after ``after`` (the last ask of the previous
        page). What other writers appended is folded in first. Its cost follows the
        open asks (an index of them), not the history."""
        with self._lock:  # a command of another thread may be folding meanwhile
            self._catch_up()
            return inbox(
                self.world,
                self.now(),
                topic=topic,
                assignee=assignee,
                kind=kind,
                limit=limit,
                after=after,
            )

    async def inbox_async(
        self,
        topic: str | None = None,
        assignee: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after: Ask | None = None,
    ) -> list[Ask]:
        """:meth:`inbox` for an asyncio host: the event loop goes on meanwhile."""
        return await asyncio.to_thread(self.inbox, topic, assignee, kind, limit, after)
