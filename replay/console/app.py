"""The console as an ASGI application (Starlette): its routes, the page assets, and a
lifespan that starts the follower and closes it (and the store) when the server stops.

:func:`create_app` takes a :class:`~.web.Console`; :func:`console_for` makes one from a
store's location and a token file. ``tasktrail serve`` runs it under uvicorn
(:mod:`.server`); a test can drive it with ``httpx.ASGITransport`` or a real server.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tasktrail.domain.store.location import parse_location

from . import api, inbox, pages
from .html.assets import CSS, SCRIPT
from .model.follow import Follower
from .tokens import Tokens
from .web import Console

Handler = Callable[[Console, Request], Awaitable[Response]]


def console_for(
    location: str | os.PathLike[str],
    token_file: str | os.PathLike[str] | None = None,
    *,
    archive: str | os.PathLike[str] | None = None,
) -> Console:
    """A console of the store at ``location`` (opened read-only now: a bad location is
    :class:`~tasktrail.domain.StoreError`), acting with the tokens of ``token_file``
    (``None``: acts are off), reading across the archive folder ``archive`` (``None``:
    its pages say which archived ranges they skip; not a folder:
    :class:`~tasktrail.domain.InvalidArgument`). Its follower starts with the application."""
    tokens = Tokens.load(token_file) if token_file is not None else None
    text = os.fspath(location)
    follower = Follower(text, archive=archive)
    name = str(parse_location(text)) if "://" in text else text
    return Console(follower, tokens, name, text)


def create_app(console: Console) -> Starlette:
    """The console's application: pages, ``/api/``, ``/static/``."""

    def bound(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        return partial(handler, console)

    routes: list[BaseRoute] = [
        Route("/", bound(pages.list_page)),
        Route("/tasks", bound(pages.act_form), methods=["POST"]),
        Route("/tasks/{rest:path}", bound(pages.task_page), methods=["GET", "HEAD"]),
        Route("/tasks/{rest:path}", bound(pages.act_form), methods=["POST"]),
        Route("/workers", bound(pages.workers_page)),
        Route("/runs", bound(pages.runs_page)),
        Route("/schedules", bound(pages.schedules_page)),
        Route("/login", bound(pages.login_page), methods=["GET", "HEAD"]),
        Route("/login", bound(pages.login), methods=["POST"]),
        Route("/logout", bound(pages.logout), methods=["POST"]),
        Route("/static/console.css", _asset(CSS, "text/css; charset=utf-8")),
        Route("/static/console.js", _asset(SCRIPT, "text/javascript; charset=utf-8")),
        Route("/api/status", bound(api.status)),
        Route("/api/stream", bound(api.stream)),
        Route("/api/tasks", bound(api.tasks), methods=["GET", "HEAD", "POST"]),
        Route("/api/tasks/{rest:path}", bound(api.task), methods=["GET", "HEAD", "POST"]),
        Route("/api/workers", bound(api.workers_api)),
        Route("/api/runs", bound(api.runs_api)),
        Route("/api/schedules", bound(api.schedules_api)),
    ]

    routes += inbox.routes(bound)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not console.follower.started:
            console.follower.start()
        try:
            yield
        finally:
            console.follower.close()

    return Starlette(routes=routes, lifespan=lifespan)


def _asset(content: str, media_type: str) -> Callable[[Request], Awaitable[Response]]:
    body = content.encode("utf-8")

    async def serve(request: Request) -> Response:
        return Response(
            body,
            media_type=media_type,
            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
        )

    return serve


__all__ = ["Console", "console_for", "create_app"]
