"""The console's pages: the task list (``/``), a task (``/tasks/{id}``), workers, runs,
schedules, and signing in and out. Each page is whole HTML; ``?part=live`` answers only
its live part, what the page's script swaps in when the news says it changed. A form
posted to an act without the script (``/tasks``, ``/tasks/{id}/ACT``) is answered with a
page saying what was done, or why not."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from tasktrail.domain import InvalidArgument, UnknownTask

from .acts import TASK_ACTS, perform
from .html.fleet_pages import (
    live_runs,
    live_schedules_html,
    live_workers,
    runs_body,
    schedules_body,
    workers_body,
)
from .html.layout import Viewer, error_box, page, task_href, text
from .html.list_page import list_body, live_list
from .html.task_page import live_task, task_body
from .model.fleet import RunQuery, runs, schedules, workers
from .model.listing import TaskQuery, kinds, list_tasks
from .model.task_view import task_view
from .tokens import COOKIE
from .web import (
    Console,
    Denied,
    answer,
    body_fields,
    check_act,
    html,
    params,
    refusal,
    task_path,
    wants_json,
)


def live_part(request: Request) -> bool:
    return request.query_params.get("part") == "live"


async def list_page(console: Console, request: Request) -> Response:
    viewer = console.viewer(request)
    try:
        query = TaskQuery.parse(params(request))
    except InvalidArgument as error:
        if live_part(request):
            return html(error_box(str(error)), 400)
        body = list_body(None, TaskQuery(), [], viewer, str(error), console.notes())
        return html(_page(console, "Tasks", body, viewer, "/", "tasks"), 400)
    listed = await console.read(lambda: list_tasks(console.follower, query))
    if live_part(request):
        return html(live_list(listed))
    known = await console.read(lambda: kinds(console.follower))
    body = list_body(listed, query, known, viewer, None, console.notes())
    return html(_page(console, "Tasks", body, viewer, "/", "tasks"))


async def task_page(console: Console, request: Request) -> Response:
    found = task_path(request, "/tasks/")
    if found is None or found[1]:
        return html(_missing(console, request, "No such page."), 404)
    task_id = found[0]
    viewer = console.viewer(request)
    try:
        view = await console.read(lambda: task_view(console.follower, task_id))
    except UnknownTask:
        status = console.follower.status()
        said = f"No task {task_id} in this store" + (
            "." if status["ready"] else " yet: the console is still reading the store."
        )
        if live_part(request):
            return html(error_box(said), 404)
        return html(_missing(console, request, said), 404)
    if live_part(request):
        return html(live_task(view))
    body = task_body(view, viewer, console.notes())
    return html(_page(console, task_id, body, viewer, task_href(task_id), "tree"))


async def workers_page(console: Console, request: Request) -> Response:
    rows = await console.read(lambda: workers(console.follower))
    if live_part(request):
        return html(live_workers(rows))
    viewer = console.viewer(request)
    body = workers_body(rows, console.notes())
    # Leases are renewed outside the log: the page also looks every few seconds.
    return html(_page(console, "Workers", body, viewer, "/workers", "tasks", poll_s=5))


async def runs_page(console: Console, request: Request) -> Response:
    viewer = console.viewer(request)
    try:
        query = RunQuery.parse(params(request))
    except InvalidArgument as error:
        return html(_page(console, "Runs", error_box(str(error)), viewer, "/runs", ""), 400)
    shown, total = await console.read(lambda: runs(console.follower, query))
    if live_part(request):
        return html(live_runs(shown, total, query))
    body = runs_body(shown, total, query, console.notes())
    return html(_page(console, "Runs", body, viewer, "/runs", "runs"))


async def schedules_page(console: Console, request: Request) -> Response:
    found = await console.read(lambda: schedules(console.follower))
    if live_part(request):
        return html(live_schedules_html(found))
    viewer = console.viewer(request)
    body = schedules_body(found, console.notes())
    return html(_page(console, "Schedules", body, viewer, "/schedules", "schedules", poll_s=30))


async def act_form(console: Console, request: Request) -> Response:
    """A form posted to ``/tasks`` (submit) or ``/tasks/{id}/ACT``: JSON for the page's
    script (``Accept: application/json``), else a page saying what was done."""
    if request.url.path.rstrip("/") == "/tasks":
        task_id, act = None, "submit"
    else:
        found = task_path(request, "/tasks/")
        if found is None or found[1] not in TASK_ACTS:
            return answer({"error": "no such act"}, 404)
        task_id, act = found
    back = task_href(task_id) if task_id is not None else "/"
    try:
        fields, typed = await body_fields(request)
        who = check_act(console, request, fields)
        done = await _perform(console, act, task_id, fields, who.actor, typed)
    except Denied as denied:
        if wants_json(request):
            return denied.response()
        page = _said(console, request, str(denied), back, ok=False)
        return html(page, denied.status, denied.headers)
    except Exception as error:
        status, refused = refusal(error)
        if wants_json(request):
            return answer(refused, status)
        return html(_said(console, request, refused["error"], back, ok=False), status)
    if wants_json(request):
        return answer(done)
    target = task_href(done["task_id"]) if done.get("task_id") else back
    return html(_said(console, request, done["message"], target, ok=True))


async def _perform(
    console: Console, act: str, task_id: str | None, fields: dict[str, Any], actor: str,
    typed: bool,
) -> dict[str, Any]:  # fmt: skip
    return await asyncio.to_thread(
        perform, console.location, act, task_id, fields, actor, typed=typed
    )


async def login_page(console: Console, request: Request) -> Response:
    if console.tokens is None:
        return html(_missing(console, request, "Acts are off: no --token-file was given."), 404)
    after = _local(request.query_params.get("next", "/"))
    failed = request.query_params.get("failed") == "1"
    body = (
        "<h1>Sign in to act</h1>"
        + (error_box("That is not a token this console knows.") if failed else "")
        + f'<form class="login" method="post" action="/login?{urlencode({"next": after})}">'
        "<label>your token (a line of the console's token file names you by it)"
        '<input type="password" name="token" autocomplete="current-password" required '
        'autofocus></label><button type="submit">Sign in</button></form>'
        '<p class="note">Every act you take is recorded with the name the token file gives '
        "your token.</p>"
    )
    viewer = console.viewer(request)
    return html(_page(console, "Sign in", body, viewer, "/login", ""))


async def login(console: Console, request: Request) -> Response:
    """Check a typed token; set the session cookie (HttpOnly, SameSite=Strict)."""
    after = _local(request.query_params.get("next", "/"))
    if console.tokens is None:
        return answer({"error": "acts are off"}, 404)
    try:
        fields, _ = await body_fields(request)
    except InvalidArgument as error:
        return answer({"error": str(error)}, 400)
    token = fields.get("token")
    actor = console.tokens.actor_of_token(token) if isinstance(token, str) else None
    if actor is None or not isinstance(token, str):
        return RedirectResponse(f"/login?{urlencode({'next': after, 'failed': '1'})}", 303)
    response = RedirectResponse(after, 303)
    response.set_cookie(
        COOKIE, console.tokens.digest(token), httponly=True, samesite="strict", path="/"
    )
    return response


async def logout(console: Console, request: Request) -> Response:
    try:
        fields, _ = await body_fields(request)
        check_act(console, request, fields)
    except Denied as denied:
        return denied.response()
    response = RedirectResponse("/", 303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _page(
    console: Console,
    title: str,
    body: str,
    viewer: Viewer,
    here: str,
    watch: str,
    poll_s: float | None = None,
) -> str:
    return page(
        title, body, viewer=viewer, store=console.store_name, here=here, watch=watch,
        poll_s=poll_s,
    )  # fmt: skip


def _missing(console: Console, request: Request, said: str) -> str:
    body = f'{error_box(said)}<p><a href="/">All tasks</a></p>'
    return _page(console, "Not found", body, console.viewer(request), "", "")


def _said(console: Console, request: Request, said: str, back: str, *, ok: bool) -> str:
    box = f'<p class="{"warn" if ok else "error"}">{text(said, 2_000)}</p>'
    body = f'<h1>{"Done" if ok else "Refused"}</h1>{box}<p><a href="{text(back)}">Back</a></p>'
    return _page(console, "Done" if ok else "Refused", body, console.viewer(request), "", "")


def _local(target: str) -> str:
    """A place to go back to on this console only (never another site)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
