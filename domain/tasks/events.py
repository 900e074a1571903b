"""The events of a task's lifecycle (SPEC.md section 1).

Events are frozen, typed, small data named in the past tense. Each carries the
task it belongs to, ``at`` (the scheduler clock, ms since epoch) and, where a
numbered rule produced it rather than a caller's command, that ``rule``.

Each class has a stable ``topic`` (``tasktrail.<Name>``) under which it is stored;
renaming a class or moving a module never changes what is in a log. Later modules
(turns, runs) register their own event classes with :func:`register_event`.

Most events belong to their task's own stream (stream id = task id), so the task's
aggregate version guards them. An event class with ``task_stream = False`` belongs to
another stream, named by its :meth:`TaskEvent.stream_id` (a dispatch run, say, which
must outlive the task's terminal event); it stores ``task_id`` in its payload, and
:func:`~.evolve.evolves_stream` registers how it folds.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from .fields import MAX_TIME_MS as MAX_TIME_MS  # the bound of every `at` (store/wire.py)
from .fields import field_check, limits_problem

Mode = Literal["run", "abort"]
Policy = Literal["all", "failFast"]
OutcomeStatus = Literal["completed", "failed", "faulted", "aborted", "orphaned"]
OUTCOME_STATUSES: tuple[OutcomeStatus, ...] = (
    "completed",
    "failed",
    "faulted",
    "aborted",
    "orphaned",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskEvent:
    """Base of every task event: which task, when on the scheduler clock, and why.

    ``rule`` is set when a numbered rule of SPEC.md produced the event on its
    own (a cascade mark is rule 6, a recovery is rule 9), ``None`` when the
    event is what a caller's command asked for.
    """

    topic: ClassVar[str] = ""
    class_version: ClassVar[int] = 1
    task_stream: ClassVar[bool] = True
    """Whether the event belongs to its task's own stream."""

    task_id: str
    at: float
    rule: int | None = None

    def stream_id(self) -> str:
        """The id of the stream (eventsourcing aggregate) this event is appended to."""
        return self.task_id


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskSubmitted(TaskEvent):
    """A task was created, ``pending`` at its first phase.

    Version 2 added ``priority``: a worker whose slots are scarce takes higher
    priorities first (rule 19; 0 normal). Tasks recorded by the first release read as 0.
    Since then, optional (``None`` in events recorded before): the checkpoint's
    ``attempt`` and the ``memos`` it starts with (a JSON object: a submitter's input,
    a fork's copy), who submitted it and why (:data:`ACT_FIELDS`), and the idempotency
    ``key`` it was submitted with (rule 18, :mod:`.keys`).
    """

    class_version: ClassVar[int] = 2

    kind: str
    version: int
    phase: str
    owner_id: str | None = None
    conversation_id: str | None = None
    project_ids: tuple[str, ...] = ()
    trace: dict[str, str] | None = None
    abandon_on_restart: bool = False
    priority: int = 0
    attempt: int | None = None
    memos: Any = None
    actor: str | None = None
    why: str | None = None
    key: str | None = None

    @staticmethod
    def upcast_v1_v2(payload: dict[str, Any]) -> None:
        """A first-release submission had no priority: it was a normal one."""
        payload["priority"] = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskReserved(TaskEvent):
    """An invocation took the task: ``running`` in ``run`` or ``abort`` mode.

    ``worker`` names the scheduler process that holds it (SPEC section 8); events
    recorded before workers existed read as ``None``.
    """

    mode: Mode
    worker: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskMigrated(TaskEvent):
    """A newer definition's ``migrate`` took the task over at reservation."""

    from_version: int
    to_version: int
    phase: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckpointCommitted(TaskEvent):
    """The running task committed a checkpoint (its next phase, or the same one again)."""

    phase: str
    attempt: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoRecorded(TaskEvent):
    """The running task remembered a value under a name, until its outcome is decided."""

    name: str
    value: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitStarted(TaskEvent):
    """The task waits on other tasks, to resume at the checkpoint ``phase`` (and
    ``attempt``; events recorded before it was kept read as ``None``)."""

    on: tuple[str, ...]
    policy: Policy
    phase: str
    attempt: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SleepStarted(TaskEvent):
    """The task sleeps until the scheduler clock reaches ``until``, to resume at the
    checkpoint ``phase`` (and ``attempt``; events recorded before it was kept read as
    ``None``)."""

    until: float
    phase: str
    attempt: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class OutcomeHeld(TaskEvent):
    """The task decided its outcome while owned tasks were live: ``completing`` (rule 5).
    ``result``: the value a ``completed`` phase answered (``None`` before results)."""

    status: OutcomeStatus
    message: str | None = None
    detail: Any = None
    reason: str | None = None
    result: Any = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskEnded(TaskEvent):
    """The task reached its outcome: ``terminal``, absorbing (rule 4); ``result`` as
    :class:`OutcomeHeld`'s."""

    status: OutcomeStatus
    message: str | None = None
    detail: Any = None
    reason: str | None = None
    result: Any = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AbortMarked(TaskEvent):
    """An abort mark: ``reason`` ``None`` for a request, ``"restart"`` for an abandonment.

    ``by`` names the owner whose cancellation cascaded to this task (rule 6);
    ``actor`` and ``why`` who asked for a request mark and why (:data:`ACT_FIELDS`).
    """

    reason: str | None = None
    by: str | None = None
    actor: str | None = None
    why: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskRecovered(TaskEvent):
    """Recovery after a crash put a ``running`` task back to ``pending`` (rule 9).

    ``worker`` is the worker that held it and was lost (its lease expired, or it
    was this worker's own name, reopened); ``None`` before workers existed.
    """

    restarts: int
    worker: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskStopped(TaskEvent):
    """A close stopped the task's invocation: ``pending`` again, no restart counted (rule 10)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RestartsCleared(TaskEvent):
    """``retry`` cleared the restart count of a parked task (rule 9); ``actor`` and
    ``why`` who did and why (:data:`ACT_FIELDS`)."""

    actor: str | None = None
    why: str | None = None


ACT_FIELDS = ("actor", "why")
"""The optional fields of an operator's act (submit, abort, retry, fork, the settings):
who did it and why. ``None`` when not given and in events recorded before them."""

E = TypeVar("E", bound=type[TaskEvent])

EVENT_TYPES: dict[str, type[TaskEvent]] = {}
"""Every known event class by its stored topic."""

_TUPLE_FIELDS: dict[type[TaskEvent], tuple[str, ...]] = {}
_TEXT_FIELDS: dict[type[TaskEvent], tuple[str, ...]] = {}
_PAYLOAD_FIELDS: dict[type[TaskEvent], tuple[str, ...]] = {}
_NUMBER_FIELDS: dict[type[TaskEvent], tuple[tuple[str, bool, bool], ...]] = {}
"""Each event class's number fields: ``(name, integer, optional)``."""
_BUILDERS: dict[type[TaskEvent], Any] = {}


def register_event(cls: E) -> E:
    """Give an event class its stored topic and make it readable from a log."""
    topic = f"tasktrail.{cls.__name__}"
    if EVENT_TYPES.get(topic, cls) is not cls:
        raise TypeError(f"two event classes claim the topic {topic!r}")
    cls.topic = topic
    EVENT_TYPES[topic] = cls
    fields = dataclasses.fields(cls)
    _PAYLOAD_FIELDS[cls] = tuple(
        f.name for f in fields if f.name != "task_id" or not cls.task_stream
    )
    typed = {f.name: str(f.type) for f in fields}
    plain = {name: kind.replace(" | None", "") for name, kind in typed.items()}
    _TUPLE_FIELDS[cls] = tuple(name for name, kind in typed.items() if kind.startswith("tuple"))
    # What the limits look at: every stored field but plain numbers and flags.
    _TEXT_FIELDS[cls] = tuple(
        name for name in _PAYLOAD_FIELDS[cls] if plain[name] not in ("int", "float", "bool")
    )
    # What must be a number a reader takes back: (name, integer, optional).
    _NUMBER_FIELDS[cls] = tuple(
        (name, plain[name] == "int", typed[name].endswith(" | None"))
        for name in _PAYLOAD_FIELDS[cls]
        if plain[name] in ("int", "float")
    )
    _BUILDERS[cls] = _builder(cls)
    return cls


def _builder(cls: type[TaskEvent]) -> Any:
    """``build(stream_id, payload)``: the event, made as its generated ``__init__`` would
    make it (each slot set once), at half its cost: a log is read an event at a time.

    A missing field or an unknown one is a :class:`TypeError`, as with ``__init__``,
    and so is a stored value of the wrong type for its field (each checked against
    its annotation, :func:`.fields.field_check`). Classes the fast way cannot build
    (no slots, a ``__post_init__``, a default factory) are built by ``__init__``.
    """
    fields = dataclasses.fields(cls)
    hints = typing.get_type_hints(cls)

    def wrong(name: str, value: Any, expected: str) -> None:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TypeError(f"{cls.__name__}.{name} must be {expected}, not {shown}")

    namespace: dict[str, Any] = {"new_object": object.__new__, "cls": cls, "wrong": wrong}
    checks: list[str] = []
    for f in fields:
        expression, expected, names = field_check(hints[f.name], f.name)
        namespace.update(names)
        namespace[f"expected_{f.name}"] = expected
        checks.append(
            f"if not ({expression}): wrong({f.name!r}, v, expected_{f.name})" if expression else ""
        )
    plain = not hasattr(cls, "__post_init__") and all(
        isinstance(getattr(cls, f.name, None), types.MemberDescriptorType)
        and f.default_factory is dataclasses.MISSING
        for f in fields
    )
    if not plain:
        lines = ["def check(payload):"]
        for f, check in zip(fields, checks, strict=True):
            if check:
                lines += [f"    if {f.name!r} in payload:", f"        v = payload[{f.name!r}]"]
                lines.append(f"        {check}")
        lines.append("    return payload")
        exec("\n".join(lines), namespace)
        checked = namespace["check"]
        if cls.task_stream:
            return lambda stream_id, payload: cls(task_id=stream_id, **checked(payload))
        return lambda stream_id, payload: cls(**checked(payload))
    lines = ["def build(stream_id, payload):", "    new = new_object(cls)"]
    lines += ["    take = payload.pop", "    try:"]
    for f, check in zip(fields, checks, strict=True):
        namespace[f"set_{f.name}"] = getattr(cls, f.name).__set__
        if f.name == "task_id" and cls.task_stream:
            lines.append("        set_task_id(new, stream_id)")
            continue
        if f.default is not dataclasses.MISSING:
            namespace[f"default_{f.name}"] = f.default
            lines.append(f"        v = take({f.name!r}, default_{f.name})")
        else:
            lines.append(f"        v = take({f.name!r})")
        if check:
            lines.append(f"        {check}")
        lines.append(f"        set_{f.name}(new, v)")
    lines += [
        "    except KeyError as missing:",
        "        raise TypeError(f'{cls.__name__} is missing the field {missing}') from None",
        "    if payload:",
        "        raise TypeError(f'{cls.__name__} has no fields {sorted(payload)}')",
        "    return new",
    ]
    exec("\n".join(lines), namespace)
    return namespace["build"]


for _cls in (
    TaskSubmitted,
    TaskReserved,
    TaskMigrated,
    CheckpointCommitted,
    MemoRecorded,
    WaitStarted,
    SleepStarted,
    OutcomeHeld,
    TaskEnded,
    AbortMarked,
    TaskRecovered,
    TaskStopped,
    RestartsCleared,
):
    register_event(_cls)


def event_payload(event: TaskEvent) -> dict[str, Any]:
    """The stored fields of an event: all but ``task_id`` where that is the stream's id."""
    return {name: getattr(event, name) for name in _PAYLOAD_FIELDS[type(event)]}


def event_problem(event: TaskEvent) -> str | None:
    """What keeps an event out of the log (the limits of :mod:`.fields`: NUL, lone
    surrogates, lengths; a number field holding no finite number), or ``None``. Every
    store checks it before writing."""
    cls = type(event)
    return limits_problem(event, _TEXT_FIELDS[cls], _NUMBER_FIELDS[cls])


def event_from_payload(cls: type[TaskEvent], stream_id: str, payload: dict[str, Any]) -> TaskEvent:
    """Rebuild an event of stream ``stream_id`` from its stored fields; unknown or
    missing fields are a :class:`TypeError`."""
    for name in _TUPLE_FIELDS[cls]:
        value = payload.get(name)
        if isinstance(value, list):
            payload[name] = tuple(value)
    event: TaskEvent = _BUILDERS[cls](stream_id, payload)
    return event
