"""The JSON API under ``/api/`` (docs/console.md): the reads the pages make, the acts,
and the news as server-sent events.

Reads: ``GET /api/tasks`` (the list's filters: ``q``, ``kind``, ``status``, ``outcome``,
``since``, ``until``, ``order``, ``page``, ``per_page``), ``/api/tasks/{id}``,
``/api/tasks/{id}/history``, ``/api/workers``, ``/api/runs``, ``/api/schedules``,
``/api/status``. Acts: ``POST /api/tasks`` (submit), ``POST /api/tasks/{id}/abort``,
``retry``, ``fork``, ``send``, each a JSON object of its fields with ``reason``, under
``Authorization: Bearer TOKEN``. ``GET /api/stream``: one server-sent event a
appended event (``event: appended``, ``id:`` its position, ``data:`` a JSON object
naming its stream, task and type); ``Last-Event-ID`` or ``?after=N`` first sends what
was appended after position N (at most :data:`BACKLOG` events), then the news.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tasktrail.domain import InvalidArgument, UnknownTask

from .acts import TASK_ACTS, perform
from .model.fleet import RunQuery, runs, schedules, workers
from .model.follow import Notice
from .model.listing import TaskQuery, list_tasks
from .model.streams import stream_chunks
from .model.task_view import task_view
from .web import Console, Denied, answer, body_fields, check_act, params, refusal, task_path

BACKLOG = 10_000
"""Past events ``/api/stream`` sends at most before the news (``?after=N``)."""
KEEP_ALIVE_S = 15.0
"""A comment line this often keeps a quiet stream's connection open through proxies."""
QUEUE_LIMIT = 50_000
"""Notices a slow reader may fall behind by before its stream is ended (it reconnects
with ``Last-Event-ID`` and catches up from the log)."""


async def status(console: Console, request: Request) -> Response:
    return answer(
        {
            **console.follower.status(),
            "store": console.store_name,
            "acts": console.tokens is not None,
        }
    )


async def tasks(console: Console, request: Request) -> Response:
    if request.method == "POST":
        return await _act(console, request, None, "submit")
    try:
        query = TaskQuery.parse(params(request))
    except InvalidArgument as error:
        return answer({"error": str(error)}, 400)
    listed = await console.read(lambda: list_tasks(console.follower, query))
    return answer({**listed.to_dict(), "ready": console.follower.ready.is_set()})


async def task(console: Console, request: Request) -> Response:
    found = task_path(request, "/api/tasks/")
    if found is None:
        return answer({"error": "no such path"}, 404)
    task_id, rest = found
    if request.method == "POST":
        if rest not in TASK_ACTS:
            return answer({"error": f"no act {rest!r}: one of {', '.join(TASK_ACTS)}"}, 404)
        return await _act(console, request, task_id, rest)
    if rest == "stream":
        return await _stream(console, request, task_id)
    if rest not in ("", "history"):
        return answer({"error": "no such path"}, 404)
    try:
        view = await console.read(lambda: task_view(console.follower, task_id))
    except UnknownTask:
        return answer({"error": f"no task {task_id} in this store"}, 404)
    if rest == "history":
        return answer({"task_id": task_id, "position": view.position, "events": view.history()})
    return answer(view.to_dict())


async def _stream(console: Console, request: Request, task_id: str) -> Response:
    """``GET /api/tasks/{id}/stream?stream=out&after=N``: the chunks after offset N."""
    name = request.query_params.get("stream", "out")
    raw = request.query_params.get("after", "-1")
    try:
        after = int(raw)
    except ValueError:
        return answer({"error": f"after {raw!r}: an offset (a whole number)"}, 400)
    try:
        found = await console.read(lambda: stream_chunks(console.follower, task_id, name, after))
    except UnknownTask:
        return answer({"error": f"no task {task_id} in this store"}, 404)
    return answer(found)


async def workers_api(console: Console, request: Request) -> Response:
    found = await console.read(lambda: workers(console.follower))
    return answer({"workers": found, "position": console.follower.position})


async def runs_api(console: Console, request: Request) -> Response:
    try:
        query = RunQuery.parse(params(request))
    except InvalidArgument as error:
        return answer({"error": str(error)}, 400)
    shown, total = await console.read(lambda: runs(console.follower, query))
    return answer({"runs": [r.to_dict() for r in shown], "total": total, "page": query.page})


async def schedules_api(console: Console, request: Request) -> Response:
    found = await console.read(lambda: schedules(console.follower))
    return answer({"schedules": found, "position": console.follower.position})


async def _act(console: Console, request: Request, task_id: str | None, act: str) -> Response:
    try:
        fields, typed = await body_fields(request)
        who = check_act(console, request, fields)
        done = await asyncio.to_thread(
            perform, console.location, act, task_id, fields, who.actor, typed=typed
        )
    except Denied as denied:
        return denied.response()
    except Exception as error:
        code, said = refusal(error)
        return answer(said, code)
    return answer(done)


async def stream(console: Console, request: Request) -> Response:
    """The news as server-sent events (see the module)."""
    raw = request.headers.get("last-event-id") or request.query_params.get("after", "")
    try:
        after = int(raw) if raw.strip() else None
    except ValueError:
        return answer({"error": f"after {raw!r}: a position (a whole number)"}, 400)
    follower = console.follower
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[list[Notice] | None] = asyncio.Queue()
    backlog: list[int] = [0]

    def push(notices: list[Notice]) -> None:  # the follower's thread
        with contextlib.suppress(RuntimeError):  # the loop closed: the stream is over
            loop.call_soon_threadsafe(_put, queue, notices, backlog)

    unsubscribe = follower.subscribe(push)
    since = follower.position  # every later event comes through push
    past: list[Notice] = []
    if after is not None and after < since:
        past = await console.read(lambda: _past(console, after, since))

    async def events() -> AsyncIterator[str]:
        try:
            yield f"retry: 1000\n: position {since}\n\n"
            sent = after if after is not None else since
            if past:
                yield _format(past)
                sent = past[-1].position
            while True:
                try:
                    notices = await asyncio.wait_for(queue.get(), KEEP_ALIVE_S)
                except TimeoutError:
                    yield ": still here\n\n"
                    continue
                if notices is None:  # the server stops, or the reader fell behind
                    return
                fresh = [n for n in notices if n.position > sent]
                while not queue.empty():
                    more = queue.get_nowait()
                    if more is None:
                        return
                    fresh += [n for n in more if n.position > sent]
                backlog[0] = 0
                if fresh:
                    sent = fresh[-1].position
                    yield _format(fresh)
        finally:
            unsubscribe()

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _put(queue: asyncio.Queue[list[Notice] | None], notices: list[Notice], held: list[int]) -> None:
    # None ends the stream: the server stops (an empty batch), or the reader fell too far
    # behind (it comes back with Last-Event-ID and catches up from the log).
    held[0] += len(notices)
    queue.put_nowait(None if not notices or held[0] > QUEUE_LIMIT else notices)


def _past(console: Console, after: int, upto: int) -> list[Notice]:
    """What was appended after ``after`` up to ``upto``, at most :data:`BACKLOG` events
    (the last of them), read from the store under the follower's lock."""
    follower = console.follower
    start = max(after, upto - BACKLOG)
    found: list[Notice] = []
    with follower.lock:
        for recorded in follower.store.read(after=start, until=upto, skip=lambda _: None):
            event = recorded.event
            cls = type(event)
            stream = event.task_id if cls.task_stream else event.stream_id()
            owner = getattr(event, "owner_id", None) if cls.__name__ == "TaskSubmitted" else None
            found.append(
                Notice(
                    recorded.position,
                    stream,
                    getattr(event, "task_id", None),
                    cls.__name__,
                    owner if isinstance(owner, str) else None,
                )
            )
    return found


def _format(notices: list[Notice]) -> str:
    return "".join(
        f"id: {n.position}\nevent: appended\ndata: {orjson.dumps(n.to_dict()).decode()}\n\n"
        for n in notices
    )


__all__: list[Any] = ["stream", "task", "tasks"]
