"""A streaming task's output (issue 44's streams: ``inv.emit``, rules 28-29), read from
its own events: ``ChunksEmitted`` (``stream``, ``first``, ``values``) and
``StreamClosed``. Each chunk event is news on ``/api/stream`` naming its task, so a task's
page (:mod:`..html.task_page`), this output with it, is fetched again as it is emitted: no
stream of its own is held open. ``GET /api/tasks/{id}/stream?stream=out&after=N``
answers the chunks after offset N (:func:`stream_chunks`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tasktrail.domain import UnknownTask
from tasktrail.domain.frozen import thawed
from tasktrail.domain.store.recorded import Recorded
from tasktrail.domain.tasks.streams import ChunksEmitted, StreamClosed

from .follow import Follower


@dataclass
class Output:
    """One stream of a task: its chunks in offset order, and whether it is closed."""

    name: str
    chunks: list[Any] = field(default_factory=list)
    closed: bool = False

    def text(self) -> str:
        """The output as a person reads it: text chunks joined as they came (a model's
        tokens), other values one JSON a line."""
        if all(isinstance(c, str) for c in self.chunks):
            return "".join(self.chunks)
        return "\n".join(
            c if isinstance(c, str) else json.dumps(c, ensure_ascii=False) for c in self.chunks
        )


def outputs(records: Iterable[Recorded]) -> dict[str, Output]:
    """Each stream's output from a task's events (in log order); the task's end closes
    every stream it left open (rule 29)."""
    found: dict[str, Output] = {}
    for recorded in records:
        event = recorded.event
        if isinstance(event, ChunksEmitted):
            found.setdefault(event.stream, Output(event.stream)).chunks.extend(thawed(event.values))
        elif isinstance(event, StreamClosed):
            found.setdefault(event.stream, Output(event.stream)).closed = True
        elif type(event).__name__ == "TaskEnded":
            for stream in found.values():
                stream.closed = True
    return found


def stream_chunks(follower: Follower, task_id: str, name: str, after: int) -> dict[str, Any]:
    """The chunks of ``task_id``'s stream ``name`` after offset ``after``, and whether the
    stream is closed (:class:`UnknownTask` for a task the store does not have)."""
    with follower.lock:
        records = follower.store.stream_records(task_id)
    if not records:
        raise UnknownTask(task_id)
    stream = outputs(records).get(name, Output(name))
    chunks = [
        {"offset": offset, "value": value}
        for offset, value in enumerate(stream.chunks)
        if offset > after
    ]
    return {"task_id": task_id, "stream": name, "closed": stream.closed, "chunks": chunks}
