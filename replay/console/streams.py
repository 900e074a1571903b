"""A streaming task's output on its page and in the API (issue 46 on issue 44's streams):
NOT WIRED.

Nothing imports this module yet: the chunks it shows are issue 44's ``ChunksEmitted``
events (``stream``, ``first``, ``values``) and ``StreamClosed`` (``stream``), read by
their names and fields from the task's own events, which the task's page reads already
(:class:`~.model.task_view.TaskView`'s ``events``). Each chunk event is news on
``/api/stream`` naming its task, so the page's live part, this output with it, is fetched
again as it is emitted: no stream of its own is held open. Once issue 44 lands the
coordinator wires it:

1. ``html/task_page.py``, in ``live_task``: ``+ streams.output_html(view)`` after the
   summary;
2. ``api.py``, in ``task``: ``if rest == "stream": return await streams.stream_api(console,
   request, task_id)`` before the 404 for an unknown path (``GET
   /api/tasks/{id}/stream?stream=out&after=N``: the chunks after offset N).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tasktrail.domain.frozen import thawed
from tasktrail.domain.store.recorded import Recorded

from .html.layout import text
from .model.task_view import TaskView
from .web import Console, answer

SHOWN_CHARS = 20_000
"""The most of a stream's output a page shows (its end: the latest output)."""


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
        kind = type(event).__name__
        if kind == "TaskEnded":
            for stream in found.values():
                stream.closed = True
        if kind == "ChunksEmitted":
            stream = found.setdefault(event.stream, Output(event.stream))  # type: ignore[attr-defined]
            stream.chunks.extend(thawed(event.values))  # type: ignore[attr-defined]
        elif kind == "StreamClosed":
            found.setdefault(event.stream, Output(event.stream)).closed = True  # type: ignore[attr-defined]
    return found


def output_html(view: TaskView) -> str:
    """The task's streams as its page shows them (nothing for a task that emitted none)."""
    found = outputs(view.events)
    if not found:
        return ""
    parts = []
    for stream in found.values():
        said = stream.text()
        cut = ""
        if len(said) > SHOWN_CHARS:
            cut = f'<p class="note">The last {SHOWN_CHARS:,} characters of {len(said):,}.</p>'
            said = said[-SHOWN_CHARS:]
        state = "closed" if stream.closed else "open: more may come"
        parts.append(
            f'<h3>{text(stream.name)} <span class="muted">{len(stream.chunks):,} chunks, '
            f'{state}</span></h3>{cut}<pre class="stream">{text(said, SHOWN_CHARS)}</pre>'
        )
    return f'<section class="card" id="streams"><h2>Output</h2>{"".join(parts)}</section>'


async def stream_api(console: Console, request: Request, task_id: str) -> Response:
    """``GET /api/tasks/{id}/stream?stream=out&after=N``: the chunks after offset N."""
    name = request.query_params.get("stream", "out")
    raw = request.query_params.get("after", "-1")
    try:
        after = int(raw)
    except ValueError:
        return answer({"error": f"after {raw!r}: an offset (a whole number)"}, 400)
    follower = console.follower

    def read() -> list[Recorded]:
        with follower.lock:
            return follower.store.stream_records(task_id)

    records = await console.read(read)
    if not records:
        return answer({"error": f"task {task_id}: no such task in this store"}, 404)
    stream = outputs(records).get(name, Output(name))
    chunks = [
        {"offset": offset, "value": value}
        for offset, value in enumerate(stream.chunks)
        if offset > after
    ]
    return answer({"task_id": task_id, "stream": name, "closed": stream.closed, "chunks": chunks})
