"""``tasktrail stream STORE TASK [--stream NAME] [--after N] [--follow] [--json]``: the
chunks of one of a task's output streams (rules 28 and 29).

A read command: it opens the store read-only and reads the task's own events
(:class:`~tasktrail.domain.service.stream_reading.StreamCursor`, as
``Scheduler.read_stream`` does). Each chunk is a line ``OFFSET  VALUE`` (the value as
compact JSON), or with ``--json`` one object ``{"offset", "value"}`` a line. With
``--follow`` it waits for more on the store's news until the stream closes (its phase
closed it, or the task ended); ``--after N`` starts after the offset N, where a reader
that went away got to. Exit 0, or 2 for a task the store does not have.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tasktrail.domain import TaskEvent, open_store
from tasktrail.domain.service.stream_reading import StreamCursor, first_look, follow
from tasktrail.domain.store.recorded import Recorded
from tasktrail.domain.tasks.describe import format_at
from tasktrail.domain.tasks.events import OutcomeHeld, TaskEnded, event_payload
from tasktrail.domain.tasks.streams import ChunksEmitted, StreamClosed, summary_line

from ..common import EXIT_OK, STORE_HELP, emit, say, task_id_argument

DESCRIPTION = (
    "Print the chunks a task's phases emitted to one of its streams (inv.emit), one a "
    "line: its offset and its value as JSON. --after N starts after offset N; --follow "
    "waits for more until the stream is closed (by its phase, or by the task's end)."
)


def _offset(text: str) -> int:
    try:
        offset = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an offset: {text!r}") from None
    if offset < -1:
        raise argparse.ArgumentTypeError(f"an offset is -1 or more, not {offset}")
    return offset


def add_stream(commands: Any) -> None:
    stream = commands.add_parser(
        "stream", help="the chunks of a task's output stream, as they come", description=DESCRIPTION
    )
    stream.add_argument("store", help=STORE_HELP)
    stream.add_argument("task", help="the task id")
    stream.add_argument("--stream", default="out", metavar="NAME", help="its name (default out)")
    stream.add_argument(
        "--after", type=_offset, default=-1, metavar="N", help="start after offset N (default -1)"
    )
    stream.add_argument("--follow", action="store_true", help="wait for chunks until it closes")
    stream.add_argument("--json", action="store_true", help="one JSON object a chunk")


def do_stream(args: argparse.Namespace) -> int:
    task_id = task_id_argument(args.task)
    with open_store(args.store, read_only=True) as store:
        cursor = StreamCursor(store, task_id, args.stream, args.after)
        for offset, value in follow(cursor, args.follow, None, first_look(cursor)):
            if args.json:
                emit({"offset": offset, "value": value})
            else:
                text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                say(f"{offset}  {text}")
            if args.follow:
                sys.stdout.flush()  # a reader of the pipe sees each chunk as it comes
    return EXIT_OK


# ─── what ``history`` shows of a stream: runs of chunks, not every chunk ────


def shown_payload(event: TaskEvent) -> dict[str, Any]:
    """An event's stored fields for ``history --json``; a :class:`ChunksEmitted`'s
    values counted (``chunks``), not listed: ``tasktrail stream`` prints them."""
    payload = event_payload(event)
    if isinstance(event, ChunksEmitted):
        payload.pop("values", None)
        payload["chunks"] = len(event.values) if isinstance(event.values, list) else 0
    return payload


class ChunkRuns:
    """``history``'s lines for the chunks of a task: consecutive :class:`ChunksEmitted`
    of one stream as one line, and each stream summarized at the end."""

    def __init__(self) -> None:
        self._run: list[Recorded] = []
        self._streams: dict[str, list[int]] = {}  # name: [chunks, bytes]
        self._closed: set[str] = set()
        self._decided = False

    def take(self, recorded: Recorded) -> list[str]:
        """The lines to show before ``recorded`` (the run of chunks it ends); a chunk
        event is kept for a later line."""
        event = recorded.event
        if isinstance(event, StreamClosed):
            self._closed.add(event.stream)
        elif isinstance(event, OutcomeHeld | TaskEnded):
            self._decided = True  # an outcome closes every stream (rule 29)
        if not isinstance(event, ChunksEmitted):
            return self.lines()
        before = self.lines() if self._run and self._run[-1].event.stream != event.stream else []  # type: ignore[attr-defined]
        self._run.append(recorded)
        return before

    def lines(self) -> list[str]:
        """The run of chunk events kept so far, as one line (none when there is none)."""
        if not self._run:
            return []
        first, last = self._run[0], self._run[-1]
        events: list[ChunksEmitted] = [r.event for r in self._run]  # type: ignore[misc]
        chunks = sum(len(e.values) for e in events)
        size = sum(e.size for e in events)
        totals = self._streams.setdefault(events[0].stream, [0, 0])
        totals[0] += chunks
        totals[1] += size
        self._run = []
        where = f"{first.position:>8}  {first.originator_version:>4}  {format_at(first.event.at)}"
        offsets = f"{events[0].first}-{events[-1].first + len(events[-1].values) - 1}"
        more = f" to position {last.position}" if len(events) > 1 else ""
        return [
            f"{where}  ChunksEmitted x{len(events)}(stream={events[0].stream}, "
            f"offsets={offsets}, bytes={size}){more}"
        ]

    def summary(self) -> list[str]:
        """Each stream in one line."""
        return [
            summary_line(name, chunks, size, self._decided or name in self._closed)
            for name, (chunks, size) in self._streams.items()
        ] + [summary_line(name, 0, 0, True) for name in sorted(self._closed - set(self._streams))]
