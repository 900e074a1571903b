"""What a phase handler is given: the invocation that owns a running task."""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from ..errors import LeaseLost, PhaseFenced, PhaseTimeout, RuleViolation
from ..frozen import thawed
from .deciding import _MISSING as _MISSING
from .deciding import deciding as _deciding
from .events import Mode, OutcomeStatus, Policy
from .invocation_async import AwaitableDecider, AwaitableInvocation
from .messages import next_unread
from .state import Outcome, TaskState
from .stream_buffer import MAX_WAITING_BYTES, MAX_WAITING_CHUNKS, StreamBuffer
from .streams import chunk, closed, stream_name

T = TypeVar("T")


class TaskDecider(AwaitableDecider, Protocol):
    """What an invocation decides through: the scheduler's task reads and commands."""

    @property
    def worker(self) -> str: ...

    def task(self, task_id: str) -> TaskState: ...

    def now(self) -> float: ...

    def checkpoint(self, task_id: str, phase: str, attempt: int | None = None) -> None: ...

    def memo(self, task_id: str, name: str, value: Any = _MISSING) -> Any: ...

    def wait(
        self,
        task_id: str,
        on: Sequence[str],
        policy: Policy = "all",
        phase: str | None = None,
        attempt: int | None = None,
    ) -> None: ...

    def sleep(
        self, task_id: str, until: float, phase: str | None = None, attempt: int | None = None
    ) -> None: ...

    def finish(
        self,
        task_id: str,
        status: OutcomeStatus = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None: ...

    def outcome(self, task_id: str) -> Outcome | None: ...

    def submit_owned(self, owner: str, kind: str, **options: Any) -> str: ...

    def wait_message(
        self,
        task_id: str,
        topic: str,
        phase: str | None = None,
        timeout_s: float | None = None,
        attempt: int | None = None,
    ) -> None: ...

    def ask(
        self,
        task_id: str,
        topic: str,
        request: Any = None,
        phase: str | None = None,
        timeout_s: float | None = None,
        assignees: Sequence[str] | None = None,
    ) -> None: ...

    def stream_waiting(self, invocation: Invocation) -> None: ...

    def flush_streams(self, task_id: str) -> None: ...


class Invocation(AwaitableInvocation):
    """One invocation of one task, in ``run`` or ``abort`` mode.

    A phase decides through it: ``checkpoint`` the next phase, ``wait`` on
    other tasks, ``wait_message`` for a message or ``ask`` for an answer, ``sleep``, or
    ``finish`` with an outcome; it may ``submit`` tasks it owns, keep ``memo`` values and
    read its ``message`` and ``answer`` values. Each call is one scheduler
    decision, recorded before it returns. Once the task stops running (it
    waits, sleeps or ends) or is abort-marked during a run, the invocation has
    ended and further decisions raise :class:`~.errors.RuleViolation`.

    Each decision has an awaitable form for ``async`` phases (``await
    inv.checkpoint_async("next")``, ``finish_async``, ``memo_async``, ``wait_async``,
    ``sleep_async``, ``wait_message_async``, ``submit_async``): the same decision,
    recorded before the await returns, while the event loop runs the other phases. The
    plain forms work from an ``async`` phase too, holding the loop for one command.
    Reads (``task``, ``phase``, a memo's value, ``message``, ``outcome``) are plain:
    a moment under the scheduler's lock.
    """

    scheduler: TaskDecider

    def __init__(self, scheduler: TaskDecider, task_id: str, mode: Mode, *, resumed: bool) -> None:
        self.scheduler = scheduler
        self.task_id = task_id
        self.mode = mode
        self.resumed = resumed
        """Whether this is the first invocation of the task since the store was opened."""
        self.ended = False
        self.lost = False
        """Whether another worker took the task (this worker's lease expired): its
        decisions raise :class:`~..errors.LeaseLost` and record nothing."""
        self.unmarked_reads: list[int] = []
        """The messages :meth:`message` read (their ``seq``) that its next decision
        marks read (rule 21)."""
        self.timed_out: PhaseTimeout | None = None
        """Set when its phase ran past its timeout (rule 24): its decisions raise
        :class:`~..errors.PhaseFenced` and record nothing."""
        self.streams: StreamBuffer | None = None
        """What it emitted and has not recorded yet (:meth:`emit`), once it emits."""

    @property
    def worker(self) -> str:
        """The worker (scheduler process of a fleet) running this invocation."""
        return self.scheduler.worker

    @property
    def task(self) -> TaskState:
        """The task as last recorded."""
        return self.scheduler.task(self.task_id)

    @property
    def phase(self) -> str | None:
        """The phase the task is at."""
        checkpoint = self.task.checkpoint
        return checkpoint.phase if checkpoint is not None else None

    def now(self) -> float:
        """The scheduler clock, in ms since the epoch."""
        return self.scheduler.now()

    def checkpoint(self, phase: str, attempt: int | None = None) -> None:
        """Commit the phase to run next (or the same one again, which is not progress)."""
        _deciding(lambda: self.scheduler.checkpoint(self.task_id, phase, attempt))

    def memo(self, name: str, value: Any = _MISSING) -> Any:
        """Read the memo ``name`` (``None`` if unset) or, given ``value``, record it."""
        if value is _MISSING:
            return self.scheduler.memo(self.task_id, name)
        return _deciding(lambda: self.scheduler.memo(self.task_id, name, value))

    def wait(
        self,
        on: Sequence[str],
        policy: Policy = "all",
        then: str | None = None,
        attempt: int | None = None,
    ) -> None:
        """Wait on tasks, resuming at ``then`` (default: the current phase) with
        ``attempt`` as the checkpoint's attempt."""
        _deciding(
            lambda: self.scheduler.wait(
                self.task_id, on, policy=policy, phase=then, attempt=attempt
            )
        )

    def sleep(self, until: float, then: str | None = None, attempt: int | None = None) -> None:
        """Sleep until the clock reaches ``until``, resuming at ``then`` (default: the
        current phase) with ``attempt`` as the checkpoint's attempt (a retry's backoff)."""
        _deciding(lambda: self.scheduler.sleep(self.task_id, until, phase=then, attempt=attempt))

    def finish(
        self,
        status: str = "completed",
        error: Any = None,
        *,
        reason: str | None = None,
        result: Any = None,
    ) -> None:
        """Decide the outcome: ``completed``, ``failed`` or ``aborted``; ``result`` is
        what the task answers its caller (any JSON value, as large as a memo)."""
        _deciding(
            lambda: self.scheduler.finish(
                self.task_id,
                status,  # type: ignore[arg-type]
                error=error,
                reason=reason,
                result=result,
            )
        )

    def wait_message(
        self, topic: str, phase: str | None = None, timeout_s: float | None = None
    ) -> None:
        """Wait for a message on ``topic`` (a wait: the invocation ends and frees its
        slot), resuming at ``phase`` (default: the current one) once one is unread, at
        once if one is already, or after ``timeout_s`` seconds without one (rule 21).
        The phase resumed then reads it with :meth:`message`."""
        _deciding(
            lambda: self.scheduler.wait_message(
                self.task_id, topic, phase=phase, timeout_s=timeout_s
            )
        )

    def message(self, topic: str) -> Any:
        """The value of the oldest unread message on ``topic`` this invocation has not
        read yet, or ``None`` (none came: a wait's timeout). A plain copy. It is marked
        read when the invocation's next decision is recorded, in the same append: a
        crash before that leaves it unread, and the phase reads it again (rule 21)."""
        found = next_unread(self.task, topic, self.unmarked_reads)
        if found is None:
            return None
        self.unmarked_reads.append(found.seq)
        return thawed(found.value)

    def ask(
        self,
        topic: str,
        request: Any = None,
        phase: str | None = None,
        timeout_s: float | None = None,
        assignees: Sequence[str] | None = None,
    ) -> None:
        """Ask ``request`` (JSON) on ``topic`` of ``assignees`` (names; ``None``: anyone)
        and wait for the first answer (a wait: the invocation ends and frees its slot),
        resuming at ``phase`` (default: the current one) once answered, or after
        ``timeout_s`` seconds without an answer. The ask is open once this returns: an
        answer that comes while this phase still runs is kept. The phase resumed reads
        it with :meth:`answer` (rules 30-32)."""
        _deciding(
            lambda: self.scheduler.ask(
                self.task_id,
                topic,
                request,
                phase=phase,
                timeout_s=timeout_s,
                assignees=assignees,
            )
        )

    def answer(self, topic: str) -> Any:
        """The answer to the task's latest ask on ``topic`` (a plain copy), or ``None``:
        none came (its deadline passed, or it was never asked)."""
        asked = next((a for a in self.task.asks if a.topic == topic), None)
        return thawed(asked.value) if asked is not None and asked.status == "answered" else None

    def emit(self, value: Any, stream: str = "out") -> int:
        """Append ``value`` (any JSON value, at most 64 KiB as JSON) to the task's stream
        ``stream``; returns its offset (0 for a stream's first chunk). It does not wait
        for the store: the chunk is recorded within a few milliseconds, or with this
        invocation's next decision, whichever comes first (:meth:`flush` to wait), so
        an ``async`` phase may call it on its loop. Refused under rule 28
        (:class:`~.streams.StreamRefused`, nothing kept) past the size limit, for a
        value that is not JSON or a closed stream; once the invocation has ended, as
        its decisions are (rules 1, 9, 24)."""
        self._still_deciding()
        buffer = self._stream(stream)
        value, size = chunk(value, stream, self.task_id)
        offset = buffer.add(stream, value, size)
        if buffer.chunks >= MAX_WAITING_CHUNKS or buffer.bytes >= MAX_WAITING_BYTES:
            self.flush()  # emitted faster than the store takes them: wait for it here
        elif buffer.announce and buffer.announced():
            self.scheduler.stream_waiting(self)
        return offset

    def close_stream(self, stream: str = "out") -> None:
        """Close the task's stream ``stream`` after the chunks emitted to it: it takes no
        chunk more (rule 28) and its readers end. Recorded as :meth:`emit`'s chunks are;
        closing a closed stream does nothing. A task's end closes all its streams."""
        self._still_deciding()
        buffer = self._stream(stream)
        if buffer.close(stream):
            self.scheduler.stream_waiting(self)

    def streamed(self, stream: str = "out") -> int:
        """How many chunks the stream ``stream`` holds: those recorded and those this
        invocation emitted since (the next chunk's offset). A phase run again after a
        crash reads here how far the stream got (docs/concepts.md, Streams)."""
        return self._stream(stream).next_offset(stream)

    def flush(self) -> None:
        """Record what this invocation emitted and has not recorded yet, now (one
        decision, refused as its decisions are once it has ended)."""
        buffer = self.streams
        if buffer is not None:
            buffer.settle()  # the stream writer's recording under way ends first
            if buffer.waiting:
                _deciding(lambda: self.scheduler.flush_streams(self.task_id))

    async def flush_async(self) -> None:
        """:meth:`flush` for an ``async`` phase: the loop goes on meanwhile."""
        import asyncio

        if self.streams is not None and self.streams.waiting:
            await asyncio.to_thread(self.flush)

    def _stream(self, stream: str) -> StreamBuffer:
        name = stream_name(stream, self.task_id)
        buffer = self.streams
        if buffer is None:
            buffer = self.streams = StreamBuffer(self.task_id)
        if not buffer.knows(name):
            task = self.task
            summary = task.streams.get(name)
            buffer.learn(name, summary.chunks if summary else 0, closed(task, name))
        return buffer

    def _still_deciding(self) -> None:
        """Rules 24, 9 and 1, as a decision of an ended invocation meets them."""
        if self.timed_out is not None:
            raise PhaseFenced(self.task_id, self.timed_out.phase, self.timed_out.timeout_s)
        if self.lost:
            raise LeaseLost(self.task_id, self.worker, None)
        if self.ended:
            raise RuleViolation(
                1, "its invocation has ended; nothing more is emitted", task_id=self.task_id
            )

    def outcome(self, task_id: str) -> Outcome | None:
        """The outcome (status, result, error) of a task this one waited on, or
        ``None`` while it has none: how an owner collects its children's answers."""
        return self.scheduler.outcome(task_id)

    def submit(self, kind: str, **options: Any) -> str:
        """Submit a task this one owns; returns its id. A decision of this invocation:
        once it has ended (rules 1 and 3), refused like the others. ``options`` are
        ``Scheduler.submit``'s: with ``key=`` (rule 18), a phase run again (after a
        restart) gets the task it submitted before, and nothing is recorded."""
        return _deciding(lambda: self.scheduler.submit_owned(self.task_id, kind, **options))


RUNNING_PHASE: ContextVar[Invocation | None] = ContextVar("tasktrail_phase", default=None)
"""The invocation whose phase handler runs in this context (a thread, or an ``async``
phase's task): a decision it takes after its timeout is fenced (rule 24)."""
