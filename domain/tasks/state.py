"""A task's state as the fold of its events (SPEC.md section 1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..frozen import EMPTY, thawed
from ..turns.state import RoleState
from .events import Mode, OutcomeStatus, Policy

Status = Literal["pending", "running", "waiting", "sleeping", "completing", "terminal"]
LIVE_STATUSES: frozenset[str] = frozenset(
    {"pending", "running", "waiting", "sleeping", "completing"}
)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where a task resumes: the phase to run next, and an optional attempt number."""

    phase: str
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a task ended (or will end, while ``completing``). A ``detail`` the fold
    made is read-only (:func:`~..frozen.frozen`); :meth:`to_dict` gives a plain copy."""

    status: OutcomeStatus
    message: str | None = None
    detail: Any = None
    reason: str | None = None
    result: Any = None
    """What the phase that finished the task answered (``finish(result=...)``), JSON."""

    @property
    def error(self) -> dict[str, Any] | None:
        """``{"message", "detail"}`` when the outcome carries an error, else ``None``."""
        if self.message is None and self.detail is None:
            return None
        return {"message": self.message, "detail": thawed(self.detail)}

    def to_dict(self) -> dict[str, Any]:
        """The outcome as plain data, leaving out what is unset."""
        out: dict[str, Any] = {"status": self.status}
        if self.message is not None or self.detail is not None:
            out["error"] = {"message": self.message, "detail": thawed(self.detail)}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.result is not None:
            out["result"] = thawed(self.result)
        return out


@dataclass(frozen=True, slots=True)
class Message:
    """A message sent to a task and not read yet (rules 20 and 21): its number in the
    task's mailbox (1, 2, ...), its topic, its value (read-only, as a memo's) and when
    it was sent. Who sent it and why are on its ``MessageSent`` event."""

    seq: int
    topic: str
    value: Any
    at: float


AskStatus = Literal["open", "answered", "timeout", "abort"]


@dataclass(frozen=True, slots=True)
class AskState:
    """A task's latest ask on one topic (rules 30 to 32, :mod:`.asks`): what it asked
    (``request``, read-only as a memo's) and of whom (``assignees``; none: anyone), when
    (``asked_at``) and until when (``deadline``, ``None`` for none, on the scheduler
    clock); ``status`` ``open`` until it is answered (``value``, by ``actor`` because
    ``why``, at ``closed_at``) or closed by its deadline (``timeout``) or an abort mark
    (``abort``). ``waiting``: the task waits for it (from the ask until its next
    reservation)."""

    topic: str
    request: Any
    assignees: tuple[str, ...]
    asked_at: float
    deadline: float | None = None
    status: AskStatus = "open"
    waiting: bool = True
    value: Any = None
    actor: str | None = None
    why: str | None = None
    closed_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ask as plain JSON-ready data, leaving out what is unset."""
        out: dict[str, Any] = {
            "topic": self.topic,
            "request": thawed(self.request),
            "assignees": list(self.assignees),
            "asked_at": self.asked_at,
            "status": self.status,
        }
        if self.deadline is not None:
            out["deadline"] = self.deadline
        if self.status == "answered":
            out.update(value=thawed(self.value), actor=self.actor, reason=self.why)
        if self.closed_at is not None:
            out["closed_at"] = self.closed_at
        return out


@dataclass(frozen=True, slots=True)
class StreamState:
    """One named stream of a task's output (rules 28 and 29): how many chunks it holds
    (the next chunk's offset), their size as JSON, how many events recorded them, and
    whether ``close_stream`` closed it. The chunks' values are on their events only: a
    reader reads them from the log (``Scheduler.read_stream``), never from a state. A
    task whose outcome is decided has every stream closed (:func:`.streams.closed`)."""

    chunks: int = 0
    bytes: int = 0
    events: int = 0
    closed: bool = False


@dataclass(frozen=True, slots=True)
class Flow:
    """A task's flow control, as recorded when its keys were computed (rules 33, 34):
    its limit's key and how many of its kind with that key may run at once, its rate's
    key and token bucket (``per_s`` tokens a second, ``burst`` at most). ``None`` in a
    key: that policy does not hold the task back (its key function answered ``None``)."""

    limit_key: str | None = None
    max_running: int | None = None
    rate_key: str | None = None
    per_s: float | None = None
    burst: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The keys and their policies as plain data, leaving out a policy without a key."""
        out: dict[str, Any] = {}
        if self.limit_key is not None:
            out["limit"] = {"key": self.limit_key, "max_running": self.max_running}
        if self.rate_key is not None:
            out["rate"] = {"key": self.rate_key, "per_s": self.per_s, "burst": self.burst}
        return out


@dataclass(frozen=True, slots=True)
class TaskState:
    """Everything known of one task after the events so far.

    ``version`` counts the task's events; it is the aggregate version the
    next event must follow (optimistic concurrency).

    The fold hands out no container to change: ``memos``, ``roles`` and ``trace`` are
    read-only mappings (:class:`~..frozen.FrozenDict`, a ``dict`` that refuses every
    change with :class:`TypeError`) and each memo value is read-only all the way down
    (its lists :class:`~..frozen.FrozenList`); a change to a state is an event, or it
    would not be in the log, a replay or another process. :meth:`to_dict` and
    ``Scheduler.memo`` give plain copies, to change freely.
    """

    id: str
    kind: str
    version: int
    """The definition version the task was recorded under."""
    status: Status
    checkpoint: Checkpoint | None
    owner_id: str | None = None
    conversation_id: str | None = None
    project_ids: tuple[str, ...] = ()
    mode: Mode | None = None
    on: tuple[str, ...] = ()
    policy: Policy | None = None
    until: float | None = None
    outcome: Outcome | None = None
    memos: Mapping[str, Any] = EMPTY
    restarts: int = 0
    abort_requested: bool = False
    abort_reason: str | None = None
    trace: Mapping[str, str] | None = None
    abandon_on_restart: bool = False
    priority: int = 0
    """Higher runs first when a worker's slots are scarce (rule 19); 0 is normal."""
    submitted_at: float = 0
    updated_at: float = 0
    events: int = 0
    """How many events made this state: the aggregate version."""
    roles: Mapping[str, RoleState] = EMPTY
    """The task's roles (``leader`` and named others) and their Turns (SPEC.md section 2)."""
    worker: str | None = None
    """The worker holding the task while it is ``running`` (SPEC section 8), else ``None``."""
    started_version: int | None = None
    """The event number of the task's first reservation (pi-durable's ``startedAt``):
    its first phase span's id derives from it, so later spans can link to it."""
    message_topic: str | None = None
    """While ``waiting`` for a message (rule 21): its topic (``until`` is its deadline,
    if any); ``None`` otherwise."""
    mailbox: tuple[Message, ...] = ()
    """The messages sent to the task and not read yet, oldest first (rules 20, 21)."""
    messages_sent: int = 0
    """How many messages were ever sent to the task (the next one's number less one)."""
    asks: tuple[AskState, ...] = ()
    """The task's latest ask on each topic it asked on, oldest first (rules 30-32)."""
    streams: Mapping[str, StreamState] = EMPTY
    """The task's output streams by name (rules 28 and 29), each summarized."""
    flow: Flow | None = None
    """Its limit and rate keys with their policies (rules 33, 34), recorded at submit
    (or, submitted where its definition was not known, at its first reservation);
    ``None`` while none were recorded."""

    @property
    def live(self) -> bool:
        """Not terminal: it may still change."""
        return self.status != "terminal"

    @property
    def request_marked(self) -> bool:
        """Abort-marked by a request (not merely abandoned on restart)."""
        return self.abort_requested and self.abort_reason is None

    def cancelling(self) -> bool:
        """Durable cancellation intent (rule 6): an abort mark, or a held outcome other
        than ``completed``."""
        if self.status == "terminal":
            return False
        if self.abort_requested:
            return True
        return (
            self.status == "completing"
            and self.outcome is not None
            and self.outcome.status != "completed"
        )

    def to_dict(self) -> dict[str, Any]:
        """The state as plain JSON-ready data, leaving out fields that do not apply."""
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "version": self.version,
            "status": self.status,
        }
        if self.checkpoint is not None:
            out["checkpoint"] = {"phase": self.checkpoint.phase}
            if self.checkpoint.attempt is not None:
                out["checkpoint"]["attempt"] = self.checkpoint.attempt
        if self.owner_id is not None:
            out["owner_id"] = self.owner_id
        if self.conversation_id is not None:
            out["conversation_id"] = self.conversation_id
        if self.project_ids:
            out["project_ids"] = list(self.project_ids)
        if self.mode is not None:
            out["mode"] = self.mode
        if self.status == "waiting" and self.message_topic is not None:
            out["message_topic"] = self.message_topic
        elif self.status == "waiting":
            out["on"] = list(self.on)
            out["policy"] = self.policy
        if self.until is not None:
            out["until"] = self.until
        if self.outcome is not None:
            out["outcome"] = self.outcome.to_dict()
        if self.memos:
            out["memos"] = thawed(self.memos)
        if self.restarts:
            out["restarts"] = self.restarts
        if self.priority:
            out["priority"] = self.priority
        if self.abort_requested:
            out["abort_requested"] = True
            out["abort_reason"] = self.abort_reason
        if self.roles:
            out["roles"] = {name: role.to_dict() for name, role in self.roles.items()}
        if self.started_version is not None:
            out["started_version"] = self.started_version
        if self.mailbox:
            out["mailbox"] = [
                {"seq": m.seq, "topic": m.topic, "value": thawed(m.value), "at": m.at}
                for m in self.mailbox
            ]
        if self.asks:
            out["asks"] = [ask.to_dict() for ask in self.asks]
        if self.streams:
            decided = self.outcome is not None
            out["streams"] = {
                name: {"chunks": s.chunks, "bytes": s.bytes, "closed": s.closed or decided}
                for name, s in self.streams.items()
            }
        if self.flow is not None and self.flow.to_dict():
            out["flow"] = self.flow.to_dict()
        out["events"] = self.events
        return out

    def _repr_html_(self) -> str:
        """A notebook's view: one table of the task's fields."""
        from html import escape

        rows = "".join(
            f"<tr><th style='text-align:left'>{escape(key)}</th>"
            f"<td style='text-align:left'>{escape(_html_cell(value))}</td></tr>"
            for key, value in self.to_dict().items()
        )
        return f"<table><caption>task {escape(self.id)}</caption>{rows}</table>"


def _html_cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    import orjson

    return orjson.dumps(value, default=repr).decode()


@dataclass(frozen=True, slots=True)
class KeyState:
    """An idempotency key's stream (rule 18, :mod:`.keys`): the task it names."""

    key: str
    task_id: str
    at: float


@dataclass(frozen=True, slots=True)
class LimitState:
    """A limit key's stream (rule 33, :mod:`.flow_events`): how many reservations it
    counted, and the last one's task, time and running count (itself included)."""

    kind: str
    key: str
    taken: int
    task_id: str
    at: float
    running: int


@dataclass(frozen=True, slots=True)
class RateState:
    """A rate key's token bucket (rule 34): ``tokens`` left at ``at`` (the last
    reservation's time, its token taken), filling at ``per_s`` a second up to ``burst``."""

    kind: str
    key: str
    tokens: float
    at: float
    per_s: float
    burst: int
    taken: int


@dataclass(frozen=True, slots=True)
class DebounceWindow:
    """A debounce key's stream (rule 35): the task its latest window opened."""

    kind: str
    key: str
    task_id: str
    opened: int
    at: float
