"""A task's output streams (rules 28 and 29): chunks a phase emits, in order, that a
caller reads while the task runs and resumes from an offset.

A phase emits a chunk (any JSON value, at most :data:`MAX_CHUNK_BYTES` as JSON, as a
memo) to a named stream of its task (``inv.emit(value, stream="out")``) and may close it
(``inv.close_stream(name)``); a task whose outcome is decided has every stream closed.
The chunks are events of the task's own stream, folded by the one ``evolve``:
:class:`ChunksEmitted` carries one or more consecutive chunks of one stream, from the
offset ``first`` (coalesced: what an invocation emitted since its last recorded decision,
at most :data:`MAX_EVENT_CHUNKS` chunks or :data:`MAX_EVENT_BYTES` an event), and
:class:`StreamClosed` closes one. The task's state keeps a summary per stream
(:class:`~.state.StreamState`: chunks, bytes, closed), never the values: a reader reads
them from the log.

Rule 28 refuses: a chunk past the size limit or not JSON, a stream name that is no name,
and a chunk on a closed stream (each :class:`StreamRefused`, appending nothing). Rule 29
keeps offsets dense and stable: a stream's chunks are numbered 0, 1, 2, ... in the order
recorded, each event's ``first`` is the number of chunks before it (the fold refuses any
other, and so does :func:`emitting`), so what was recorded keeps its offset for good and a
phase run again after a crash goes on after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from ..errors import InvalidArgument, RuleViolation
from ..frozen import FrozenDict
from ..world import Draft
from .context import Context
from .events import TaskEvent, register_event
from .evolve import InvalidTransition, evolves, step
from .guards import invocation_decision
from .state import StreamState, TaskState
from .validation import MAX_VALUE_BYTES, json_value, phase_name

MAX_CHUNK_BYTES = MAX_VALUE_BYTES
"""The most a chunk may take as JSON (64 KiB, as a memo); past it, rule 28 refuses it."""
MAX_EVENT_CHUNKS = 1000
"""The most chunks one :class:`ChunksEmitted` carries; more make more events."""
MAX_EVENT_BYTES = 256 * 1024
"""The most bytes (as JSON) of chunks one event carries, beyond its first chunk."""


class StreamRefused(RuleViolation, ValueError):
    """A chunk or a stream refused under rule 28 (too large, not JSON, a name that is no
    name, a closed stream): nothing was emitted."""

    def __init__(self, reason: str, *, task_id: str | None = None) -> None:
        super().__init__(28, reason, task_id=task_id)


@dataclass(frozen=True, kw_only=True, slots=True)
class ChunksEmitted(TaskEvent):
    """Chunks of the stream ``stream``: ``values`` (JSON values, in order) at offsets
    ``first``, ``first + 1``, ...; ``size``: their bytes as JSON, all together."""

    command: ClassVar[str] = "emit"
    stream: str
    first: int
    values: Any
    size: int


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamClosed(TaskEvent):
    """The stream ``stream`` is closed: it takes no chunk more, and its readers end."""

    command: ClassVar[str] = "close_stream"
    stream: str


for _cls in (ChunksEmitted, StreamClosed):
    register_event(_cls)


# ─── the folds ─────────────────────────────────────────────────────────────

_EMPTY_STREAM = StreamState()


@evolves(ChunksEmitted)
def _emitted(state: TaskState, event: ChunksEmitted) -> TaskState:
    if state.status != "running":
        raise InvalidTransition(f"task {state.id}: ChunksEmitted while {state.status}")
    values = event.values
    if not isinstance(values, list) or not values:
        raise InvalidTransition(f"task {state.id}: ChunksEmitted without a list of chunks")
    now = state.streams.get(event.stream, _EMPTY_STREAM)
    # 28. A closed stream takes no chunk.
    if now.closed:
        raise InvalidTransition(f"task {state.id}: chunks on the closed stream {event.stream!r}")
    # 29. Offsets are dense: an event's first chunk follows the chunks recorded before it.
    if event.first != now.chunks:
        raise InvalidTransition(
            f"task {state.id}: chunks from offset {event.first} of stream {event.stream!r}, "
            f"which holds {now.chunks}"
        )
    after = StreamState(now.chunks + len(values), now.bytes + event.size, now.events + 1, False)
    return step(state, event, streams=FrozenDict({**state.streams, event.stream: after}))


@evolves(StreamClosed)
def _closed(state: TaskState, event: StreamClosed) -> TaskState:
    if state.status != "running":
        raise InvalidTransition(f"task {state.id}: StreamClosed while {state.status}")
    now = state.streams.get(event.stream, _EMPTY_STREAM)
    if now.closed:
        raise InvalidTransition(f"task {state.id}: stream {event.stream!r} closed twice")
    after = StreamState(now.chunks, now.bytes, now.events + 1, True)
    return step(state, event, streams=FrozenDict({**state.streams, event.stream: after}))


# ─── what a state says of its streams ──────────────────────────────────────


def closed(task: TaskState, stream: str) -> bool:
    """Whether ``stream`` of ``task`` is closed: closed by its phase, or the task's
    outcome is decided (rule 29: a task's end closes all its streams)."""
    if task.outcome is not None or task.status == "terminal":
        return True
    summary = task.streams.get(stream)
    return summary is not None and summary.closed


def decisions(task: TaskState) -> int:
    """How many of the task's events are not its streams' (what a phase decided: a
    phase that only emitted chunks decided nothing)."""
    return task.events - sum(s.events for s in task.streams.values())


def summaries(task: TaskState) -> dict[str, dict[str, Any]]:
    """Each stream of ``task`` summarized: ``{name: {chunks, bytes, closed}}``."""
    return {
        name: {"chunks": s.chunks, "bytes": s.bytes, "closed": closed(task, name)}
        for name, s in task.streams.items()
    }


def summary_line(name: str, chunks: int, size: int, is_closed: bool) -> str:
    """One stream in words: ``stream 'out': 12 chunks, 340 bytes, closed``."""
    plural = "" if chunks == 1 else "s"
    state = "closed" if is_closed else "open"
    return f"stream {name!r}: {chunks} chunk{plural}, {size} bytes, {state}"


# ─── the rules ─────────────────────────────────────────────────────────────


def stream_name(name: Any, task_id: str | None) -> str:
    """Rule 28: a stream's name is a name (a non-empty string, as a phase's)."""
    try:
        return phase_name(name, "stream", task_id)
    except InvalidArgument as error:
        raise StreamRefused(error.reason, task_id=task_id) from None


def chunk(value: Any, stream: str, task_id: str | None) -> tuple[Any, int]:
    """Rule 28: a chunk is JSON of at most :data:`MAX_CHUNK_BYTES`; returns it as the log
    reads it back, and its size as JSON."""
    if value.__class__ is str:  # a token: one encoding, and it reads back as itself
        try:
            size = len(orjson.dumps(value))
        except TypeError:  # a lone surrogate: json_value says so
            size = MAX_CHUNK_BYTES + 1
        if size <= MAX_CHUNK_BYTES:
            return value, size
    try:
        value = json_value(value, f"a chunk of stream {stream!r}", task_id)
    except InvalidArgument as error:
        raise StreamRefused(
            f"{error.reason}; nothing was emitted (a larger answer goes in several chunks)",
            task_id=task_id,
        ) from None
    return value, len(orjson.dumps(value))


@dataclass
class Batch:
    """What an invocation emitted to one stream and has not recorded yet: ``values`` from
    the offset ``first`` (``size`` their bytes), and whether it then closed the stream."""

    first: int
    values: list[Any] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    close: bool = False


Pending = Mapping[str, Batch]
"""An invocation's unrecorded chunks and closes, by stream, in the order first emitted."""


def emitting(pending: Pending, decision: Callable[..., Any]) -> Callable[..., Any]:
    """``decision`` with the chunks and closes ``pending`` recorded first, in the same
    decision (so in the same append): how an invocation's next decision records what it
    emitted, and the whole of what :func:`flush` decides."""

    def decide(draft: Draft, ctx: Context, task_id: str, /, *args: Any, **kwargs: Any) -> Any:
        task = invocation_decision(draft, ctx, task_id)  # refused: nothing is recorded
        for name, batch in pending.items():
            now = task.streams.get(name, _EMPTY_STREAM)
            # 28. A closed stream takes no chunk (its invocation refused it first).
            if now.closed and (batch.values or batch.close):
                raise StreamRefused(f"the stream {name!r} is closed", task_id=task_id)
            # 29. Offsets are dense and stable: these chunks follow those recorded.
            if batch.values and batch.first != now.chunks:
                raise RuleViolation(
                    29,
                    f"chunks from offset {batch.first} of stream {name!r}, which holds "
                    f"{now.chunks}: offsets are dense and never change",
                    task_id=task_id,
                )
            for first, values, size in _events_of(batch):
                task = draft.emit(
                    ChunksEmitted(
                        task_id=task_id, at=ctx.now, stream=name, first=first, values=values,
                        size=size,
                    )
                )  # fmt: skip
            if batch.close:
                task = draft.emit(StreamClosed(task_id=task_id, at=ctx.now, stream=name))
        return decision(draft, ctx, task_id, *args, **kwargs)

    return decide


def flush(draft: Draft, ctx: Context, task_id: str) -> None:
    """An invocation's decision of nothing but its streams' (:func:`emitting` records
    them): the running task's invocation, checked as every decision is (rules 1 to 3)."""
    invocation_decision(draft, ctx, task_id)


def _events_of(batch: Batch) -> list[tuple[int, list[Any], int]]:
    """``batch``'s chunks cut into events of at most :data:`MAX_EVENT_CHUNKS` chunks and
    :data:`MAX_EVENT_BYTES` (an event holds one chunk at least)."""
    events: list[tuple[int, list[Any], int]] = []
    first, size = batch.first, 0
    values: list[Any] = []
    for value, bytes_ in zip(batch.values, batch.sizes, strict=True):
        if values and (len(values) >= MAX_EVENT_CHUNKS or size + bytes_ > MAX_EVENT_BYTES):
            events.append((first, values, size))
            first, values, size = first + len(values), [], 0
        values.append(value)
        size += bytes_
    if values:
        events.append((first, values, size))
    return events


__all__ = [
    "MAX_CHUNK_BYTES",
    "Batch",
    "ChunksEmitted",
    "StreamClosed",
    "StreamRefused",
    "chunk",
    "closed",
    "decisions",
    "emitting",
    "flush",
    "stream_name",
    "summaries",
    "summary_line",
]
