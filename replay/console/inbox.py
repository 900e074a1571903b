"""The inbox of open asks (``/inbox``, ``/api/inbox``), and the answer act (issue 46 on
issue 44's asks: ``inv.ask``, rules 30-32).

The asks are the fold's own inbox (:func:`tasktrail.domain.tasks.ask_inbox.inbox`, what
``Scheduler.inbox`` answers) over the follower's world; an answer is
``Scheduler.answer(task_id, topic, value, actor=, reason=)``, through :mod:`.acts` as every
act. The page lists the open asks oldest first (``?mine=1``: those the signed-in actor may
answer), with what each asks, who may answer and until when; a signed-in actor
approves (``true``), rejects (``false``) or answers with any JSON value, with a reason.
The answer is ``Scheduler.answer`` as the token's actor: refused (409, rule 31) where
the actor is not an assignee, and (rule 32) once answered.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tasktrail.domain import InvalidArgument, Scheduler, system_clock
from tasktrail.domain.tasks.ask_inbox import inbox

from .html.layout import Viewer, page, task_href, task_link, text, value_text, when
from .model.follow import Follower
from .web import Console, html, params
from .web import answer as json_answer

Bound = Callable[[Callable[[Console, Request], Awaitable[Response]]], Any]
LIMIT = 500


def open_asks(
    follower: Follower, *, topic: str | None = None, assignee: str | None = None
) -> list[dict[str, Any]]:
    """The open asks, oldest first, as ``Ask.to_dict()`` (the fold's own inbox over the
    follower's world; an ask past its deadline is not listed: rule 30)."""
    with follower.lock:
        found = inbox(follower.world, system_clock(), topic=topic, assignee=assignee, limit=LIMIT)
        return [ask.to_dict() for ask in found]


def answer(
    scheduler: Scheduler, task_id: str, fields: Mapping[str, Any], actor: str, typed: bool
) -> dict[str, Any]:
    """``Scheduler.answer`` of ``task_id``'s ask on ``fields["topic"]`` with
    ``fields["value"]`` (JSON; a form's ``approve``/``reject`` is ``true``/``false``)."""
    topic = fields.get("topic")
    if not isinstance(topic, str) or not topic:
        raise InvalidArgument("answer needs the ask's topic", task_id=task_id)
    value = fields.get("value")
    if not typed:
        verdict = fields.get("verdict")
        if verdict in ("approve", "reject"):
            value = verdict == "approve"
        elif isinstance(value, str) and value.strip():
            try:
                value = json.loads(value)
            except ValueError:
                raise InvalidArgument(f"value: {value[:80]!r} is not JSON") from None
    reason = fields.get("reason") if isinstance(fields.get("reason"), str) else None
    scheduler.answer(task_id, topic, value, actor=actor, reason=reason)
    said = f"answered {task_id}'s ask on {topic!r} by {actor}"
    return {"task_id": task_id, "topic": topic, "value": value, "recorded": True, "message": said}


def routes(bound: Bound) -> list[BaseRoute]:
    """The inbox's page and API."""
    return [Route("/inbox", bound(inbox_page)), Route("/api/inbox", bound(inbox_api))]


async def inbox_api(console: Console, request: Request) -> Response:
    query = params(request)
    found = await console.read(
        lambda: open_asks(
            console.follower,
            topic=query.get("topic") or None,
            assignee=query.get("assignee") or None,
        )
    )
    return json_answer({"asks": found, "position": console.follower.position})


async def inbox_page(console: Console, request: Request) -> Response:
    viewer = console.viewer(request)
    mine = request.query_params.get("mine") == "1" and viewer.actor is not None
    found = await console.read(
        lambda: open_asks(console.follower, assignee=viewer.actor if mine else None)
    )
    if request.query_params.get("part") == "live":
        return html(live_inbox(found, viewer))
    toggle = (
        '<p class="note"><a href="/inbox">every open ask</a></p>'
        if mine
        else ('<p class="note"><a href="/inbox?mine=1">only mine</a></p>' if viewer.actor else "")
    )
    body = (
        f'{console.notes()}<h1>Inbox</h1>{toggle}<div id="live">{live_inbox(found, viewer)}</div>'
    )
    return html(
        page("Inbox", body, viewer=viewer, store=console.store_name, here="/inbox", watch="tasks")
    )


def live_inbox(found: list[dict[str, Any]], viewer: Viewer) -> str:
    if not found:
        return '<p class="empty">No open ask.</p>'
    rows = "".join(_row(ask, viewer) for ask in found)
    acts = "<th>answer</th>" if viewer.can_act else ""
    return (
        '<table class="tasks"><thead><tr><th>task</th><th>kind</th><th>topic</th><th>asks</th>'
        f"<th>asked</th><th>until</th><th>who may answer</th>{acts}</tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _row(ask: dict[str, Any], viewer: Viewer) -> str:
    assignees = ", ".join(text(a, 60) for a in ask["assignees"]) or "anyone"
    cell = ""
    if viewer.can_act:
        href = text(task_href(ask["task_id"], "answer"))
        cell = (
            f'<td><form class="act" method="post" action="{href}" data-act="answer">'
            f'<input type="hidden" name="csrf" value="{text(viewer.csrf)}">'
            f'<input type="hidden" name="topic" value="{text(ask["topic"])}">'
            '<input name="reason" placeholder="reason" required>'
            '<button type="submit" name="verdict" value="approve">Approve</button>'
            '<button type="submit" name="verdict" value="reject">Reject</button></form></td>'
        )
    return (
        f'<tr data-task="{text(ask["task_id"])}"><td class="id">{task_link(ask["task_id"])}</td>'
        f"<td>{text(ask['kind'], 60)}</td><td>{text(ask['topic'], 120)}</td>"
        f"<td>{value_text(ask['request'], 600)}</td><td>{when(ask['asked_at'])}</td>"
        f"<td>{when(ask['deadline']) or 'no deadline'}</td><td>{assignees}</td>{cell}</tr>"
    )


__all__ = ["answer", "open_asks", "routes"]
